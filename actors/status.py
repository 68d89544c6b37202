"""What crosses Ray when the driver asks how an ensemble stands.

A running replica answers with a ``ReplicaReport`` (``ReplicaActor.status``). The controller
answers the driver with one ``ReplicaStatus`` per member: the report of a replica that runs,
what the disk holds of one that is down or paused (``DiskSummary``, read on its node), or why
neither is known. Never what a replica said before it stopped: a stale number is marked so.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields, is_dataclass
from typing import TYPE_CHECKING, Any

from actors.faultpoints import FaultsView
from actors.metrics import MetricsView
from zabray.protocol.messages import PeerState
from zabray.protocol.node import NodeStatus
from zabray.protocol.zxid import Zxid

if TYPE_CHECKING:  # a broadcast replica never imports the ZooKeeper service (nor makes one of these)
    from zabray.zk.service import ServiceStatus


@dataclass(frozen=True, slots=True)
class DiskSummary:
    """What a replica's disk holds, as ``zabray inspect`` reads it."""

    current_epoch: int
    accepted_epoch: int
    last_zxid: Zxid
    """The last txn in its log."""
    committed_through: Zxid
    """The zxid through which it knows its log committed."""
    incarnation: int | None
    """None: no ``incarnation`` file beside its store."""


@dataclass(frozen=True, slots=True)
class ReplicaReport:
    """What a running replica says of itself. ``node`` and what follows it are None while the
    replica is still starting (reading its disk)."""

    sid: int
    fatal: str | None
    """Why it stopped itself (an fsync failed), or None while it serves."""
    node: NodeStatus | None = None
    established: bool = False
    """A leader that a quorum acknowledged (NEWLEADER): it takes writes."""
    pid: int | None = None
    nice: int = 0
    stats: dict[str, int] | None = None
    """Its counters by name (messages sent and received per type, txns delivered, ...)."""
    transport: dict[str, int] | None = None
    """Its peer transport's counters (connections, authentication failures, ...)."""
    config: str = ""
    """The configuration it has in force, in ZooKeeper's dynamic-file form."""
    departed: int | None = None
    """The version of the configuration that removed it, if one did."""
    synced: tuple[int, ...] | None = None
    """On an established leader, its learners synced and following; None elsewhere."""
    zk: ServiceStatus | None = None
    metrics: MetricsView | None = None
    faults: FaultsView | None = None


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """One member of an ensemble, as its controller sees it now.

    Exactly one of ``report`` (it runs and answered), ``disk`` (it is down or paused, and its
    disk was read on its node) and ``unknown`` (why neither) is set. Epochs and zxids come from
    the first two; ``stale`` marks those read from a disk: the last the replica wrote."""

    sid: int
    state: str
    """LOOKING, FOLLOWING, LEADING or OBSERVING while it runs; STARTING, DOWN or PAUSED."""
    alive: bool
    observer: bool
    node: str | None
    """The Ray node it runs on (its id)."""
    pid: int | None
    incarnation: int | None
    stale: bool = False
    """True for a DOWN or PAUSED replica: epoch and zxids are what its disk holds."""
    report: ReplicaReport | None = None
    disk: DiskSummary | None = None
    unknown: str | None = None
    """Why a replica that does not run has no numbers ("the replica does not answer", ...)."""
    client: tuple[str, int] | None = None
    node_label: str | None = None
    home: str | None = None
    """Where it is placed (``homes``: a node's id or a host's label)."""
    zk_client: tuple[str, int] | None = None
    """ZooKeeper's client port (``service: zookeeper`` only): what kazoo and zkCli.sh dial."""
    zk_secure_client: tuple[str, int] | None = None
    """The TLS ZooKeeper client port (``zk_secure_client_port``), if any."""
    paused: bool = False
    lost: bool = False
    """Its host left the cluster; it comes back when the host does."""

    @property
    def known(self) -> bool:
        """Whether epoch and zxids are known (from the replica or its disk), not zeros for want."""
        return (self.report is not None and self.report.node is not None) or self.disk is not None

    @property
    def epoch(self) -> int:
        return self._node.current_epoch if self._node else self.disk.current_epoch if self.disk else 0

    @property
    def accepted_epoch(self) -> int:
        return self._node.accepted_epoch if self._node else self.disk.accepted_epoch if self.disk else 0

    @property
    def last_zxid(self) -> Zxid:
        return self._node.last_zxid if self._node else self.disk.last_zxid if self.disk else Zxid(0)

    @property
    def applied(self) -> Zxid:
        """The last txn it delivered; for a stale replica, the zxid through which its disk knows
        the log committed."""
        return self._node.applied if self._node else self.disk.committed_through if self.disk else Zxid(0)

    @property
    def leader(self) -> int:
        return self._node.leader if self._node else -1

    @property
    def phase(self) -> str | None:
        n = self._node
        return None if n is None else n.phase.value + (" (rejoining)" if n.rejoining else "")

    @property
    def rejoining(self) -> bool:
        return bool(self._node and self._node.rejoining)

    @property
    def config_version(self) -> int | None:
        """The version of the configuration it has in force (0: the static one); None unknown."""
        return self._node.config_version if self._node else None

    @property
    def voters(self) -> tuple[int, ...]:
        return self._node.voters if self._node else ()

    @property
    def observers(self) -> tuple[int, ...]:
        return self._node.observers if self._node else ()

    @property
    def stats(self) -> dict[str, int]:
        return dict(self.report.stats or {}) if self.report else {}

    @property
    def transport(self) -> dict[str, int]:
        return dict(self.report.transport or {}) if self.report else {}

    @property
    def metrics(self) -> MetricsView | None:
        return self.report.metrics if self.report else None

    @property
    def fatal(self) -> str | None:
        return self.report.fatal if self.report else None

    @property
    def crash_points(self) -> list[tuple[str, int]]:
        """The crash points armed on a running replica: (point, passes left before it fires)."""
        faults = self.report.faults if self.report else None
        return list(faults.crash_points) if faults else []

    @property
    def established_leader(self) -> bool:
        return (self.alive and not self.stale and self.report is not None and self.report.established
                and self._node is not None and self._node.state is PeerState.LEADING)

    def to_json(self) -> dict[str, Any]:
        """Every field, what the properties derive from them, and the report or disk summary
        nested whole, as plain JSON values (``zabray status --json``)."""
        derived = ("known", "epoch", "accepted_epoch", "last_zxid", "applied", "leader", "phase", "config_version",
                   "voters", "observers")
        out: dict[str, Any] = {f.name: _plain(getattr(self, f.name)) for f in fields(self)}
        return {**{k: out.pop(k) for k in ("sid", "state", "alive")}, **{k: _plain(getattr(self, k)) for k in derived},
                **out}

    @property
    def _node(self) -> NodeStatus | None:
        return self.report.node if self.report is not None else None


def _plain(v: object) -> Any:
    """``v`` as JSON values: a dataclass as an object, an enum by name (a string enum by value),
    an infinite bound as "+Inf"."""
    if is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in fields(v)}
    if isinstance(v, enum.StrEnum):
        return v.value
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, float) and math.isinf(v):
        return "+Inf"
    return v
