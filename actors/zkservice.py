"""``ZooKeeperService``: the pure ``zabray.zk.ZkService`` hosted in a replica's shell, behind
``actors.services.HostedService``. Only a replica with ``service: zookeeper`` imports it (and,
through it, the data tree and the ZooKeeper service): a broadcast replica starts without them."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, assert_never

from actors import gc_policy
from actors.services import ServiceConn
from zabray.config import EnsembleConfig
from zabray.protocol.actions import Committed, Deliver, Failed, Outcome, SessionsTouched
from zabray.protocol.events import Event, Submit, SubmitReconfig, TouchSessions
from zabray.tree import DataTree
from zabray.wire import bespoke
from zabray.wire import clientproto as cp
from zabray.zk import ZkService
from zabray.zk import messages as zm
from zabray.zk.service import ServiceStatus

if TYPE_CHECKING:
    from actors.clientport import ClientConn


READ_ONLY_AFTER_MS = 2000
"""How long a replica looks for a leader before it serves read-only sessions (``zk_read_only``):
ZooKeeper's grace period, max(2 s, tickTime), for zabray's ticks of a few ms."""


class _Tree(DataTree):
    """The data tree, restored (from a snapshot at start, or a leader's SNAP) with the cyclic
    collector paused: the process's choice, not the pure tree's."""

    def restore(self, data: bytes) -> None:
        with gc_policy.paused():
            super().restore(data)


log = logging.getLogger(__name__)


class ZooKeeperService:
    """The ZooKeeper service: connections get small ids, time is the wall clock in ms."""

    def __init__(self, replica: int, stats: dict[str, int], cfg: EnsembleConfig | None = None) -> None:
        now = _now_ms()
        cfg = cfg or EnsembleConfig()
        self.svc = ZkService(replica, _Tree(sasl_acls=bool(cfg.zk_sasl_jaas_file)), now_ms=now, id_salt=0,
                             min_timeout_ms=cfg.zk_min_session_timeout_ms, max_timeout_ms=cfg.zk_max_session_timeout_ms,
                             container_check_ms=cfg.zk_container_check_ms, super_digest=cfg.zk_super_digest or None,
                             read_only_after_ms=READ_ONLY_AFTER_MS if cfg.zk_read_only else None)
        self.replica = replica
        self.app = self.svc.tree
        self.stats = stats
        self._ids: dict[ServiceConn, int] = {}
        self._conns: dict[int, ServiceConn] = {}
        self._next_conn = 1
        self._role = (False, False, False)

    def _id(self, conn: ServiceConn) -> int:
        cid = self._ids.get(conn)
        if cid is None:
            cid = self._ids[conn] = self._next_conn
            self._next_conn += 1
            self._conns[cid] = conn
        return cid

    def _carry_out(self, actions: list[zm.ServiceAction]) -> list[Event]:
        events: list[Event] = []
        for a in actions:
            t = type(a)
            if t is zm.SubmitTxn:
                self.stats["submitted"] += 1
                sub = SubmitReconfig if a.reconfig else Submit  # type: ignore[attr-defined]
                events.append(sub(a.rid, a.request))  # type: ignore[attr-defined]
            elif t is zm.ReportTouches:
                events.append(TouchSessions(a.sessions))  # type: ignore[attr-defined]
            elif t is zm.CloseConn:
                conn = self._conns.pop(a.conn, None)  # type: ignore[attr-defined]
                if conn is not None:
                    self._ids.pop(conn, None)
                    conn.hang_up()
            else:
                conn = self._conns.get(a.conn)  # type: ignore[attr-defined]
                if conn is not None:
                    conn.deliver(a)
        return events

    def client(self, conn: ClientConn, req: cp.SubmitReq | cp.ZkReq) -> list[Event]:
        if isinstance(req, cp.SubmitReq):
            conn.send(cp.FailedRep(req.rid, "this ensemble runs service: zookeeper (use a session)", False))
            return []
        return self._request(conn, req.rid, bespoke.request(req))

    def zk_request(self, conn: ServiceConn, rid: int, op: zm.ClientOp) -> list[Event]:
        """A request from a ZooKeeper-protocol connection (``actors.zkport``)."""
        return self._request(conn, rid, op)

    def _request(self, conn: ServiceConn, rid: int, op: zm.ClientOp) -> list[Event]:
        """Step the service with one request. The service answers every bad request itself
        (``zabray.zk.validate``), so anything it raises is a bug in zabray: logged with its stack,
        and the connection closed, so that its client sees the failure instead of a reply that
        blames its request; the replica goes on serving the others."""
        try:
            actions = self.svc.step(zm.ClientRequest(self._id(conn), rid, op))
        except Exception:
            log.exception("replica %d: request %d (%s) raised inside the ZooKeeper service; this is a bug "
                          "in zabray: closing its connection", self.replica, rid, type(op).__name__)
            conn.hang_up()
            return []
        return self._carry_out(actions)

    def core(self, actions: list[Outcome], serving: bool, leading: bool, looking: bool = False) -> list[Event]:
        step = self.svc.step
        out: list[zm.ServiceAction] = []
        for a in actions:
            match a:
                case Deliver():
                    out += step(zm.TxnDelivered(a.result))
                case Committed():
                    self.stats["committed"] += 1
                    out += step(zm.TxnCommitted(a.request_id, int(a.zxid), a.result))
                case Failed():
                    self.stats["failed"] += 1
                    out += step(zm.TxnFailed(a.request_id, a.reason, a.uncertain))
                case SessionsTouched():
                    out += step(zm.SessionsAlive(a.sessions))
                case _:
                    assert_never(a)
        out += step(zm.StepEnd())
        # Right after the step, not at the next tick: a replica that just left broadcast must
        # drop its sessions before it reads another request of theirs.
        out += self._role_changed(serving, leading, looking)
        return self._carry_out(out)

    def tick(self, serving: bool, leading: bool, looking: bool = False) -> list[Event]:
        out = self._role_changed(serving, leading, looking)
        out += self.svc.step(zm.ServiceTick(_now_ms()))
        return self._carry_out(out)

    def _role_changed(self, serving: bool, leading: bool, looking: bool) -> list[zm.ServiceAction]:
        if (serving, leading, looking) == self._role:
            return []
        self._role = (serving, leading, looking)
        return self.svc.step(zm.RoleChanged(serving, leading, looking))

    def conn_lost(self, conn: ServiceConn) -> None:
        cid = self._ids.pop(conn, None)
        if cid is not None:
            self._conns.pop(cid, None)
            self._carry_out(self.svc.step(zm.ConnClosed(cid)))

    def status(self) -> ServiceStatus | None:
        return self.svc.status()

    def frame(self, action: zm.ServiceAction) -> cp.ZkRep | cp.ZkEvent:
        assert isinstance(action, (zm.Reply, zm.WatchFired, zm.SessionEnded))
        return bespoke.frame(action)


def _now_ms() -> int:
    return int(time.time() * 1000)
