"""A write workload against an ensemble: keeps ``in_flight`` writes outstanding and records
every outcome, so a run can be checked ("nothing acknowledged was lost") and measured.

Each write's value is unique; its outcome is ``ok`` (acknowledged, with its zxid),
``failed`` (refused before it left a replica: it did not happen) or ``unknown`` (the replica
lost its leader after forwarding it, or it timed out: it may or may not have committed).
Records are also written as client trace rows for the pipeline.

The workload speaks the ensemble's service. On ``service: broadcast`` a write is a raw value
and the replicas' histories carry its digest, so the check matches values. On ``service:
zookeeper`` a write is a ZooKeeper ``set`` through a session (raw values are refused there: the
data tree would commit them as error txns that change nothing); the committed txn is the data
tree's encoding, which the client cannot predict, so such a record carries no digest and the
check asks only that its zxid is on every replica (which also agree with each other).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zabray.client.histories import HistoryRecorder
from zabray.client.session import ConnectionLossError
from zabray.errors import ConfigError, NoQuorumError, UncertainOutcomeError, ZabError
from zabray.trace import records as trace
from zabray.tree.errors import NodeExistsError, SessionExpiredError, SessionMovedError

if TYPE_CHECKING:
    from zabray.driver.ensemble import Ensemble


@dataclass
class OpRecord:
    value_digest: str | None
    invoke_t: float
    complete_t: float
    outcome: str
    zxid: int | None
    op: str = "write"
    path: str | None = None


@dataclass
class WorkloadResult:
    records: list[OpRecord] = field(default_factory=list)

    @property
    def acked(self) -> dict[int, str | None]:
        return {r.zxid: r.value_digest for r in self.records if r.outcome == "ok" and r.zxid is not None}

    def count(self, outcome: str) -> int:
        return sum(1 for r in self.records if r.outcome == outcome)

    def latencies_ms(self) -> list[float]:
        return sorted((r.complete_t - r.invoke_t) * 1000 for r in self.records if r.outcome == "ok")

    def throughput(self) -> float:
        ok = [r.complete_t for r in self.records if r.outcome == "ok"]
        if len(ok) < 2:
            return 0.0
        return len(ok) / (max(ok) - min(r.invoke_t for r in self.records))

    def longest_pause(self, start: float, end: float) -> float:
        """The longest time in [start, end] with no write acknowledged: the unavailability a
        client saw, measured from its own acknowledgements (no clock of the cluster involved)."""
        done = sorted(r.complete_t for r in self.records if r.outcome == "ok" and start <= r.complete_t <= end)
        if not done:
            return end - start
        edges = [start, *done, end]
        return max(b - a for a, b in zip(edges, edges[1:], strict=False))

    def first_commit_after(self, t: float) -> float | None:
        after = [r.complete_t for r in self.records if r.outcome == "ok" and r.invoke_t >= t]
        return min(after) if after else None


class Workload:
    """Runs on the ensemble handle's client loop; ``start()`` returns at once, ``stop()`` waits."""

    def __init__(self, ens: Ensemble, *, in_flight: int = 100, size: int = 1024, timeout: float = 10.0,
                 session: int = 0, trace_dir: str | Path | None = None,
                 history: HistoryRecorder | None = None) -> None:
        if in_flight < 1 or size < 16:
            raise ConfigError(f"a workload needs in_flight >= 1 and size >= 16 bytes, got {in_flight} and {size}")
        self.ens = ens
        self.in_flight = in_flight
        self.size = size
        self.timeout = timeout
        self.session = session
        self.result = WorkloadResult()
        self._stop = False
        self._fut: object = None
        self._trace_path = Path(trace_dir) / f"client-{session}.jsonl" if trace_dir else None
        self.service = str(ens.info.get("config", {}).get("service", "broadcast"))
        self._zk: Any = None
        self._zk_lock: asyncio.Lock | None = None
        self.history = history  # zabray.client.histories: one ``write`` row per submit on key "log"

    def start(self) -> Workload:
        loop, _ = self.ens._ensure_client()
        self._fut = asyncio.run_coroutine_threadsafe(self._run(), loop.loop)
        return self

    def stop(self, timeout: float = 60.0) -> WorkloadResult:
        self._stop = True
        self._fut.result(timeout)  # type: ignore[attr-defined]
        if self._zk is not None:
            self._zk.close()
            self._zk = None
        if self._trace_path is not None:
            self._write_trace()
        return self.result

    async def _run(self) -> None:
        if self.service == "zookeeper":
            await self._run_zk()
            return
        _, client = self.ens._ensure_client()
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()
        # A window of in_flight writes: a free slot counter and one future to wake the loop
        # (asyncio.Semaphore's bookkeeping was a tenth of a loaded client's time).
        free = self.in_flight
        wake: asyncio.Future[None] | None = None

        def finished(t: asyncio.Task[None]) -> None:
            nonlocal free
            tasks.discard(t)
            free += 1
            if wake is not None and not wake.done():
                wake.set_result(None)

        i = 0
        prefix = f"{self.ens.name}-{self.session}-{time.time_ns()}-".encode()
        while not self._stop:
            if free == 0:
                wake = loop.create_future()
                await wake
                continue
            free -= 1
            value = (prefix + str(i).encode()).ljust(self.size, b".")
            i += 1
            t = loop.create_task(self._one(client, value))
            tasks.add(t)
            t.add_done_callback(finished)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _one(self, client, value: bytes) -> None:
        t0 = time.time()
        zxid = None
        d = trace.digest(value)
        p = self.history.invoke(f"broadcast-{self.session}", "log", "write", value=d) \
            if self.history is not None else None
        try:
            zxid = int(await client.submit(value, self.timeout))
            outcome = "ok"
            if p is not None:
                self.history.complete(p, "ok", zxid=zxid)  # type: ignore[union-attr]
        except (UncertainOutcomeError, NoQuorumError) as e:
            outcome = "unknown"
            if p is not None:
                self.history.failed(p, e)  # type: ignore[union-attr]
        except ZabError as e:
            outcome = "failed"
            if p is not None:
                self.history.failed(p, e)  # type: ignore[union-attr]
        self.result.records.append(OpRecord(d, t0, time.time(), outcome, zxid))

    # -- service: zookeeper ------------------------------------------------------------------------

    async def _zk_session(self) -> Any:
        """A live session (a new one after an expiry); made off the loop (its constructor blocks)."""
        if self._zk_lock is None:
            self._zk_lock = asyncio.Lock()
        async with self._zk_lock:  # many writes may find it expired at once: one new session
            if self._zk is None or self._zk.expired:
                old, self._zk = self._zk, None
                loop = asyncio.get_running_loop()
                if old is not None:
                    await loop.run_in_executor(None, old.close)
                self._zk = await loop.run_in_executor(None, lambda: self.ens.session(timeout=self.timeout))
            return self._zk

    async def _run_zk(self) -> None:
        """``set`` on ``in_flight`` znodes in turn, each with a unique value; a set's Stat names
        the zxid that wrote it (``mzxid``)."""
        base = f"/zabray-workload-{self.ens.name}-{self.session}-{time.time_ns()}"
        paths = [f"{base}/k{i}" for i in range(self.in_flight)]
        while not self._stop:  # the znodes themselves, retried through faults
            try:
                s = await self._zk_session()
                for p in [base, *paths]:
                    try:
                        await s.create_async(p)
                    except NodeExistsError:
                        pass
                break
            except ZabError:
                await asyncio.sleep(0.05)
        sem = asyncio.Semaphore(self.in_flight)
        tasks: set[asyncio.Task[None]] = set()
        i = 0
        while not self._stop:
            await sem.acquire()
            if self._stop:
                sem.release()
                break
            value = (f"{base}-{i}".encode()).ljust(self.size, b".")
            t = asyncio.ensure_future(self._one_zk(paths[i % len(paths)], value, sem))
            i += 1
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _one_zk(self, path: str, value: bytes, sem: asyncio.Semaphore) -> None:

        t0 = time.time()
        zxid = None
        try:
            s = await self._zk_session()
            zxid = int((await s.set_async(path, value)).mzxid)
            outcome = "ok"
        except (ConnectionLossError, SessionExpiredError, SessionMovedError, UncertainOutcomeError, NoQuorumError):
            outcome = "unknown"  # sent, and the session lost its replica or itself before the answer
        except ZabError:
            outcome = "failed"
        finally:
            sem.release()
        self.result.records.append(OpRecord(None, t0, time.time(), outcome, zxid, op="set", path=path))

    def _write_trace(self) -> None:
        assert self._trace_path is not None
        self._trace_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._trace_path, "a") as fh:
            for r in self.result.records:
                rec = trace.ClientOp(session=self.session, op=r.op, path=r.path, invoke_t=r.invoke_t, complete_t=r.complete_t,
                                     outcome=r.outcome, zxid=r.zxid, digest=r.value_digest)
                fh.write(json.dumps(trace.row(rec, run=self.ens.name, src=f"client-{self.session}", replica=-1,
                                              inc=0, t=r.complete_t), separators=(",", ":")) + "\n")


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def check_histories(histories: Mapping[int, Sequence[tuple[int, str]]], acked: dict[int, str | None]) -> list[str]:
    """Problems found: replicas whose delivered sequences disagree, acknowledged writes missing.

    An acknowledged write with digest None (a ZooKeeper write: the txn is the data tree's
    encoding) is checked by zxid alone; replicas must still agree on the value at that zxid."""
    problems: list[str] = []
    merged: dict[int, str] = {}
    for sid, h in histories.items():
        zs = [z for z, _ in h]
        if zs != sorted(zs) or len(set(zs)) != len(zs):
            problems.append(f"replica {sid} delivered out of order")
        for z, d in h:
            if merged.setdefault(z, d) != d:
                problems.append(f"replica {sid} delivered another value at zxid {trace_zxid(z)}")
    held = {sid: dict(h) for sid, h in histories.items()}
    first = {sid: (h[0][0] if h else None) for sid, h in histories.items()}
    for z, want in sorted(acked.items()):
        if want is not None and merged.get(z, want) != want:
            problems.append(f"acknowledged write {trace_zxid(z)} has another value in the history")
        for sid, hs in held.items():
            # A replica's in-memory history may start after a snapshot: check what it covers.
            start = first[sid]
            if (start is None or start <= z) and (z not in hs if want is None else hs.get(z) != want):
                problems.append(f"acknowledged write {trace_zxid(z)} missing on replica {sid}")
    return problems


def trace_zxid(z: int) -> str:
    return f"{z >> 32}:{z & 0xFFFFFFFF}"
