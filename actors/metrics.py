"""Per-replica metrics: kept by the replica, shown in its status, exported through Ray.

One ``ReplicaMetrics`` per ``ReplicaServer``. The replica feeds it three things: every core
step (``after_step``: elections are seen as state and phase changes), every group commit
(``fsync``: its duration and size) and its status (``snapshot`` reads the rest: commits,
outstanding proposals, sessions, watches, znodes, bytes on disk). ``status()`` carries the same
numbers under ``metrics``, so ``zabray status --json`` and Prometheus (via Ray's metrics agent,
``ray.util.metrics``) agree. Outside a Ray worker (a unit test) nothing is exported.

Names (all tagged ``ensemble`` and ``replica``): ``zabray_commits_total``,
``zabray_commits_per_second``, ``zabray_proposals_outstanding``, ``zabray_fsync_seconds``
(histogram), ``zabray_elections_total``, ``zabray_election_seconds`` (histogram: from entering
LOOKING to serving in the broadcast phase), ``zabray_sessions``, ``zabray_watches``,
``zabray_znodes``, ``zabray_disk_bytes``.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zabray.protocol.role import Phase

log = logging.getLogger(__name__)

FSYNC_BOUNDS_S = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
ELECTION_BOUNDS_S = [0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0]
EXPORT_EVERY_S = 1.0


class _Histogram:
    """Counts per bucket (upper bounds, plus +Inf), sum and count: what Prometheus keeps."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: list[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, v)] += 1  # the first bound >= v, else +Inf
        self.sum += v
        self.count += 1

    def view(self) -> HistogramView:
        return HistogramView(self.count, round(self.sum, 6),
                             tuple(zip([*self.bounds, math.inf], self.counts, strict=True)))


@dataclass(frozen=True, slots=True)
class HistogramView:
    """A histogram as Prometheus keeps it: ``buckets`` are (upper bound, observations in it),
    the last bound +Inf, each observation counted once (not cumulative)."""

    count: int
    sum_s: float
    buckets: tuple[tuple[float, int], ...]

    @property
    def mean_ms(self) -> float | None:
        return round(1000 * self.sum_s / self.count, 3) if self.count else None


@dataclass(frozen=True, slots=True)
class MetricsView:
    """A replica's metrics now: the numbers Ray exports (the module's docstring names them)."""

    commits: int
    commits_per_s: float
    proposals_outstanding: int
    """A leader's proposals not yet committed (0 elsewhere)."""
    fsync: HistogramView
    elections: int
    election: HistogramView
    """From entering LOOKING to serving in the broadcast phase."""
    sessions: int
    watches: int
    znodes: int
    disk_bytes: int


