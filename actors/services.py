"""The services a replica hosts, behind one small interface (``HostedService``).

The replica's shell owns the core and the sockets; a service turns client frames into core
events and the core's client-facing actions into replies. Neither calls back into the shell:
``client``/``core``/``tick`` return the core events to run next, and the shell runs them after
the current step (``ReplicaServer._run``). ``core`` and ``tick`` get the core's role as it is
after the step: a service must know at once that its replica left broadcast.

``BroadcastService`` (the default) is plain atomic broadcast: SUBMIT -> a txn, COMMITTED/FAILED
back. ``ZooKeeperService`` (``actors.zkservice``, imported only by a replica that runs it) hosts
the pure ``zabray.zk.ZkService``; its connections are zabray's own sessions (the bespoke ``ZK``
frames of ``zabray.wire.bespoke``) and ZooKeeper's client protocol (``actors.zkport``) side by
side, each connection carrying the service's actions to its client through ``deliver``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, assert_never

from zabray.protocol.actions import Committed, Deliver, Failed, Outcome, SessionsTouched
from zabray.protocol.events import RID_MASK, Event, Submit
from zabray.wire import clientproto as cp

if TYPE_CHECKING:
    from zabray.zk.service import ServiceStatus
    from actors.clientport import ClientConn
    from zabray.zk import messages as zm


class ServiceConn(Protocol):
    """A client connection as the ZooKeeper service sees it."""

    def deliver(self, action: zm.ServiceAction) -> None: ...
    def hang_up(self) -> None: ...


class HostedService(Protocol):
    app: Any
    """The core's state machine (None: the core's own value log)."""

    def client(self, conn: ClientConn, req: cp.SubmitReq | cp.ZkReq) -> list[Event]: ...
    def core(self, actions: list[Outcome], serving: bool, leading: bool, looking: bool = False) -> list[Event]: ...
    def tick(self, serving: bool, leading: bool, looking: bool = False) -> list[Event]: ...
    def conn_lost(self, conn: ServiceConn) -> None: ...
    def status(self) -> ServiceStatus | None: ...
    def frame(self, action: zm.ServiceAction) -> cp.ZkRep | cp.ZkEvent:
        """A service action for one of its bespoke connections, as the frame that carries it."""


class BroadcastService:
    """Atomic broadcast of opaque values: each SUBMIT is one txn, answered when it commits here."""

    def __init__(self, stats: dict[str, int]) -> None:
        self.app = None
        self.stats = stats
        self._pending: dict[int, tuple[ClientConn, int]] = {}
        self._next_rid = 1

    def client(self, conn: ClientConn, req: cp.SubmitReq | cp.ZkReq) -> list[Event]:
        if isinstance(req, cp.ZkReq):
            conn.send(cp.error_reply(req.rid, 0, "BAD_ARGUMENTS", "this ensemble runs service: broadcast"))
            return []
        rid = self._next_rid
        self._next_rid = rid + 1 if rid < RID_MASK else 1  # (a core request id has 40 bits)
        self._pending[rid] = (conn, req.rid)
        self.stats["submitted"] += 1
        return [Submit(rid, req.value)]

    def core(self, actions: list[Outcome], serving: bool, leading: bool, looking: bool = False) -> list[Event]:
        for a in actions:
            match a:
                case Committed():
                    entry = self._pending.pop(a.request_id, None)
                    if entry is not None:
                        self.stats["committed"] += 1
                        entry[0].send(cp.CommittedRep(entry[1], int(a.zxid)))
                case Failed():
                    entry = self._pending.pop(a.request_id, None)
                    if entry is not None:
                        self.stats["failed"] += 1
                        entry[0].send(cp.FailedRep(entry[1], a.reason, a.uncertain))
                case Deliver() | SessionsTouched():
                    pass
                case _:
                    assert_never(a)
        return []

    def tick(self, serving: bool, leading: bool, looking: bool = False) -> list[Event]:
        return []

    def conn_lost(self, conn: ServiceConn) -> None:
        pass

    def frame(self, action: zm.ServiceAction) -> cp.ZkRep | cp.ZkEvent:
        raise AssertionError("a broadcast replica delivers no service actions to its connections")

    def status(self) -> ServiceStatus | None:
        return None
