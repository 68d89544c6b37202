"""The ZooKeeper service on one replica, pure: what each request does, and the core's answers.
Events in (``zabray.zk.messages``), actions out; no clock, socket, thread or randomness (time
arrives as ``ServiceTick(now_ms)``). The replica's shell (``actors.replica``) and the simulator
(``zabray.sim.zksim``) host it the same way. Three layers, one module each: a connection's FIFO
and the order of its replies (``zabray.zk.connection``), sessions, the leader's tracker and
read-only mode (``zabray.zk.sessions``), and here the requests.

A write whose fate became unknown (``TxnFailed``, uncertain: the core left broadcast) closes
its connection instead of being answered: nothing more of that session is served here.

Watches. Registered by reads per session; fired on ``TxnDelivered`` as ``WatchFired`` on the
session's connection, before the answer to any read run afterwards, if that connection may
READ the znode (ZooKeeper 3.8's rule; the watch is used up either way). One-shot.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from zabray.tree import AuthFailedError, DataTree, OpCode, Result, ZooKeeperError, authenticate
from zabray.tree import ops as tops
from zabray.tree.acl import allowed as acl_allowed
from zabray.tree.znode import PERM_READ
from zabray.zk import reads
from zabray.zk.connection import Conn, Entry
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
    Reconfig,
    RemoveWatches,
    Reply,
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
    Sync,
    TxnCommitted,
    TxnDelivered,
    TxnFailed,
    Unimplemented,
    WhoAmI,
    Write,
)
from zabray.zk.sessions import Sessions
from zabray.zk.validate import check_request

log = logging.getLogger(__name__)

MIN_TIMEOUT_MS = 400
MAX_TIMEOUT_MS = 120_000
_READS = (GetData, Exists, GetChildren, GetACL, GetAllChildrenNumber, GetEphemerals, MultiRead, AddAuth, Sasl, WhoAmI,
          AddWatch, CheckWatches, RemoveWatches, SetWatches)
_TREE_READS = (GetData, Exists, GetChildren, GetACL, GetAllChildrenNumber, GetEphemerals, MultiRead, WhoAmI)
_WATCH_OPS = (AddWatch, CheckWatches, RemoveWatches)

@dataclass(frozen=True, slots=True)
class ServiceStatus:
    """The ZooKeeper service's counters on one replica, none of which walks the tree."""

    last_zxid: int
    znodes: int
    sessions: int
    """Global sessions the tree knows (on every replica)."""
    connected: int
    """Sessions connected to this replica."""
    tracking: int | None
    """Sessions the leader tracks (None on a learner)."""
    read_only: bool
    """Cut off from its quorum and serving read-only sessions."""
    local_sessions: int
    counters: dict[str, int]
    """Requests, sessions created and expired, refusals: by name, from 0 at its start."""


class ZkService(Sessions):
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
        super().__init__(replica, tree if tree is not None else DataTree(), now_ms=now_ms, id_salt=id_salt,
                         min_timeout_ms=min_timeout_ms, max_timeout_ms=max_timeout_ms,
                         container_check_ms=container_check_ms, super_digest=super_digest,
                         read_only_after_ms=read_only_after_ms)
        self.sasl_users = sasl_users

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
                self._drain_dirty()
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

    def status(self) -> ServiceStatus:
        """Counters only, nothing that walks the tree: status is polled (the driver, the snapshot
        actor, ``zabray status``) and runs on the replica's loop. ``tree.digest()`` walks it."""
        return ServiceStatus(
            last_zxid=self.tree.last_zxid, znodes=len(self.tree), sessions=len(self.tree.sessions()),
            connected=len(self.by_session), tracking=None if self.tracker is None else len(self.tracker),
            read_only=self.ro.serving, local_sessions=len(self.ro.local), counters=dict(self.stats))

    @property
    def read_only_serving(self) -> bool:
        """Cut off from its quorum, the replica serves read-only sessions."""
        return self.ro.serving

    # -- requests ------------------------------------------------------------------------------

    def _request(self, conn: int, xid: int, op: ClientOp) -> None:
        st = self.conns.get(conn)
        if st is None:
            st = self.conns[conn] = Conn(conn)
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
            st.queue.append(Entry(xid, st, op))
            st.reads += 1
            self._drain(st)
        elif self.ro.serving:
            self._read_only_write(st, xid, op)
        else:
            self._write(st, xid, op)


    def _opened(self, st: Conn) -> None:
        """The connect that creates the session is answered (either way): the requests sent
        behind it are taken in order now, as if they had just arrived."""
        st.opening, waiting, st.waiting = None, st.waiting, []
        for xid, op in waiting:
            if self.conns.get(st.conn) is not st:
                return  # one of them closed the connection (closeSession, a failed addAuth)
            self._request(st.conn, xid, op)

    def _write(self, st: Conn, xid: int, op: Write) -> None:
        e = Entry(xid, st)
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
                case Reconfig(joining, leaving, members, from_version):
                    e.reconfig = True
                    value = tops.reconfig(joining, leaving, members, from_version, session_id=sid, time_ms=t,
                                          auth=auth)
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

    def _read(self, st: Conn, e: Entry) -> None:
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

    def _sasl(self, st: Conn, op: Sasl) -> bytes:
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
