"""The ZooKeeper service on one replica, pure: sessions, watches, per-connection order, the
leader's session tracker. Events in (``zabray.zk.messages``), actions out; no clock, socket,
thread or randomness (time arrives as ``ServiceTick(now_ms)``). The replica's shell
(``actors.replica``) and the simulator (``zabray.sim.zksim``) host it the same way.

Ordering. Each connection has a FIFO of its requests. Writes (and sync) go to the core at once
(pipelined: the core forwards a replica's requests in order); a read runs only when it reaches
the head of its connection's FIFO, after every earlier request of that connection was answered,
so a read issued after a write sees it (a write is answered only once this replica delivered
it). Replies leave in issue order. A write issued after a read is held until the read ran:
the core applies a whole batch of commits before the service hears of them, so a read must
never wait on its own session's later writes. Reads unblocked by a core step run at
``StepEnd``, once every ``TxnDelivered`` of the step (and the watches it fires) went out.

Refusals. A write the core refused (``TxnFailed``, not uncertain: certainly not applied) is
answered ``NOT_READY``, and so is everything after it on that connection: the client retries
them all, in order, elsewhere, so a later request can never take effect before an earlier one.
A write whose fate became unknown (``TxnFailed``, uncertain: the core left broadcast) closes
its connection instead of being answered: nothing more of that session is served here.

Watches. Registered by reads per session; fired on ``TxnDelivered`` as ``WatchFired`` on the
session's connection, before the answer to any read run afterwards, if that connection may
READ the znode (ZooKeeper 3.8's rule; the watch is used up either way). One-shot. A connection's
watches go with it; a moving client re-registers them with its last seen zxid and those whose
change it missed fire at once (ZooKeeper's SetWatches).

Read-only mode (``read_only_after_ms``; ``zabray.zk.read_only`` decides when): a replica
looking for a leader serves clients that asked for read-only from its tree (only committed txns),
never a session that saw more than the tree (``BEHIND``); writes are NOT_READ_ONLY; leaving the
mode closes every connection.

Sessions. A new session is a ``create_session`` txn; resuming is refused (``BEHIND``) by a
replica whose tree is older than the session's last seen zxid, and any connect while not
serving is refused (``NOT_READY``). Requests sent right behind a new session's connect (the Java
client's Netty socket does) wait until it is answered, as ZooKeeper stops reading meanwhile.
Leaving broadcast closes the session connections so clients move; the host must report it
(``RoleChanged``) after the very core step that left, not at the next tick, or a session could
read here in between. Every request or ping touches its session; touches go to the core each tick
(``ReportTouches``) and reach the leader's service as ``SessionsAlive``. The leading service
keeps the tracker (session -> deadline), started from the tree's live sessions with fresh
deadlines when it becomes leader, and expires a silent session by submitting its close.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from zabray.protocol.events import RID_MASK
from zabray.tree import AuthFailedError, AuthId, DataTree, OpCode, Result, ZooKeeperError, authenticate
from zabray.tree import ops as tops
from zabray.tree.acl import allowed as acl_allowed
from zabray.tree.znode import PERM_READ
from zabray.zk import reads
from zabray.zk.digest_md5 import DigestMD5Server, SaslFailure
from zabray.zk.messages import (
    AddAuth,
    AddWatch,
    Check,
    CheckWatches,
    ClientOp,
    ClientRequest,
    CloseConn,
    CloseSession,
    ConnClosed,
    Connect,
    Create,
    Delete,
    ErrorInfo,
    Exists,
    GetACL,
    GetAllChildrenNumber,
    GetChildren,
    GetData,
    GetEphemerals,
    Malformed,
    Multi,
    MultiRead,
    Ping,
    Read,
    RemoveWatches,
    Reply,
    ReportTouches,
    RoleChanged,
    Sasl,
    ServiceAction,
    ServiceEvent,
    ServiceTick,
    SessionEnded,
    SessionsAlive,
    SetACL,
    SetData,
    SetWatches,
    StepEnd,
    SubmitTxn,
    Sync,
    TxnCommitted,
    TxnDelivered,
    TxnFailed,
    Unimplemented,
    Watches,
    WatchFired,
    WhoAmI,
    Write,
)
from zabray.zk.read_only import ReadOnlyMode
from zabray.zk.validate import check_request
from zabray.zk.watches import Fired, WatchTables

log = logging.getLogger(__name__)

MIN_TIMEOUT_MS = 400
MAX_TIMEOUT_MS = 120_000
_READS = (GetData, Exists, GetChildren, GetACL, GetAllChildrenNumber, GetEphemerals, MultiRead, AddAuth, Sasl, WhoAmI,
          AddWatch, CheckWatches, RemoveWatches, SetWatches)
_TREE_READS = (GetData, Exists, GetChildren, GetACL, GetAllChildrenNumber, GetEphemerals, MultiRead, WhoAmI)
_WATCH_OPS = (AddWatch, CheckWatches, RemoveWatches)


class _Entry:
    """One request in a connection's FIFO (or an internal expiry, ``st`` None)."""

    __slots__ = ("xid", "st", "read", "done", "reply", "on_ok", "held", "close_after")

    def __init__(self, xid: int, st: _Conn | None, read: Read | None = None) -> None:
        self.xid = xid
        self.st = st
        self.read = read
        self.done = False
        self.reply: Reply | None = None
        self.on_ok: Callable[[], None] | None = None
        self.held: bytes | None = None  # a write held back behind an earlier read
        self.close_after = False  # close the connection once this reply is out (failed auth)


