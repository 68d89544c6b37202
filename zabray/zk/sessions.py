"""The ZooKeeper service's sessions, pure: connecting and resuming, session ids, touches, the
leader's session tracker and container sweeps, roles, and read-only mode's local sessions. The
layer between a connection's FIFO (``zabray.zk.connection``) and the requests
(``zabray.zk.service.ZkService``), which is what a replica hosts.

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

A connection's watches go with it; a moving client re-registers them with its last seen zxid and
those whose change it missed fire at once (ZooKeeper's SetWatches).

Read-only mode (``read_only_after_ms``; ``zabray.zk.read_only`` decides when): a replica
looking for a leader serves clients that asked for read-only from its tree (only committed txns),
never a session that saw more than the tree (``BEHIND``); writes are NOT_READ_ONLY; leaving the
mode closes every connection.
"""

from __future__ import annotations

import logging

from zabray.tree import DataTree, ZooKeeperError, authenticate
from zabray.tree import ops as tops
from zabray.zk.connection import Conn, ConnectionQueues, Entry
from zabray.zk.messages import (
    ClientOp,
    CloseConn,
    CloseSession,
    Connect,
    ErrorInfo,
    Reply,
    ReportTouches,
    SessionEnded,
    Watches,
    WatchFired,
)
from zabray.zk.read_only import ReadOnlyMode
from zabray.zk.watches import Fired, WatchTables

log = logging.getLogger(__name__)


class Sessions(ConnectionQueues):
    """The sessions of one replica's service (``ZkService`` documents the arguments)."""

    def __init__(self, replica: int, tree: DataTree, *, now_ms: int, id_salt: int, min_timeout_ms: int,
                 max_timeout_ms: int, container_check_ms: int, super_digest: str | None,
                 read_only_after_ms: int | None) -> None:
        super().__init__(tree)
        self.replica = replica
        self.now_ms = now_ms
        self.id_salt = id_salt
        self.min_timeout_ms = min_timeout_ms
        self.max_timeout_ms = max(min_timeout_ms, max_timeout_ms)
        self.container_check_ms = container_check_ms
        self.super_digest = super_digest
        self._next_sweep = now_ms + container_check_ms
        self.sweeping: dict[str, int] = {}  # path -> core request id of its delete_container
        self.by_session: dict[int, Conn] = {}
        self.watches = WatchTables()
        self.touched: set[int] = set()
        self.tracker: dict[int, int] | None = None  # leader only: session -> deadline (ms)
        self.expiring: dict[int, int] = {}  # session -> core request id of its close
        self.serving = False
        self.leading = False
        self.ro = ReadOnlyMode(read_only_after_ms)
        self._counter = 0
        self.stats = {"sessions_created": 0, "sessions_expired": 0, "reads": 0, "writes": 0,
                      "watch_events": 0, "refused_behind": 0, "refused_not_ready": 0, "read_only_sessions": 0,
                      "refused_not_read_only": 0}

    def _touch(self, sid: int) -> None:
        self.touched.add(sid)
        if self.ro.serving:
            self.ro.touch(sid, self.now_ms)

    def _read_only_write(self, st: Conn, xid: int, op: ClientOp) -> None:
        """A write in read-only mode: NOT_READ_ONLY, but a local session may close itself."""
        sid = st.session
        if isinstance(op, CloseSession) and self.ro.close(sid):
            self._answer_now(st, xid, None)
            self._end_local(sid, expired=False)
            return
        self.stats["refused_not_read_only"] += 1
        self._answer_now(st, xid, ErrorInfo(
            "NOT_READ_ONLY", f"replica {self.replica} is read-only: it cannot reach a quorum, so it takes no writes"))

    def _internal_done(self, rep: Reply) -> None:
        # An internal request (an expiry or a container sweep) finished. A failed expiry is
        # tried again on a later tick; a sweep looks afresh at the next check.
        self.sweeping = {p: r for p, r in self.sweeping.items() if r in self.pending}
        if rep.error is not None:
            for s, r in list(self.expiring.items()):
                if r not in self.pending:
                    del self.expiring[s]

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
                self.expiring[s] = self._submit(Entry(0, None), tops.close_session(s, time_ms=self.now_ms))
        if self.container_check_ms and self.now_ms >= self._next_sweep:
            # ZooKeeper's ContainerManager: the leader deletes empty containers and expired TTL
            # znodes; the txn re-checks eligibility, so a child created meanwhile wins.
            self._next_sweep = self.now_ms + self.container_check_ms
            for path in self.tree.expired(self.now_ms):
                if path not in self.sweeping:
                    self.sweeping[path] = self._submit(Entry(0, None), tops.delete_container(path, time_ms=self.now_ms))

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

    def _connect_read_only(self, st: Conn, xid: int, op: Connect, timeout: int) -> None:
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

    def _connect(self, st: Conn, xid: int, op: Connect) -> None:
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
        ip = next((i for s, i in st.auth if s == "ip"), None)
        try:
            for scheme, credential in op.credentials:
                ids = authenticate(scheme, credential, super_digest=self.super_digest, address=ip)
                st.auth += tuple(i for i in ids if i not in st.auth)
        except ZooKeeperError as x:
            self._answer_now(st, xid, ErrorInfo(x.code, x.message))
            return
        sid = op.session_id
        if sid == 0:
            sid = self._new_session_id()
            e = st.opening = Entry(xid, st)
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

    def _bind(self, st: Conn, sid: int, watches: Watches, last_zxid: int) -> None:
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

    def _send_event(self, st: Conn, kind: str, path: str, event: str, zxid: int) -> None:
        self.stats["watch_events"] += 1
        self._out.append(WatchFired(st.conn, kind, path, event, zxid))

    def _send_fired(self, st: Conn, fired: list[Fired], zxid: int) -> None:
        for f in fired:
            self._send_event(st, f.kind, f.path, f.event, zxid)
