"""The simulator running the ZooKeeper service: replicas host ``zabray.zk.ZkService`` over the
real core, simulated clients run ``zabray.zk.client_session.ClientSession``.

Everything of ``Simulation`` stays (crashes, partitions, channel breaks, snapshots, the disk
steps, Zab's checker); on top, each step may also deliver the head of a client connection in
either direction, or have a client issue a call (creates, sequential and ephemeral too, versioned
sets, deletes, multis, reads with and without watches, syncs, closes) or vanish without closing
(its session must then expire). Client connections are FIFO like TCP; a replica's crash lets a
random prefix of what it sent reach the client. ``zabray.sim.zkcheck`` checks after every step;
``finish`` then heals everything and requires every live session's calls to be answered.
Time: one tick is ``tick_ms`` of the service's and the clients' clocks.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from zabray.protocol.actions import Committed, Deliver, Failed, SessionsTouched
from zabray.protocol.events import Event, Submit, TouchSessions
from zabray.protocol.messages import PeerState
from zabray.protocol.role import Phase
from zabray.sim.replica import SimReplica
from zabray.sim.simulator import SimOptions, SimResult, Simulation
from zabray.sim.zkcheck import ZkChecker
from zabray.tree import DataTree
from zabray.tree import ops as tops
from zabray.zk import ZkService
from zabray.zk import client_session as cs
from zabray.zk import messages as zm

CLOSED = None  # marker in a connection's queue to the client: the replica closed it
_BASE_RIDS = 1 << 39  # the base simulator's raw requests, apart from the service's request ids


@dataclass
class ZkSimOptions:
    clients: int = 3
    session_timeout_ms: int = 1500
    tick_ms: int = 100
    call_rate: float = 0.12
    kill_rate: float = 0.03
    warmup: bool = True
    """Elect a leader calmly before the random steps, so they go to sessions, not to the first
    election (the plain simulator covers that)."""
    max_pending: int = 6
    answer_ticks: int = 60
    """Once healed, every session's calls must be answered within this many ticks."""
    paths: tuple[str, ...] = ("/a", "/b", "/a/x", "/a/y", "/e")
    eager: bool = False
    """Clients send calls right behind their connect, before its answer (the Java client's Netty
    socket does): the replicas must hold them until the session is there."""
    read_only: bool = False
    """Replicas serve read-only sessions once they have looked for a leader ``read_only_after_ms``
    (ZooKeeper's readonlymode.enabled)."""
    read_only_after_ms: int = 2000
    read_only_clients: float = 0.0
    """The share of clients that accept read-only sessions (kazoo's read_only=True); each probes
    for a read-write replica every ``rw_probe_ms`` while read-only and idle."""
    rw_probe_ms: int = 1000


@dataclass
class _Link:
    id: int
    client: int
    cconn: int  # the client's name for it
    replica: int
    up: deque[tuple[int, zm.ClientOp]] = field(default_factory=deque)
    down: deque[Any] = field(default_factory=deque)
    server_open: bool = True
    client_open: bool = True


@dataclass
class _Client:
    id: int
    core: cs.ClientSession
    calls: dict[int, tuple[zm.ClientOp, bool, bytes]] = field(default_factory=dict)
    next_call: int = 1
    links: dict[int, _Link] = field(default_factory=dict)  # cconn -> link