def disk_bytes(path: Path) -> int:
    """Bytes allocated on disk under ``path`` (preallocated log space included)."""
    total = 0
    stack = [str(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif e.is_file(follow_symlinks=False):
                        total += e.stat(follow_symlinks=False).st_blocks * 512
        except OSError:  # removed meanwhile
            continue
    return total


class ReplicaMetrics:
    def __init__(self, ensemble: str, sid: int) -> None:
        self.tags = {"ensemble": ensemble, "replica": str(sid)}
        self.fsync_hist = _Histogram(FSYNC_BOUNDS_S)
        self.election_hist = _Histogram(ELECTION_BOUNDS_S)
        self.elections = 0
        self._state: object = None
        self._looking_since: float | None = None
        self._rate = 0.0
        self._last: tuple[float, int] | None = None
        self._ray: dict[str, Any] | None = None
        self._fsync_unexported: list[float] = []  # for Ray's histogram, at the next export
        self._exported_commits = 0
        self._disk: tuple[float, int] | None = None  # (when, bytes): status is polled often

    # -- fed by the replica ---------------------------------------------------------------------

    def after_step(self, node: Any) -> None:
        """After each core step: an election starts when the replica enters LOOKING and ends
        when it serves in the broadcast phase (leader established, or synced with one)."""
        state = node.state
        if state is not self._state:
            self._state = state
            if getattr(state, "name", "") == "LOOKING" and self._looking_since is None:
                self._looking_since = time.monotonic()
        if self._looking_since is not None and node.role.phase is Phase.BROADCAST:
            took = time.monotonic() - self._looking_since
            self._looking_since = None
            self.elections += 1
            self.election_hist.observe(took)
            if self._ray is not None:
                self._ray["elections"].inc(1, tags=self.tags)
                self._ray["election_s"].observe(took, tags=self.tags)

    def fsync(self, seconds: float) -> None:
        """One group commit (write + fdatasync) took ``seconds``.

        Called between a group's fdatasync and the ACKs it releases, so it only keeps the
        sample: Ray's ``Histogram.observe`` measured 30 us there (a cold call in a busy worker),
        against 3 us each in the once-a-second export's loop."""
        self.fsync_hist.observe(seconds)
        if self._ray is not None:
            self._fsync_unexported.append(seconds)

    # -- read --------------------------------------------------------------------------------------

    def snapshot(self, server: Any) -> MetricsView:
        """The replica's metrics now (the same numbers Ray exports)."""
        node = server.node
        role = getattr(node, "role", None)
        outstanding = getattr(role, "outstanding", 0)  # a leader's (0 while it is still electing)
        zk = getattr(server.service, "svc", None)  # the pure ZooKeeper service, when hosted
        return MetricsView(
            commits=int(server.stats.get("delivered", 0)), commits_per_s=round(self._rate, 1),
            proposals_outstanding=int(outstanding), fsync=self.fsync_hist.view(), elections=self.elections,
            election=self.election_hist.view(), sessions=len(zk.tree.sessions()) if zk is not None else 0,
            watches=zk.watches.count() if zk is not None else 0, znodes=len(zk.tree) if zk is not None else 0,
            disk_bytes=self._disk_bytes(server.data_dir))

    def _disk_bytes(self, path: Path) -> int:
        now = time.monotonic()
        if self._disk is None or now - self._disk[0] > EXPORT_EVERY_S:
            self._disk = (now, disk_bytes(path))
        return self._disk[1]

    # -- export ------------------------------------------------------------------------------------

    def _make_ray_metrics(self) -> dict[str, Any]:
        from ray.util import metrics as m

        keys = tuple(self.tags)
        return {
            "commits": m.Counter("zabray_commits_total", "txns delivered (committed and applied)", tag_keys=keys),
            "rate": m.Gauge("zabray_commits_per_second", "txns delivered per second, last interval",
                            tag_keys=keys),
            "outstanding": m.Gauge("zabray_proposals_outstanding", "proposals not yet committed (leader)",
                                   tag_keys=keys),
            "fsync_s": m.Histogram("zabray_fsync_seconds", "one group commit: write + fdatasync",
                                   boundaries=FSYNC_BOUNDS_S, tag_keys=keys),
            "elections": m.Counter("zabray_elections_total", "elections this replica took part in to the end",
                                   tag_keys=keys),
            "election_s": m.Histogram("zabray_election_seconds", "from LOOKING to the broadcast phase",
                                      boundaries=ELECTION_BOUNDS_S, tag_keys=keys),
            "sessions": m.Gauge("zabray_sessions", "live ZooKeeper sessions", tag_keys=keys),
            "watches": m.Gauge("zabray_watches", "watches registered on this replica", tag_keys=keys),
            "znodes": m.Gauge("zabray_znodes", "znodes in the data tree", tag_keys=keys),
            "disk": m.Gauge("zabray_disk_bytes", "bytes allocated in the data directory", tag_keys=keys),
        }

    async def export_forever(self, server: Any) -> None:
        """Every second: update the commit rate and push the gauges to Ray's metrics agent."""
        try:
            self._ray = self._make_ray_metrics()
        except Exception:  # not in a Ray worker, or no metrics support: keep the numbers local
            log.info("replica metrics are not exported through Ray", exc_info=True)
            self._ray = None
        while True:
            self.tick(server)
            await asyncio.sleep(EXPORT_EVERY_S)

    def tick(self, server: Any) -> MetricsView:
        now, commits = time.monotonic(), int(server.stats.get("delivered", 0))
        if self._last is not None and now > self._last[0]:
            self._rate = (commits - self._last[1]) / (now - self._last[0])
        self._last = (now, commits)
        snap = self.snapshot(server)
        if self._ray is not None:
            r, t = self._ray, self.tags
            if commits > self._exported_commits:
                r["commits"].inc(commits - self._exported_commits, tags=t)
                self._exported_commits = commits
            pending, self._fsync_unexported = self._fsync_unexported, []
            for seconds in pending:
                r["fsync_s"].observe(seconds, tags=t)
            r["rate"].set(self._rate, tags=t)
            r["outstanding"].set(snap.proposals_outstanding, tags=t)
            r["sessions"].set(snap.sessions, tags=t)
            r["watches"].set(snap.watches, tags=t)
            r["znodes"].set(snap.znodes, tags=t)
            r["disk"].set(snap.disk_bytes, tags=t)
        return snap
