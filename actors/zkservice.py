"""The replica-side ZooKeeper service: sessions, local reads, watches and the leader's session tracker.

Hosted by ``ReplicaServer`` when the ensemble's config says ``service: zookeeper`` (the Node
then runs a ``DataTree``). Clients speak ``ZK`` requests on the ordinary client port
(``actors.clientproto``); everything here runs on the replica's asyncio loop, so no locks.

Ordering. Each connection has a FIFO of its requests. Writes (and ``sync``) are submitted to
the core at once (pipelined: FIFO per connection holds because the core forwards a replica's
requests in order); a read is executed only when it reaches the head of its connection's FIFO,
i.e. after every earlier request of that connection was answered, so a read issued after a
write sees it (the write is answered only once this replica delivered it). Replies leave in
issue order.

Watches. Registered by reads (get/exists: data table, children: child table) per session on
this replica; fired at ``Deliver`` time by sending a ``ZEVENT`` on the session's connection,
so it precedes, on the same byte stream, the answer to any read executed afterwards (and the
answer to the write that fired it). One-shot: firing removes them. A connection's watches are
dropped when it goes away; a client that moves re-registers its watches with its last seen
zxid, and watches whose change it missed fire at once (ZooKeeper's SetWatches).

Sessions. A new session is a ``create_session`` txn with an id allocated here (sid in the top
byte). Reconnecting to a replica whose tree is behind the session's last seen zxid is refused
(``BEHIND``), as is any connect while the replica is not in broadcast (``NOT_READY``); when a
replica leaves broadcast it drops its session connections so clients move. Every request or
ping touches the session; touched sessions go to the core as ``TouchSessions`` each tick and
reach the leader's shell as ``SessionsTouched``. The established leader keeps the tracker
(session -> deadline), started from ``tree.sessions()`` with fresh deadlines whenever it becomes
leader, and expires a silent session by submitting ``close_session`` (its ephemerals go in the
same txn); every replica then tells the session's connection, if it holds it, ``expired``.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors import clientproto as cp
from zabray.protocol.events import Submit, TouchSessions
from zabray.protocol.messages import PeerState
from zabray.tree import (
    Check,
    Create,
    DataTree,
    Delete,
    EventType,
    OpCode,
    Result,
    SetData,
    Stat,
    ZooKeeperError,
    validate_path,
)
from zabray.tree import ops as tops

if TYPE_CHECKING:
    from actors.replica import ReplicaServer, _ClientConn

log = logging.getLogger(__name__)

# Test-only (tests/histories): a deliberately broken build whose reads can see a state older than
# the session's own earlier writes. Never set outside that test.
_PLANTED_STALE_READS = os.environ.get("ZABRAY_PLANT_STALE_READS") == "1"
MIN_TIMEOUT_MS = 400
MAX_TIMEOUT_MS = 120_000
WRITES = frozenset({"create", "delete", "set", "multi", "sync", "close", "check"})
READS = frozenset({"get", "exists", "children"})
_DATA_EVENTS = (EventType.CREATED, EventType.DELETED, EventType.CHANGED)
_CHILD_EVENTS = (EventType.CHILD, EventType.DELETED)


def err(code: str, message: str, path: str | None = None, index: int | None = None) -> list[Any]:
    return [code, message, path, index]


def wire_value(v: Any) -> Any:
    """A tree result value as msgpack-able data (Stat -> list of 11 ints)."""
    if isinstance(v, Stat):
        return list(v.as_tuple())
    if isinstance(v, (tuple, list)):
        return [wire_value(x) for x in v]
    return v


class _Entry:
    __slots__ = ("rid", "done", "reply", "read", "st", "on_ok", "value")

    def __init__(self, rid: int, st: _Conn | None, read: tuple[str, list[Any]] | None = None) -> None:
        self.rid = rid
        self.st = st
        self.read = read
        self.done = False
        self.reply: cp.ZkRep | None = None
        self.on_ok: Callable[[], None] | None = None
        self.value: bytes | None = None  # a write held back behind an earlier read


class _Conn:
    __slots__ = ("conn", "session", "queue", "closing", "reads")

    def __init__(self, conn: _ClientConn) -> None:
        self.conn = conn
        self.session = 0
        self.queue: deque[_Entry] = deque()
        self.closing = False
        self.reads = 0  # unanswered reads in the queue


class ZkService:
    def __init__(self, server: ReplicaServer) -> None:
        self.server = server
        self.tree = DataTree()
        self.conns: dict[Any, _Conn] = {}
        self.by_session: dict[int, _Conn] = {}
        self.data_watches: dict[str, set[int]] = {}
        self.child_watches: dict[str, set[int]] = {}
        self.pending: dict[int, _Entry] = {}
        self.touched: set[int] = set()
        self.tracker: dict[int, float] | None = None
        self.expiring: dict[int, int] = {}  # session -> core request id of its close
        self.serving = False
        self.dirty: set[_Conn] = set()
        self._counter = 0
        self.stats = {"sessions_created": 0, "sessions_expired": 0, "reads": 0, "writes": 0,
                      "watch_events": 0, "refused_behind": 0, "refused_not_ready": 0}

    # -- the replica's hooks -------------------------------------------------------------------

    def handle(self, conn: _ClientConn, req: cp.ZkReq) -> None:
        st = self.conns.get(conn)
        if st is None:
            st = self.conns[conn] = _Conn(conn)
        op = req.op
        if op == "ping":
            if st.session:
                self.touched.add(st.session)
            conn.send(cp.ZkRep(req.rid, self.tree.last_zxid, None, None))
            return
        if op == "connect":
            self._connect(st, req)
            return
        if not st.session:
            self._answer_now(st, req.rid, err("SESSION_EXPIRED", "no live session on this connection"))
            return
        self.touched.add(st.session)
        if op in READS:
            if _PLANTED_STALE_READS:  # test-only planted bug: answer at once, ahead of earlier writes
                e = _Entry(req.rid, st, (op, req.args))
                self._read(st, e)
                conn.send(e.reply)
                return
            st.queue.append(_Entry(req.rid, st, (op, req.args)))
            st.reads += 1
            self._drain(st)
        elif op in WRITES:
            self._write(st, req)
        else:
            self._answer_now(st, req.rid, err("BAD_ARGUMENTS", f"unknown op {op!r:.30}"))

    def conn_lost(self, conn: _ClientConn) -> None:
        st = self.conns.pop(conn, None)
        if st is None:
            return
        for e in st.queue:
            e.st = None
        st.queue.clear()
        if st.session and self.by_session.get(st.session) is st:
            del self.by_session[st.session]
            self._drop_watches(st.session)

    def committed(self, rid: int, zxid: int, result: Result | None) -> bool:
        e = self.pending.pop(rid, None)
        if e is None:
            return False
        if result is None or result.ok:
            value = wire_value(result.value) if result is not None else None
            if result is not None and result.op == OpCode.CREATE_SESSION:
                value = [result.session_id, result.value]
            error = None
        else:
            x = result.error
            assert x is not None
            value, error = None, err(x.code, x.message, x.path, x.index)
        if e.on_ok is not None:
            if error is None:
                e.on_ok()
            e.on_ok = None
        self._finish(e, cp.ZkRep(e.rid, int(zxid), error, value), defer=True)
        return True

    def failed(self, rid: int, reason: str, uncertain: bool) -> bool:
        e = self.pending.pop(rid, None)
        if e is None:
            return False
        code = "CONNECTION_LOSS" if uncertain else "NOT_READY"
        self._finish(e, cp.ZkRep(e.rid, self.tree.last_zxid, err(code, reason), None), defer=True)
        return True

    def delivered(self, result: Result | None) -> None:
        if result is None:
            return
        z = result.zxid
        if result.ok and result.op == OpCode.CLOSE_SESSION:
            sid = result.session_id
            self._drop_watches(sid)
            self.expiring.pop(sid, None)
            if self.tracker is not None:
                self.tracker.pop(sid, None)
            st = self.by_session.pop(sid, None)
            if st is not None:
                st.session = 0
                if not st.closing:
                    self.stats["sessions_expired"] += 1
                    st.conn.send(cp.ZkEvent("expired", [sid, z]))
        elif result.ok and result.op == OpCode.CREATE_SESSION:
            self.stats["sessions_created"] += 1
            if self.tracker is not None:
                self.tracker[result.session_id] = time.monotonic() + result.value / 1000
        for ch in result.changes:
            self._fire(ch.path, ch.event, z)

    def touched_at_leader(self, sessions: tuple[int, ...]) -> None:
        tr = self.tracker
        if tr is None:
            return
        now = time.monotonic()
        for s in sessions:
            t = self.tree.session_timeout(s)
            if t is not None and s not in self.expiring:
                tr[s] = now + t / 1000

    def tick(self) -> None:
        node = self.server.node
        if node is None:
            return
        serving = node.role.phase_name() == "broadcast" and node.state in (
            PeerState.LEADING, PeerState.FOLLOWING, PeerState.OBSERVING)
        if self.serving and not serving:
            # ZooKeeper drops its clients when it loses the leader: they move to a serving replica.
            for st in list(self.conns.values()):
                if st.session:
                    st.conn.close()
        self.serving = serving
        if not serving:
            self.tracker = None
            self.expiring.clear()
            self.touched.clear()
            return
        if self.touched:
            sessions = tuple(self.touched)
            self.touched.clear()
            self.server._step(TouchSessions(sessions))
        if node.state != PeerState.LEADING:
            self.tracker = None
            self.expiring.clear()
            return
        now = time.monotonic()
        if self.tracker is None:
            # A new leader: every live session gets a full timeout to reach it.
            self.tracker = {s: now + t / 1000 for s, t in self.tree.sessions().items()}
        for s, deadline in list(self.tracker.items()):
            if deadline < now and s not in self.expiring:
                log.info("replica %d: expiring session 0x%x", self.server.sid, s)
                rid = self._submit(_Entry(0, None), tops.close_session(s, time_ms=_now_ms()))
                self.expiring[s] = rid

    def status(self) -> dict[str, Any]:
        return {"digest": self.tree.digest(), "last_zxid": self.tree.last_zxid, "znodes": len(self.tree),
                "sessions": len(self.tree.sessions()), "connected": len(self.by_session),
                "tracking": None if self.tracker is None else len(self.tracker), **self.stats}

    # -- requests ------------------------------------------------------------------------------

    def _answer_now(self, st: _Conn, rid: int, error: list[Any] | None, value: Any = None) -> None:
        e = _Entry(rid, st)
        st.queue.append(e)
        self._finish(e, cp.ZkRep(rid, self.tree.last_zxid, error, value))

    def flush(self) -> None:
        """End of a core step: every Deliver of the step was handled (its watches sent), so the
        reads waiting behind this step's commits may now run against the tree."""
        while self.dirty:
            self._drain(self.dirty.pop())

    def _finish(self, e: _Entry, rep: cp.ZkRep, defer: bool = False) -> None:
        e.reply = rep
        e.done = True
        if e.st is not None:
            if defer:
                # The core applied every txn of this step to the tree before the shell saw the
                # first Deliver: a read run now could see state whose watches are not sent yet.
                self.dirty.add(e.st)
            else:
                self._drain(e.st)
        else:
            # An internal close_session (expiry) that failed may be retried next tick.
            if rep.error is not None:
                for s, r in list(self.expiring.items()):
                    if r not in self.pending:
                        del self.expiring[s]

    def _drain(self, st: _Conn) -> None:
        q = st.queue
        while q:
            e = q[0]
            if not e.done:
                if e.read is None:
                    break
                self._read(st, e)
            q.popleft()
            if e.read is not None:
                st.reads -= 1
            st.conn.send(e.reply)
        self._release(st)

    def _release(self, st: _Conn) -> None:
        """Submit the writes held behind reads that are now answered. A write issued after a read
        waits until that read ran: the core applies a whole batch of commits to the tree before
        the shell sees them, so a read must never wait on its own session's later writes."""
        if not st.reads:
            held = [e for e in st.queue if e.value is not None]
        else:
            held = []
            for e in st.queue:
                if e.read is not None:
                    break
                if e.value is not None:
                    held.append(e)
        for e in held:
            value, e.value = e.value, None
            if value is not None:  # a nested release (from inside _submit) may have sent it
                self._submit(e, value)

    def _submit(self, e: _Entry, value: bytes) -> int:
        srv = self.server
        rid = srv._next_rid
        srv._next_rid += 1
        self.pending[rid] = e
        srv.stats["submitted"] += 1
        srv._step(Submit(rid, value))
        return rid

    def _write(self, st: _Conn, req: cp.ZkReq) -> None:
        e = _Entry(req.rid, st)
        st.queue.append(e)
        sid, a, t = st.session, req.args, _now_ms()
        try:
            op = req.op
            if op == "create":
                value = tops.create(a[0], bytes(a[1]), ephemeral=bool(a[2]), sequential=bool(a[3]),
                                    session_id=sid, time_ms=t)
            elif op == "delete":
                value = tops.delete(a[0], int(a[1]), session_id=sid, time_ms=t)
            elif op == "set":
                value = tops.set_data(a[0], bytes(a[1]), int(a[2]), session_id=sid, time_ms=t)
            elif op == "check":
                value = tops.check(a[0], int(a[1]), session_id=sid, time_ms=t)
            elif op == "sync":
                value = tops.sync(a[0] if a else "/", session_id=sid, time_ms=t)
            elif op == "multi":
                value = tops.multi([_sub_op(x) for x in a], session_id=sid, time_ms=t)
            else:  # close
                st.closing = True
                value = tops.close_session(sid, time_ms=t)
        except ZooKeeperError as x:
            self._finish(e, cp.ZkRep(e.rid, self.tree.last_zxid, err(x.code, x.message, x.path, x.index), None))
            return
        except (IndexError, TypeError, ValueError, KeyError) as x:
            self._finish(e, cp.ZkRep(e.rid, self.tree.last_zxid, err("BAD_ARGUMENTS", f"bad {req.op} request: {x}"),
                                     None))
            return
        self.stats["writes"] += 1
        if st.reads:
            e.value = value
        else:
            self._submit(e, value)

    def _read(self, st: _Conn, e: _Entry) -> None:
        assert e.read is not None
        op, a = e.read
        tree = self.tree
        sid = st.session
        self.stats["reads"] += 1
        value: Any = None
        error = None
        try:
            if not sid:
                raise _Expired()
            path = validate_path(a[0])
            watch = bool(a[1]) if len(a) > 1 else False
            if op == "get":
                data, stat = tree.get(path)
                value = [data, list(stat.as_tuple())]
                if watch:
                    self.data_watches.setdefault(path, set()).add(sid)
            elif op == "exists":
                stat = tree.exists(path)
                value = None if stat is None else list(stat.as_tuple())
                if watch:
                    self.data_watches.setdefault(path, set()).add(sid)
            else:
                kids = tree.children(path)
                value = [kids, list(tree.stat(path).as_tuple())]
                if watch:
                    self.child_watches.setdefault(path, set()).add(sid)
        except ZooKeeperError as x:
            error = err(x.code, x.message, x.path, x.index)
        except _Expired:
            error = err("SESSION_EXPIRED", "the session expired")
        except (IndexError, TypeError, ValueError) as x:
            error = err("BAD_ARGUMENTS", f"bad {op} request: {x}")
        e.reply = cp.ZkRep(e.rid, tree.last_zxid, error, value)
        e.done = True

    # -- sessions ------------------------------------------------------------------------------

    def _connect(self, st: _Conn, req: cp.ZkReq) -> None:
        try:
            sid, timeout, last_zxid, watches = int(req.args[0]), int(req.args[1]), int(req.args[2]), req.args[3]
        except (IndexError, TypeError, ValueError):
            self._answer_now(st, req.rid, err("BAD_ARGUMENTS", "bad connect request"))
            return
        if not self.serving:
            self.stats["refused_not_ready"] += 1
            self._answer_now(st, req.rid, err("NOT_READY", f"replica {self.server.sid} is not serving"))
            return
        if last_zxid > self.tree.last_zxid:
            self.stats["refused_behind"] += 1
            self._answer_now(st, req.rid, err(
                "BEHIND", f"replica {self.server.sid} has seen 0x{self.tree.last_zxid:x}, "
                f"the session has seen 0x{last_zxid:x}"))
            return
        if st.session:
            self._answer_now(st, req.rid, err("BAD_ARGUMENTS", "this connection already has a session"))
            return
        timeout = max(MIN_TIMEOUT_MS, min(MAX_TIMEOUT_MS, timeout))
        if sid == 0:
            sid = self._new_session_id()
            e = _Entry(req.rid, st)
            st.queue.append(e)
            e.on_ok = lambda: self._bind(st, sid, {}, 0)
            self._submit(e, tops.create_session(sid, timeout, time_ms=_now_ms()))
            return
        live = self.tree.session_timeout(sid)
        if live is None:
            self._answer_now(st, req.rid, err("SESSION_EXPIRED", f"session 0x{sid:x} has expired"))
            return
        self._bind(st, sid, watches if isinstance(watches, dict) else {}, last_zxid)
        self.touched.add(sid)
        self._answer_now(st, req.rid, None, [sid, live])

    def _bind(self, st: _Conn, sid: int, watches: dict[str, list[str]], last_zxid: int) -> None:
        old = self.by_session.get(sid)
        if old is not None and old is not st:
            old.session = 0
            old.conn.close()
        self._drop_watches(sid)
        st.session = sid
        self.by_session[sid] = st
        z = self.tree.last_zxid
        tree = self.tree
        # ZooKeeper's SetWatches: fire at once what changed since the session last looked.
        for path in watches.get("data", []):
            stat = tree.exists(path)
            if stat is None:
                self._send_event(st, "data", path, "deleted", z)
            elif stat.mzxid > last_zxid:
                self._send_event(st, "data", path, "changed", z)
            else:
                self.data_watches.setdefault(path, set()).add(sid)
        for path in watches.get("exist", []):
            stat = tree.exists(path)
            if stat is not None:
                self._send_event(st, "data", path, "created", z)
            else:
                self.data_watches.setdefault(path, set()).add(sid)
        for path in watches.get("child", []):
            stat = tree.exists(path)
            if stat is None:
                self._send_event(st, "child", path, "deleted", z)
            elif stat.pzxid > last_zxid:
                self._send_event(st, "child", path, "child", z)
            else:
                self.child_watches.setdefault(path, set()).add(sid)

    def _new_session_id(self) -> int:
        self._counter = (self._counter + 1) & 0xFFFF
        return (self.server.sid & 0x7F) << 56 | (_now_ms() & ((1 << 40) - 1)) << 16 | self._counter

    # -- watches -------------------------------------------------------------------------------

    def _drop_watches(self, sid: int) -> None:
        for table in (self.data_watches, self.child_watches):
            for path in [p for p, s in table.items() if sid in s]:
                s = table[path]
                s.discard(sid)
                if not s:
                    del table[path]

    def _send_event(self, st: _Conn, table: str, path: str, event: str, zxid: int) -> None:
        self.stats["watch_events"] += 1
        st.conn.send(cp.ZkEvent("watch", [table, path, event, zxid]))

    def _fire(self, path: str, ev: EventType, zxid: int) -> None:
        if ev in _DATA_EVENTS:
            for s in self.data_watches.pop(path, ()):
                st = self.by_session.get(s)
                if st is not None:
                    self._send_event(st, "data", path, ev.value, zxid)
        if ev in _CHILD_EVENTS:
            for s in self.child_watches.pop(path, ()):
                st = self.by_session.get(s)
                if st is not None:
                    self._send_event(st, "child", path, ev.value, zxid)


class _Expired(Exception):
    pass


def _now_ms() -> int:
    return int(time.time() * 1000)


def _sub_op(x: list[Any]) -> Create | Delete | SetData | Check:
    kind, a = x[0], x[1]
    if kind == "create":
        return Create(a[0], bytes(a[1]), bool(a[2]), bool(a[3]))
    if kind == "delete":
        return Delete(a[0], int(a[1]))
    if kind == "set":
        return SetData(a[0], bytes(a[1]), int(a[2]))
    if kind == "check":
        return Check(a[0], int(a[1]))
    raise ValueError(f"unknown multi op {kind!r:.20}")