class ZkSimulation(Simulation):
    FIRST_CORE_RID = _BASE_RIDS  # the services' request ids start at 1

    def __init__(self, seed: int, options: SimOptions | None = None, zk: ZkSimOptions | None = None, *,
                 timeline: bool = False, trace_writer: Callable[[dict[str, object]], None] | None = None) -> None:
        self.zopt = zk or ZkSimOptions()
        self.services: dict[int, ZkService] = {}
        self.links: dict[int, _Link] = {}
        self.clients: dict[int, _Client | None] = {}
        self.clients_by_id: dict[int, _Client] = {}
        self.killed: list[tuple[int, int]] = []  # (session id, tick it went silent)
        self._next_link = 1
        self._next_client = 1
        self._coreq: deque[tuple[int, Event, str]] = deque()
        self._busy = False
        self._svc_in: list[zm.ServiceEvent] = []
        self._answers: dict[tuple[int, int], str | None] = {}  # (client, call) -> error code
        self._roles: dict[int, tuple[bool, bool, bool]] = {}  # the role each service last heard
        opts = dataclasses.replace(options) if options is not None else SimOptions()
        opts.app_factory = DataTree
        opts.client_rate = 0.0
        opts.value_factory = _liveness_write
        super().__init__(seed, opts, timeline=timeline, trace_writer=trace_writer)
        self.next_request = _BASE_RIDS
        self.zk = ZkChecker(self.checker)
        self.clients = {i: None for i in range(self.zopt.clients)}

    @property
    def now_ms(self) -> int:
        return self.ticks * self.zopt.tick_ms

    # -- replicas: the core, then the service, never one inside the other ------------------------

    def _start(self, sid: int, fault: str = "restart") -> None:
        super()._start(sid, fault)
        r = self.replicas[sid]
        assert r.node is not None
        self.services[sid] = ZkService(sid, r.node.app, now_ms=self.now_ms,  # type: ignore[arg-type]
                                       id_salt=r.incarnation << 32,
                                       read_only_after_ms=self.zopt.read_only_after_ms if self.zopt.read_only else None)
        self._roles.pop(sid, None)
        if hasattr(self, "zk"):
            self.zk.replica_restarted(sid)

    def _crash(self, sid: int) -> None:
        super()._crash(sid)
        self.services.pop(sid, None)
        for link in self.links.values():
            if link.replica == sid and link.server_open:
                link.server_open = False
                link.up.clear()
                keep = self.rng.randint(0, len(link.down))
                while len(link.down) > keep:
                    link.down.pop()
                link.down.append(CLOSED)

    def _step_node(self, sid: int, event: Event, label: str) -> None:
        self._coreq.append((sid, event, label))
        self._run_core()

    def _run_core(self) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            while self._coreq:
                sid, event, label = self._coreq.popleft()
                r = self.replicas[sid]
                if r.node is None:
                    continue
                self._svc_in = []
                super()._step_node(sid, event, label)
                svc = self.services[sid]
                out: list[zm.ServiceAction] = []
                for e in self._svc_in:
                    out += svc.step(e)
                out += svc.step(zm.StepEnd())
                if r.node is not None:
                    out += self._role_after_step(sid, svc, r.node)
                self._service_actions(sid, out)
                if r.node is not None:
                    self.zk.replica_tree(sid, r.node.app)  # type: ignore[arg-type]
        finally:
            self._busy = False

    def _role_after_step(self, sid: int, svc: ZkService, node: Any) -> list[zm.ServiceAction]:
        """As the replica's shell does: the service hears of a role change right after the core
        step that made it (a replica that left broadcast drops its sessions before it reads
        another request of theirs), not only at the next tick."""
        return self._role_changed(sid, svc, node)

    def _role_changed(self, sid: int, svc: ZkService, node: Any) -> list[zm.ServiceAction]:
        serving = node.role.phase is Phase.BROADCAST and node.state in (
            PeerState.LEADING, PeerState.FOLLOWING, PeerState.OBSERVING)
        leading = serving and node.state == PeerState.LEADING
        looking = node.state == PeerState.LOOKING and not node.rejoining
        role = (serving, leading, looking)
        if role == self._roles.get(sid, (False, False, False)):
            return []
        self._roles[sid] = role
        self._log(f"  service {sid}: serving={serving} leading={leading} looking={looking}")
        return svc.step(zm.RoleChanged(serving, leading, looking))

    def _delivered(self, sid: int, r: SimReplica, a: Deliver) -> None:
        super()._delivered(sid, r, a)
        self._svc_in.append(zm.TxnDelivered(a.result))

    def _reply(self, sid: int, r: SimReplica, a: Committed | Failed | SessionsTouched) -> None:
        match a:
            case Committed() if a.request_id < _BASE_RIDS:
                self._svc_in.append(zm.TxnCommitted(a.request_id, a.zxid, a.result))
            case Failed() if a.request_id < _BASE_RIDS:
                self._svc_in.append(zm.TxnFailed(a.request_id, a.reason, a.uncertain))
            case SessionsTouched():
                self._svc_in.append(zm.SessionsAlive(a.sessions))
            case _:
                super()._reply(sid, r, a)

    def _service_actions(self, sid: int, actions: list[zm.ServiceAction]) -> None:
        for a in actions:
            match a:
                case zm.SubmitTxn():
                    self._coreq.append((sid, Submit(a.rid, a.request), "client request"))
                case zm.ReportTouches():
                    self._coreq.append((sid, TouchSessions(a.sessions), "touches"))
                case zm.CloseConn():
                    link = self.links.get(a.conn)
                    if link is not None and link.server_open:
                        link.server_open = False
                        link.up.clear()
                        link.down.append(CLOSED)
                case zm.Reply() | zm.WatchFired() | zm.SessionEnded():
                    link = self.links.get(a.conn)
                    if link is not None and link.server_open and link.client_open:
                        link.down.append(a)
                case _:
                    raise TypeError(f"unknown service action {a!r:.60}")
        self._run_core()

    def _tick(self) -> None:
        super()._tick()
        now = self.now_ms
        for sid in sorted(self.alive()):
            node = self.replicas[sid].node
            svc = self.services.get(sid)
            if node is None or svc is None:
                continue
            out = self._role_changed(sid, svc, node)
            out += svc.step(zm.ServiceTick(now))
            self._service_actions(sid, out)
        for c in list(self.clients.values()):
            if c is not None:
                self._client_actions(c, c.core.step(cs.ClientTick(now)))

    # -- clients ------------------------------------------------------------------------------------

    def _client_actions(self, c: _Client, actions: list[cs.ClientAction]) -> None:
        for a in actions:
            match a:
                case cs.Dial(conn, replica):
                    if self.replicas[replica].node is None or replica not in self.services:
                        self._client_actions(c, c.core.step(cs.ConnLost(conn)))
                        continue
                    link = _Link(self._next_link, c.id, conn, replica)
                    self._next_link += 1
                    self.links[link.id] = link
                    c.links[conn] = link
                    self._client_actions(c, c.core.step(cs.Dialed(conn)))
                case cs.SendOp(conn, xid, op):
                    up = c.links.get(conn)
                    if up is not None and up.client_open and up.server_open:
                        up.up.append((xid, op))
                case cs.Hangup(conn):
                    gone = c.links.pop(conn, None)
                    if gone is not None:
                        self._hangup(gone)
                case cs.Completed(call_id, zxid, error, value, _):
                    op, watch, tag = c.calls.pop(call_id)
                    self._answers[(c.id, call_id)] = error.code if error else None
                    self._log(f"  client {c.id} call {call_id} {type(op).__name__} -> "
                              f"{error.code if error else 'ok'} at {zxid:#x}")
                    self.stats["zk_calls"] += 1
                    if error is None:
                        self.stats["zk_ok"] += 1
                    if c.core.connected_ro and error is None and not isinstance(op, zm.Write):
                        self.stats["zk_read_only_reads"] += 1
                    elif error is not None and error.code == "NOT_READ_ONLY":
                        self.stats["zk_not_read_only"] += 1
                    self.zk.completed(c.id, call_id, op, watch, tag, zxid, error, value)
                case cs.Notice(_, kind, path, event, zxid):
                    self._log(f"  client {c.id} watch {kind} {path} {event} at {zxid:#x}")
                    self.stats["zk_watches"] += 1
                    self.zk.notice(c.id, kind, path, zxid)
                case cs.Connected(replica, session_id, first, read_only):
                    self._log(f"  client {c.id} session 0x{session_id:x} on replica {replica}"
                              f"{'' if first else ' (moved)'}{' read-only' if read_only else ''}")
                    self.stats["zk_moves" if not first else "zk_sessions"] += 1
                    if read_only:
                        self.stats["zk_read_only"] += 1
                    self.zk.connected(c.id, session_id, read_only)
                case cs.SessionOver(expired):
                    self._log(f"  client {c.id} session over ({'expired' if expired else 'closed'})")
                    if expired:
                        self.stats["zk_expired"] += 1
                    self.zk.session_over(c.id)

    def _hangup(self, link: _Link) -> None:
        link.client_open = False
        link.down.clear()
        link.up.clear()
        self.links.pop(link.id, None)
        if link.server_open:
            link.server_open = False
            svc = self.services.get(link.replica)
            if svc is not None:
                self._service_actions(link.replica, svc.step(zm.ConnClosed(link.id)))

    def _deliver_up(self, link: _Link) -> None:
        xid, op = link.up.popleft()
        svc = self.services.get(link.replica)
        if svc is None or not link.server_open:
            return
        self._service_actions(link.replica, svc.step(zm.ClientRequest(link.id, xid, op)))

    def _deliver_down(self, link: _Link) -> None:
        msg = link.down.popleft()
        c = self.clients_by_id.get(link.client)
        if c is None:
            return
        if msg is CLOSED:
            link.client_open = False
            c.links.pop(link.cconn, None)
            self.links.pop(link.id, None)
            self._client_actions(c, c.core.step(cs.ConnLost(link.cconn)))
        else:
            self._client_actions(c, c.core.step(cs.Received(link.cconn, msg)))

    def _link_choices(self) -> list[tuple[str, object, int]]:
        out: list[tuple[str, object, int]] = []
        for lid in sorted(self.links):
            link = self.links[lid]
            if link.up and link.server_open:
                out.append(("up", link, link.replica))
            if link.down and link.client_open:
                out.append(("down", link, link.replica))
        return out

    def _client_call(self) -> None:
        rng = self.rng
        slot = rng.randrange(self.zopt.clients)
        c = self.clients[slot]
        if c is None or c.core.over:
            replicas = sorted(self.replicas)
            rng.shuffle(replicas)
            cid = self._next_client
            self._next_client += 1
            # (the draw only when some clients may be read-only: other runs keep their schedules)
            ro = self.zopt.read_only_clients > 0 and rng.random() < self.zopt.read_only_clients
            c = _Client(cid, cs.ClientSession(replicas, self.zopt.session_timeout_ms, self.now_ms,
                                              eager=self.zopt.eager, read_only=ro, rw_probe_ms=self.zopt.rw_probe_ms))
            self.clients[slot] = c
            self.clients_by_id[cid] = c
            self._log(f"client {cid} starts")
            self._client_actions(c, c.core.start())
            return
        if rng.random() < self.zopt.kill_rate:
            self._log(f"client {c.id} vanishes (session 0x{c.core.session_id:x})")
            if c.core.session_id:
                self.killed.append((c.core.session_id, self.ticks))
            self._client_actions(c, c.core.step(cs.Kill()))
            self.clients[slot] = None
            return
        if len(c.calls) >= self.zopt.max_pending:
            return
        call_id = c.next_call
        c.next_call += 1
        op, watch, tag = self._random_op(c.id, call_id)
        c.calls[call_id] = (op, watch, tag)
        self._log(f"client {c.id} call {call_id}: {op}{' +watch' if watch else ''}")
        self._client_actions(c, c.core.step(cs.Call(call_id, op, watch)))

    def _random_op(self, cid: int, call_id: int) -> tuple[zm.ClientOp, bool, bytes]:
        rng = self.rng
        paths = self.zopt.paths
        path = rng.choice(paths)
        tag = f"c{cid}.{call_id}".encode()
        x = rng.random()
        if x < 0.22:
            if rng.random() < 0.3:
                return zm.Create("/q" if rng.random() < 0.2 else "/q/s-", tag, rng.random() < 0.3,
                                 rng.random() < 0.8), False, tag
            return zm.Create(path, tag, rng.random() < 0.3, False), False, tag
        if x < 0.36:
            return zm.SetData(path, tag, rng.choice([-1, -1, 0, 1, 2])), False, tag
        if x < 0.44:
            return zm.Delete(path, rng.choice([-1, -1, 0, 1])), False, b""
        if x < 0.50:
            other = rng.choice(paths)
            if rng.random() < 0.5:
                return zm.Multi((zm.Create(other, tag, rng.random() < 0.3, False), zm.SetData(path, tag, -1))), \
                    False, tag
            return zm.Multi((zm.Check(path, rng.choice([-1, 0, 1])), zm.Delete(other, -1))), False, b""
        if x < 0.55:
            return zm.Sync(path), False, b""
        if x < 0.56:
            return zm.CloseSession(), False, b""
        watch = rng.random() < 0.5
        kind = rng.randrange(3)
        if kind == 0:
            return zm.GetData(path, watch), watch, b""
        if kind == 1:
            return zm.Exists(path, watch), watch, b""
        return zm.GetChildren(rng.choice(("/", "/a", "/q")), watch, stat=True), watch, b""

    # -- the schedule ---------------------------------------------------------------------------------

    def step(self) -> None:
        self.step_no += 1
        self.checker.step = self.step_no
        rng = self.rng
        opt = self.opt
        x = rng.random()
        if x < opt.fault_rate:
            self._fault()
            return
        x -= opt.fault_rate
        if x < opt.tick_rate:
            self._tick()
            return
        x -= opt.tick_rate
        if x < self.zopt.call_rate:
            self._client_call()
            return
        alive = self.alive()
        choices = self.net.deliverable(alive) + self._local_choices(alive) + self._link_choices()
        if not choices:
            self._tick()
            return
        kind, key, sid = choices[rng.randrange(len(choices))]
        self._do(kind, key, sid)

    def _do(self, kind: str, key: object, sid: int) -> None:
        if kind in ("chan", "link"):
            self._deliver(kind, key, sid)
        elif kind == "up":
            self._deliver_up(key)  # type: ignore[arg-type]
        elif kind == "down":
            self._deliver_down(key)  # type: ignore[arg-type]
        else:
            self._work(kind, sid)

    def _more_micro_steps(self) -> Iterator[None]:
        # Every pass, even one in which the replicas had nothing to do: an idle ensemble (one
        # voter, no peer traffic) must still hear its clients.
        for kind, key, sid in self._link_choices():
            link: _Link = key  # type: ignore[assignment]
            if (kind == "up" and link.up and link.server_open) or (kind == "down" and link.down and link.client_open):
                self._do(kind, key, sid)
                yield

    def run(self) -> SimResult:
        if self.zopt.warmup:
            self._log("warm-up: elect a leader calmly")
            self.settle(lambda: self._established_leader() is not None and all(
                r.node is not None and r.node.role.phase is Phase.BROADCAST for r in self.replicas.values()))
        return super().run()

    def finish(self) -> SimResult:
        """Zab's liveness check, then time for every silent session to expire: a session whose
        client vanished must be gone, ephemerals and all, once its timeout passed after healing."""
        result = super().finish()
        if self.checker.violations and self.opt.stop_on_violation:
            return result
        healed = self.ticks
        wait = 3 * self.zopt.session_timeout_ms // self.zopt.tick_ms + 10
        while self.ticks < healed + wait:
            self._calm_round()
        self.zk.sessions_gone([s for s, _ in self.killed])
        self._check_answered()
        return self._result()

    def _check_answered(self) -> None:
        """Liveness for sessions: once healed, every call still pending, and a fresh read from
        every live session, is answered within ``answer_ticks``, the read served (or told its
        session expired). A request stuck behind a write whose outcome never comes, a watch
        wait never released, a refusal never retried, a session that never moves or is refused
        BEHIND forever: each leaves a call unanswered here."""
        probes: dict[int, int] = {}
        for c in self.clients.values():
            if c is not None and not c.core.over:
                call_id = c.next_call
                c.next_call += 1
                op = zm.GetData("/", False)
                c.calls[call_id] = (op, False, b"")
                probes[c.id] = call_id
                self._client_actions(c, c.core.step(cs.Call(call_id, op, False)))
        deadline = self.ticks + self.zopt.answer_ticks
        while self.ticks < deadline and any(c is not None and c.calls for c in self.clients.values()):
            self._calm_round()
        self.checker.step = self.step_no
        for c in self.clients.values():
            if c is not None and c.calls:
                self.checker._fail("liveness", f"client {c.id}: calls {sorted(c.calls)} unanswered "
                                   f"{self.zopt.answer_ticks} ticks after healing")
                return
        for cid, call_id in sorted(probes.items()):
            code = self._answers.get((cid, call_id))
            if code not in (None, "SESSION_EXPIRED"):
                self.checker._fail("liveness", f"client {cid}: a read after healing was told {code}")
                return

    def _result(self) -> SimResult:
        r = super()._result()
        r.service.update({k[3:]: v for k, v in sorted(self.stats.items()) if k.startswith("zk_")})
        r.service["vanished"] = len(self.killed)
        return r


def _liveness_write(rng: object, n: int) -> bytes:
    """The base simulator's own writes (its liveness check): syncs, valid for the tree."""
    return tops.sync("/", time_ms=n)


def run_zk_seed(seed: int, options: SimOptions | None = None, zk: ZkSimOptions | None = None, *,
                timeline: bool = False) -> SimResult:
    return ZkSimulation(seed, options, zk, timeline=timeline).run()