class _Conn:
    __slots__ = ("conn", "session", "queue", "closing", "reads", "refusing", "auth", "opening", "waiting", "sasl")

    def __init__(self, conn: int) -> None:
        self.conn = conn
        self.session = 0
        self.queue: deque[_Entry] = deque()
        self.closing = False
        self.reads = 0  # unanswered reads in the queue
        self.refusing: str | None = None  # why every further request is NOT_READY
        self.auth: tuple[AuthId, ...] = ()  # the connection's ids: its address, then addAuth's
        self.opening: _Entry | None = None  # the connect creating the session, until answered
        self.waiting: list[tuple[int, ClientOp]] = []  # requests that arrived behind it meanwhile
        self.sasl: DigestMD5Server | None = None  # the connection's SASL exchange, once begun


class ZkService:
    """One replica's ZooKeeper service. ``step(event)`` returns the actions to carry out, in order.

    ``tree`` is the core's state machine (the service reads it, only the core applies to it).
    ``id_salt`` keeps session ids unique across a replica's incarnations (the shell passes
    something that grows, e.g. its start time in ms). A requested session timeout is clamped
    to ``[min_timeout_ms, max_timeout_ms]``. The leader looks for empty containers and expired
    TTL znodes every ``container_check_ms`` (0: never) and submits their deletion.
    ``super_digest`` (``super:<base64 sha1>``) names ZooKeeper's superuser credential.
    ``sasl_users`` (name -> password, from the operator's JAAS file) are the DIGEST-MD5 users;
    None: SASL is not configured and every SASL token is AUTH_FAILED. They are never logged,
    traced or reported.
    """

    def __init__(self, replica: int, tree: DataTree | None = None, *, now_ms: int = 0, id_salt: int = 0,
                 min_timeout_ms: int = MIN_TIMEOUT_MS, max_timeout_ms: int = MAX_TIMEOUT_MS,
                 container_check_ms: int = 60_000, super_digest: str | None = None,
                 sasl_users: dict[str, str] | None = None, read_only_after_ms: int | None = None) -> None:
        self.replica = replica
        self.tree = tree if tree is not None else DataTree()
        self.now_ms = now_ms
        self.id_salt = id_salt
        self.min_timeout_ms = min_timeout_ms
        self.max_timeout_ms = max(min_timeout_ms, max_timeout_ms)
        self.container_check_ms = container_check_ms
        self.super_digest = super_digest
        self.sasl_users = sasl_users
        self._next_sweep = now_ms + container_check_ms
        self.sweeping: dict[str, int] = {}  # path -> core request id of its delete_container
        self.conns: dict[int, _Conn] = {}
        self.by_session: dict[int, _Conn] = {}
        self.watches = WatchTables()
        self.pending: dict[int, _Entry] = {}  # core request id -> entry
        self.touched: set[int] = set()
        self.tracker: dict[int, int] | None = None  # leader only: session -> deadline (ms)
        self.expiring: dict[int, int] = {}  # session -> core request id of its close
        self.serving = False
        self.leading = False
        self.ro = ReadOnlyMode(read_only_after_ms)
        self.dirty: set[int] = set()  # connections to drain at the end of the core step
        self._next_rid = 1
        self._counter = 0
        self._out: list[ServiceAction] = []
        self.stats = {"sessions_created": 0, "sessions_expired": 0, "reads": 0, "writes": 0,
                      "watch_events": 0, "refused_behind": 0, "refused_not_ready": 0, "read_only_sessions": 0,
                      "refused_not_read_only": 0}

    # -- the interface -----------------------------------------------------------------------

    def step(self, event: ServiceEvent) -> list[ServiceAction]:
        match event:
            case ClientRequest(conn, xid, op):
                self._request(conn, xid, op)
            case TxnDelivered(result):
                if result is not None:
                    self._delivered(result)
            case TxnCommitted(rid, zxid, result):
                self._committed(rid, zxid, result)
            case TxnFailed(rid, reason, uncertain):
                self._failed(rid, reason, uncertain)
            case StepEnd():
                while self.dirty:
                    conn = min(self.dirty)
                    self.dirty.discard(conn)
                    st = self.conns.get(conn)
                    if st is not None:
                        self._drain(st)
            case ConnClosed(conn):
                self._conn_closed(conn)
            case SessionsAlive(sessions):
                self._alive(sessions)
            case ServiceTick(now_ms):
                self.now_ms = max(self.now_ms, now_ms)
                self._tick()
            case RoleChanged(serving, leading, looking):
                self._role(serving, leading, looking)
            case _:
                raise TypeError(f"unknown service event {event!r:.80}")
        out, self._out = self._out, []
        return out

    def status(self) -> dict[str, Any]:
        """Counters only, nothing that walks the tree: status is polled (the driver, the snapshot
        actor, ``zabray status``) and runs on the replica's loop. ``tree.digest()`` walks it."""
        return {"last_zxid": self.tree.last_zxid, "znodes": len(self.tree),
                "sessions": len(self.tree.sessions()), "connected": len(self.by_session),
                "tracking": None if self.tracker is None else len(self.tracker),
                "read_only": self.ro.serving, "local_sessions": len(self.ro.local), **self.stats}

    @property
    def read_only_serving(self) -> bool:
        """Cut off from its quorum, the replica serves read-only sessions."""
        return self.ro.serving

    # -- requests ------------------------------------------------------------------------------

    def _request(self, conn: int, xid: int, op: ClientOp) -> None:
        st = self.conns.get(conn)
        if st is None:
            st = self.conns[conn] = _Conn(conn)
        if isinstance(op, Ping):
            if st.session:
                self._touch(st.session)
            self._out.append(Reply(conn, xid, self.tree.last_zxid, None, None))
            return
        if st.opening is not None:
            st.waiting.append((xid, op))
            return
        if st.refusing is not None:
            self._answer_now(st, xid, ErrorInfo("NOT_READY", st.refusing))
            return
        if isinstance(op, Connect):
            self._connect(st, xid, op)
            return
        if isinstance(op, Malformed):
            self._answer_now(st, xid, ErrorInfo("BAD_ARGUMENTS", op.message))
            return
        if isinstance(op, Unimplemented):
            why = "is disabled" if op.code == "RECONFIG_DISABLED" else "is not implemented"
            self._answer_now(st, xid, ErrorInfo(op.code, f"{op.what} {why}"))
            return
        if not st.session:
            self._answer_now(st, xid, ErrorInfo("SESSION_EXPIRED", "no live session on this connection"))
            return
        self._touch(st.session)
        if isinstance(op, _READS):
            st.queue.append(_Entry(xid, st, op))
            st.reads += 1
            self._drain(st)
        elif self.ro.serving:
            self._read_only_write(st, xid, op)
        else:
            self._write(st, xid, op)

    def _touch(self, sid: int) -> None:
        self.touched.add(sid)
        if self.ro.serving:
            self.ro.touch(sid, self.now_ms)

    def _read_only_write(self, st: _Conn, xid: int, op: ClientOp) -> None:
        """A write in read-only mode: NOT_READ_ONLY, but a local session may close itself."""
        sid = st.session
        if isinstance(op, CloseSession) and self.ro.close(sid):
            self._answer_now(st, xid, None)
            self._end_local(sid, expired=False)
            return
        self.stats["refused_not_read_only"] += 1
        self._answer_now(st, xid, ErrorInfo(
            "NOT_READ_ONLY", f"replica {self.replica} is read-only: it cannot reach a quorum, so it takes no writes"))

    def _answer_now(self, st: _Conn, xid: int, error: ErrorInfo | None, value: Any = None) -> None:
        e = _Entry(xid, st)
        st.queue.append(e)
        self._finish(e, Reply(st.conn, xid, self.tree.last_zxid, error, value))

    def _finish(self, e: _Entry, rep: Reply, defer: bool = False) -> None:
        e.reply = rep
        e.done = True
        st = e.st
        if st is not None:
            if defer:
                # The core applied every txn of this step before the service saw the first
                # delivery: a read run now could see state whose watches are not sent yet.
                self.dirty.add(st.conn)
            else:
                self._drain(st)
        else:
            # An internal request (an expiry or a container sweep) finished. A failed expiry is
            # tried again on a later tick; a sweep looks afresh at the next check.
            self.sweeping = {p: r for p, r in self.sweeping.items() if r in self.pending}
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
            assert e.reply is not None
            self._out.append(e.reply)
            if e.close_after:
                self._out.append(CloseConn(st.conn))
                self._conn_closed(st.conn)
                return
        self._release(st)
        if st.opening is not None and st.opening.done and (not q or q[0] is not st.opening):
            self._opened(st)

    def _opened(self, st: _Conn) -> None:
        """The connect that creates the session is answered (either way): the requests sent
        behind it are taken in order now, as if they had just arrived."""
        st.opening, waiting, st.waiting = None, st.waiting, []
        for xid, op in waiting:
            if self.conns.get(st.conn) is not st:
                return  # one of them closed the connection (closeSession, a failed addAuth)
            self._request(st.conn, xid, op)

    def _release(self, st: _Conn) -> None:
        """Submit the writes held behind reads that are now answered."""
        for e in st.queue:
            if e.read is not None and not e.done:
                break
            if e.held is not None:
                value, e.held = e.held, None
                self._submit(e, value)

    def _refuse_rest(self, st: _Conn, after: _Entry, why: str) -> None:
        """``after`` was refused: so is everything behind it not yet submitted, and everything
        that arrives later, so no later request of the connection takes effect before it."""
        st.refusing = why
        behind = False
        for e in st.queue:
            if e is after:
                behind = True
            elif behind and not e.done and (e.read is not None or e.held is not None):
                e.held = None
                e.reply = Reply(st.conn, e.xid, self.tree.last_zxid, ErrorInfo("NOT_READY", why), None)
                e.done = True

    def _submit(self, e: _Entry, value: bytes) -> int:
        st = e.st
        if st is not None and st.refusing is not None:
            self._finish(e, Reply(st.conn, e.xid, self.tree.last_zxid, ErrorInfo("NOT_READY", st.refusing)))
            return 0
        rid = self._next_rid
        self._next_rid = rid + 1 if rid < RID_MASK else 1  # (a core request id has 40 bits)
        self.pending[rid] = e
        self._out.append(SubmitTxn(rid, value))
        return rid

    def _write(self, st: _Conn, xid: int, op: Write) -> None:
        e = _Entry(xid, st)
        st.queue.append(e)
        sid, t, auth = st.session, self.now_ms, st.auth
        try:
            check_request(op)  # past this, an exception in the tree is a bug, not a bad request
            match op:
                case Create(path, data, ephemeral, sequential, acl, container, ttl, stat):
                    data = None if data is None else bytes(data)  # (None: ZooKeeper's null)
                    value = tops.create(path, data, ephemeral=ephemeral, sequential=sequential, session_id=sid,
                                        time_ms=t, acl=acl, container=container, ttl=ttl, stat=stat, auth=auth)
                case Delete(path, version):
                    value = tops.delete(path, version, session_id=sid, time_ms=t, auth=auth)
                case SetData(path, data, version):
                    data = None if data is None else bytes(data)
                    value = tops.set_data(path, data, version, session_id=sid, time_ms=t, auth=auth)
                case SetACL(path, acl, version):
                    value = tops.set_acl(path, acl, version, session_id=sid, time_ms=t, auth=auth)
                case Check(path, version):
                    value = tops.check(path, version, session_id=sid, time_ms=t, auth=auth)
                case Sync(path):
                    value = tops.sync(path, session_id=sid, time_ms=t, auth=auth)
                case Multi(ops):
                    value = tops.multi(ops, session_id=sid, time_ms=t, auth=auth)
                case CloseSession():
                    st.closing = True
                    value = tops.close_session(sid, time_ms=t)
                case _:
                    raise ValueError(f"unknown request {op!r:.40}")
        except ZooKeeperError as x:
            self._finish(e, Reply(st.conn, xid, self.tree.last_zxid, ErrorInfo(x.code, x.message, x.path, x.index)))
            return
        self.stats["writes"] += 1
        if st.reads:
            e.held = value
        else:
            self._submit(e, value)

    def _read(self, st: _Conn, e: _Entry) -> None:
        op = e.read
        assert op is not None
        tree = self.tree
        sid = st.session
        self.stats["reads"] += 1
        value: Any = None
        error = None
        e.done = True
        if not sid:
            e.reply = Reply(st.conn, e.xid, tree.last_zxid, ErrorInfo("SESSION_EXPIRED", "the session expired"))
            return
        try:
            check_request(op)
            if isinstance(op, _TREE_READS):
                value = reads.read(tree, self.watches, sid, st.auth, op)
            elif isinstance(op, _WATCH_OPS):
                reads.watch_op(self.watches, sid, op)
            elif isinstance(op, AddAuth):
                ip = next((i for s, i in st.auth if s == "ip"), None)  # the connection's own address
                ids = authenticate(op.scheme, op.credential, super_digest=self.super_digest, address=ip)
                st.auth += tuple(i for i in ids if i not in st.auth)
            elif isinstance(op, Sasl):
                value = self._sasl(st, op)
            elif isinstance(op, SetWatches):
                w = op.watches
                self._send_fired(st, self.watches.set_watches(
                    tree, sid, op.last_zxid, w.data, w.exist, w.child, w.persistent, w.recursive), tree.last_zxid)
        except ZooKeeperError as x:
            error = ErrorInfo(x.code, x.message, x.path, x.index)
            e.close_after = x.code == "AUTH_FAILED"
        e.reply = Reply(st.conn, e.xid, tree.last_zxid, error, value)

    def _sasl(self, st: _Conn, op: Sasl) -> bytes:
        """One DIGEST-MD5 step (``zabray.zk.digest_md5``); once complete the connection holds
        ("sasl", user), as ZooKeeper's processSasl adds it. A failure is logged with its reason
        (never a password) and answered AUTH_FAILED, which closes the connection."""
        try:
            if self.sasl_users is None:
                raise SaslFailure("SASL is not configured on this ensemble (config key zk_sasl_jaas_file)")
            if st.sasl is None:
                if not op.nonce:
                    raise SaslFailure("the connection has no SASL nonce")
                st.sasl = DigestMD5Server(self.sasl_users, op.nonce)
            token = st.sasl.respond(op.token)
        except SaslFailure as x:
            log.warning("replica %d: SASL authentication of session 0x%x failed: %s", self.replica, st.session, x)
            raise AuthFailedError(f"SASL authentication failed: {x}") from None
        user = st.sasl.user
        if st.sasl.complete and user is not None and ("sasl", user) not in st.auth:
            st.auth += (("sasl", user),)
        return token

    # -- the core's answers ----------------------------------------------------------------------

    def _committed(self, rid: int, zxid: int, result: Result | None) -> None:
        e = self.pending.pop(rid, None)
        if e is None:
            return
        error = None
        value: Any = None
        if result is None or result.ok:
            if result is not None:
                value = result.value
                if result.op == OpCode.CREATE_SESSION:
                    value = (result.session_id, result.value, False)
        else:
            x = result.error
            assert x is not None
            error = ErrorInfo(x.code, x.message, x.path, x.index)
        if e.on_ok is not None:
            if error is None:
                e.on_ok()
            e.on_ok = None
        conn = e.st.conn if e.st is not None else -1
        self._finish(e, Reply(conn, e.xid, int(zxid), error, value), defer=True)

    def _failed(self, rid: int, reason: str, uncertain: bool) -> None:
        e = self.pending.pop(rid, None)
        if e is None:
            return
        st = e.st
        if st is not None and uncertain:
            # The core left broadcast with this write in flight: its fate is decided by the next
            # leader. Like ZooKeeper, report that only by dropping the connection, so the session
            # asks again on a replica that is serving, never here: a read answered here now could
            # miss the write and the write still commit later (a lock recipe that retries its
            # create then waits on its own lost node forever).
            self._out.append(CloseConn(st.conn))
            self._conn_closed(st.conn)
            return
        code = "CONNECTION_LOSS" if uncertain else "NOT_READY"
        conn = st.conn if st is not None else -1
        if st is not None:
            self.stats["refused_not_ready"] += 1
            self._refuse_rest(st, e, reason)
        self._finish(e, Reply(conn, e.xid, self.tree.last_zxid, ErrorInfo(code, reason)), defer=True)

    def _delivered(self, result: Result) -> None:
        z = result.zxid
        if result.ok and result.op == OpCode.CLOSE_SESSION:
            sid = result.session_id
            self.watches.drop_session(sid)
            self.expiring.pop(sid, None)
            if self.tracker is not None:
                self.tracker.pop(sid, None)
            st = self.by_session.pop(sid, None)
            if st is not None:
                st.session = 0
                if not st.closing:
                    self.stats["sessions_expired"] += 1
                    self._out.append(SessionEnded(st.conn, sid, z))
        elif result.ok and result.op == OpCode.CREATE_SESSION:
            self.stats["sessions_created"] += 1
            if self.tracker is not None:
                self.tracker[result.session_id] = self.now_ms + int(result.value)
        for ch in result.changes:
            for f in self.watches.fire(ch.path, ch.event):
                st = self.by_session.get(f.session)
                # ZooKeeper 3.8 consumes the watch but tells only a watcher that may READ the znode.
                if st is not None and acl_allowed(ch.acl, PERM_READ, st.auth):
                    self._send_event(st, f.kind, f.path, f.event, z)

    # -- time, roles and the session tracker -------------------------------------------------------

    def _alive(self, sessions: tuple[int, ...]) -> None:
        tr = self.tracker
        if tr is None:
            return
        for s in sessions:
            t = self.tree.session_timeout(s)
            if t is not None and s not in self.expiring:
                tr[s] = self.now_ms + t

    def _role(self, serving: bool, leading: bool, looking: bool = False) -> None:
        if self.ro.role(serving, looking, self.now_ms):
            # The replica follows or leads again: like ZooKeeper shutting its read-only server
            # down, every connection closes (local sessions are forgotten).
            log.info("replica %d: leaving read-only mode: closing %d connection(s)", self.replica, len(self.conns))
            for st in sorted(self.conns.values(), key=lambda c: c.conn):
                self._out.append(CloseConn(st.conn))
                self._conn_closed(st.conn)
        if self.serving and not serving:
            # ZooKeeper drops its clients when it loses the leader: they move to a serving replica.
            for st in sorted(self.conns.values(), key=lambda c: c.conn):
                if st.session:
                    self._out.append(CloseConn(st.conn))
                    self._conn_closed(st.conn)
        self.serving = serving
        self.leading = leading = serving and leading
        if not serving:
            self.touched.clear()
        if not leading:
            self.tracker = None
            self.expiring.clear()
            self.sweeping.clear()
        elif self.tracker is None:
            # A new leader: every live session gets a full timeout to reach it.
            self.tracker = self._start_tracker()

    def _start_tracker(self) -> dict[int, int]:
        return {s: self.now_ms + t for s, t in self.tree.sessions().items()}

    def _tick(self) -> None:
        if not self.serving:
            self._read_only_tick()
            return
        if self.touched:
            self._out.append(ReportTouches(tuple(sorted(self.touched))))
            self.touched.clear()
        tracker = self.tracker
        if tracker is None:
            return
        for s, deadline in sorted(tracker.items()):
            if deadline < self.now_ms and s not in self.expiring:
                log.info("replica %d: expiring session 0x%x", self.replica, s)
                self.expiring[s] = self._submit(_Entry(0, None), tops.close_session(s, time_ms=self.now_ms))
        if self.container_check_ms and self.now_ms >= self._next_sweep:
            # ZooKeeper's ContainerManager: the leader deletes empty containers and expired TTL
            # znodes; the txn re-checks eligibility, so a child created meanwhile wins.
            self._next_sweep = self.now_ms + self.container_check_ms
            for path in self.tree.expired(self.now_ms):
                if path not in self.sweeping:
                    self.sweeping[path] = self._submit(_Entry(0, None), tops.delete_container(path, time_ms=self.now_ms))

    # -- read-only mode ------------------------------------------------------------------------------

    def _read_only_tick(self) -> None:
        began, expired = self.ro.tick(self.now_ms)
        if began:
            log.info("replica %d: no quorum for %d ms: serving read-only sessions", self.replica, self.ro.after_ms)
        for sid in expired:
            self._end_local(sid, expired=True)

    def _end_local(self, sid: int, expired: bool) -> None:
        """A local session is over: its watches go; if it expired, its connection is told."""
        self.watches.drop_session(sid)
        st = self.by_session.pop(sid, None)
        if st is not None:
            st.session = 0
            if expired:
                self.stats["sessions_expired"] += 1
                self._out.append(SessionEnded(st.conn, sid, self.tree.last_zxid))

    def _connect_read_only(self, st: _Conn, xid: int, op: Connect, timeout: int) -> None:
        sid = op.session_id
        st.auth = tuple(op.auth)
        if sid == 0:
            sid = self._new_session_id()
            self.ro.open(sid, timeout, self.now_ms)
            self.stats["read_only_sessions"] += 1
            self._bind(st, sid, op.watches, op.last_zxid if op.watches_since is None else op.watches_since)
            self._answer_now(st, xid, None, (sid, timeout, True))
            return
        live = self.tree.session_timeout(sid)
        if live is None:
            live = self.ro.timeout(sid)
        if live is None:
            self._answer_now(st, xid, ErrorInfo("SESSION_EXPIRED", f"session 0x{sid:x} has expired"))
            return
        self._bind(st, sid, op.watches, op.last_zxid if op.watches_since is None else op.watches_since)
        self._touch(sid)
        self._answer_now(st, xid, None, (sid, live, True))

    # -- sessions ----------------------------------------------------------------------------------

    def _conn_closed(self, conn: int) -> None:
        st = self.conns.pop(conn, None)
        if st is None:
            return
        for e in st.queue:
            e.st = None
        st.queue.clear()
        self.dirty.discard(conn)
        if st.session and self.by_session.get(st.session) is st:
            del self.by_session[st.session]
            self.watches.drop_session(st.session)

    def _connect(self, st: _Conn, xid: int, op: Connect) -> None:
        read_only = not self.serving and self.ro.serving and op.read_only
        if not self.serving and not read_only:
            self.stats["refused_not_ready"] += 1
            why = "serves read-only sessions only" if self.ro.serving else "is not serving"
            self._answer_now(st, xid, ErrorInfo("NOT_READY", f"replica {self.replica} {why}"))
            return
        if op.last_zxid > self.tree.last_zxid:
            self.stats["refused_behind"] += 1
            self._answer_now(st, xid, ErrorInfo(
                "BEHIND", f"replica {self.replica} has seen 0x{self.tree.last_zxid:x}, "
                f"the session has seen 0x{op.last_zxid:x}"))
            return
        if st.session:
            self._answer_now(st, xid, ErrorInfo("BAD_ARGUMENTS", "this connection already has a session"))
            return
        timeout = max(self.min_timeout_ms, min(self.max_timeout_ms, op.timeout_ms))
        if read_only:
            self._connect_read_only(st, xid, op, timeout)
            return
        st.auth = tuple(op.auth)
        sid = op.session_id
        if sid == 0:
            sid = self._new_session_id()
            e = st.opening = _Entry(xid, st)
            st.queue.append(e)
            # A client asking for a new session may bring watches from an earlier one (a client
            # leaving a read-only replica's local session, as the Java client does with its
            # SetWatches): registered from its last zxid, the changes it missed fire at once.
            since = op.last_zxid if op.watches_since is None else op.watches_since
            e.on_ok = lambda: self._bind(st, sid, op.watches, since)
            self._submit(e, tops.create_session(sid, timeout, time_ms=self.now_ms))
            return
        live = self.tree.session_timeout(sid)
        if live is None:
            self._answer_now(st, xid, ErrorInfo("SESSION_EXPIRED", f"session 0x{sid:x} has expired"))
            return
        self._bind(st, sid, op.watches, op.last_zxid if op.watches_since is None else op.watches_since)
        self.touched.add(sid)
        self._answer_now(st, xid, None, (sid, live, False))

    def _bind(self, st: _Conn, sid: int, watches: Watches, last_zxid: int) -> None:
        if st.conn not in self.conns:
            return  # the connection went away before its session was created
        old = self.by_session.get(sid)
        if old is not None and old is not st:
            old.session = 0
            self._out.append(CloseConn(old.conn))
            self._conn_closed(old.conn)
        self.watches.drop_session(sid)
        st.session = sid
        self.by_session[sid] = st
        w = watches
        self._send_fired(st, self.watches.set_watches(self.tree, sid, last_zxid, w.data, w.exist, w.child,
                                                      w.persistent, w.recursive), self.tree.last_zxid)

    def _new_session_id(self) -> int:
        self._counter = (self._counter + 1) & 0xFFFF
        return (self.replica & 0x7F) << 56 | ((self.now_ms + self.id_salt) & ((1 << 40) - 1)) << 16 | self._counter

    # -- watches -----------------------------------------------------------------------------------

    def _send_event(self, st: _Conn, kind: str, path: str, event: str, zxid: int) -> None:
        self.stats["watch_events"] += 1
        self._out.append(WatchFired(st.conn, kind, path, event, zxid))

    def _send_fired(self, st: _Conn, fired: list[Fired], zxid: int) -> None:
        for f in fired:
            self._send_event(st, f.kind, f.path, f.event, zxid)
