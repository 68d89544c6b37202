"""A ZooKeeper client session as a pure state machine: events in, actions out.

No sockets, clock, thread or randomness: the shell (the asyncio client in ``zabray.client.session``,
or the simulator) dials the replicas it is asked to, feeds what arrives, and passes time in
as ``ClientTick(now_ms)``. The replica order is the shell's to choose (``replicas``).

What it promises:
- Requests are sent in issue order on one connection at a time (pipelined) and completed in
  issue order.
- A request whose fate is unknown (sent, then the connection broke) completes with
  ``CONNECTION_LOSS``; one refused before it reached the core (``NOT_READY``) is certainly not
  applied, so it is re-sent, with everything issued after it, on the next connection, until its
  deadline (then it completes ``NOT_READY``, still certainly not applied).
- It pings after a third of the timeout idle and moves to another replica after two thirds of it
  without hearing back; on connecting it re-registers its watches from the newest zxid a reply
  carried (every notification up to it has arrived; one at a later zxid may have come without
  its siblings), and a replica whose tree is behind the newest zxid it saw, notifications
  included, refuses it (``BEHIND``), so it never goes back in time.
- A watch fires at most once; ``events`` counts notifications handed out, so the shell can wait
  until every notification received before a reply was dispatched before returning that reply.
- With ``read_only`` it accepts a read-only session from a replica cut off from its quorum (as
  ZooKeeper's Java client with ``canBeReadOnly``): reads are served, writes come back
  NOT_READ_ONLY. Until it has been on a read-write replica it asks each replica for a new
  session (the Java client's seenRwServerBefore: a read-only session is local to its replica);
  while read-only and idle it tries another replica every ``rw_probe_ms``, and stays on the
  first that is read-write.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from zabray.zk.messages import (
    ClientOp,
    CloseSession,
    Connect,
    ErrorInfo,
    Exists,
    GetChildren,
    GetData,
    Ping,
    Reply,
    SessionEnded,
    Watches,
    WatchFired,
)

# -- events ----------------------------------------------------------------------------------------


class ClientEvent:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Call(ClientEvent):
    """The user issues ``op`` (a read or write); ``watch``: register a watch (reads only)."""

    call_id: int
    op: ClientOp
    watch: bool = False


@dataclass(frozen=True, slots=True)
class Dialed(ClientEvent):
    conn: int


@dataclass(frozen=True, slots=True)
class ConnLost(ClientEvent):
    """``conn`` broke, or could not be opened."""

    conn: int


@dataclass(frozen=True, slots=True)
class Received(ClientEvent):
    conn: int
    msg: Reply | WatchFired | SessionEnded


@dataclass(frozen=True, slots=True)
class ClientTick(ClientEvent):
    now_ms: int


@dataclass(frozen=True, slots=True)
class Kill(ClientEvent):
    """Stop dead like a crashed client: no close, every call fails CONNECTION_LOSS."""


# -- actions ---------------------------------------------------------------------------------------


class ClientAction:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Dial(ClientAction):
    conn: int
    replica: int


@dataclass(frozen=True, slots=True)
class Hangup(ClientAction):
    conn: int


@dataclass(frozen=True, slots=True)
class SendOp(ClientAction):
    conn: int
    xid: int
    op: ClientOp


@dataclass(frozen=True, slots=True)
class Completed(ClientAction):
    """Call ``call_id`` is answered; ``events``: notifications handed out before it."""

    call_id: int
    zxid: int
    error: ErrorInfo | None
    value: Any
    events: int


@dataclass(frozen=True, slots=True)
class Notice(ClientAction):
    """Watch ``(kind, path)`` fired with ``event``; ``calls`` are the reads that set it."""

    calls: tuple[int, ...]
    kind: str
    path: str
    event: str
    zxid: int


@dataclass(frozen=True, slots=True)
class SessionOver(ClientAction):
    """``expired``: the ensemble ended the session; else the client closed or was killed."""

    expired: bool


@dataclass(frozen=True, slots=True)
class Connected(ClientAction):
    """The session (re)started on ``replica``; ``first`` for the first time; ``read_only``: the
    replica serves it read-only."""

    replica: int
    session_id: int
    first: bool
    read_only: bool = False


_LOSS = "CONNECTION_LOSS"


class _Call:
    __slots__ = ("call_id", "op", "watch", "deadline")

    def __init__(self, call_id: int, op: ClientOp, watch: bool, deadline: int) -> None:
        self.call_id = call_id
        self.op = op
        self.watch = watch
        self.deadline = deadline


class ClientSession:
    """One session. Feed ``step``; carry out the actions it returns, in order."""

    def __init__(self, replicas: Sequence[int], timeout_ms: int, now_ms: int = 0, *, prefer: int | None = None,
                 retry_ms: int = 100, eager: bool = False, read_only: bool = False, rw_probe_ms: int = 1000) -> None:
        if not replicas:
            raise ValueError("a session needs at least one replica to connect to")
        self.replicas = list(replicas)
        if prefer in self.replicas:
            self.replicas.remove(prefer)
            self.replicas.insert(0, prefer)
        self.timeout_ms = timeout_ms
        self.now = now_ms
        self.retry_ms = retry_ms
        # Send calls right behind a connect, before its answer, as the Java client's Netty socket
        # does (the replica holds them until the session is there); if that connect then fails,
        # they complete CONNECTION_LOSS, as the Java client's do.
        self.eager = eager
        self.read_only = read_only  # read-only sessions are acceptable (kazoo/Java: canBeReadOnly)
        self.rw_probe_ms = rw_probe_ms
        self.seen_rw = False  # has been on a read-write replica (its session is a global one)
        self.connected_ro = False  # the serving connection is read-only
        self._ro_since = now_ms
        self.session_id = 0
        self.last_zxid = 0  # the newest zxid seen, notifications included: never read older
        self.replied_zxid = 0  # the newest zxid of a reply: every notification up to it is in
        self.expired = False
        self.closed = False
        self.moves = 0
        self.events = 0
        self.conn: int | None = None  # the serving connection
        self.dialing: int | None = None  # a connection being opened or asked to connect
        self.dial_deadline = 0
        self.connected_to: int | None = None
        self._next_conn = 1
        self._next_xid = 1
        self._turn = 0  # index into replicas of the next to try
        self._tried = 0  # failed tries since the last success
        self._late_creates = 0  # tries to create the session that ran out of time
        self._retry_at = now_ms
        self._connect_xid = 0
        self._dial_replica = -1
        self.last_heard = now_ms
        self.last_sent = now_ms
        self.outbox: deque[_Call] = deque()
        self.inflight: dict[int, _Call] = {}  # xid -> call, in send order
        self.watchers: dict[tuple[str, str], tuple[str, list[int]]] = {}  # (table, path) -> (kind, calls)
        self._out: list[ClientAction] = []

    @property
    def op_timeout_ms(self) -> int:
        return max(10_000, 2 * self.timeout_ms)

    # -- the interface ---------------------------------------------------------------------------

    def start(self) -> list[ClientAction]:
        self._dial()
        return self._take()

    def step(self, event: ClientEvent) -> list[ClientAction]:
        match event:
            case Call(call_id, op, watch):
                self._call(call_id, op, watch)
            case Received(conn, msg):
                self._received(conn, msg)
            case Dialed(conn):
                self._dialed(conn)
            case ConnLost(conn):
                self._lost(conn)
            case ClientTick(now_ms):
                self.now = max(self.now, now_ms)
                self._tick()
            case Kill():
                self._end(ErrorInfo(_LOSS, "session killed"), expired=False)
            case _:
                raise TypeError(f"unknown client event {event!r:.80}")
        return self._take()

    def _take(self) -> list[ClientAction]:
        out, self._out = self._out, []
        return out

    @property
    def over(self) -> bool:
        return self.expired or self.closed

    # -- connecting --------------------------------------------------------------------------------

    def _dial(self) -> None:
        if self.over or self.dialing is not None or self.conn is not None:
            return
        if self._tried >= len(self.replicas):
            # A whole round refused us: wait a little before the next.
            self._tried = 0
            self._retry_at = self.now + self.retry_ms
            return
        if self.now < self._retry_at:
            return
        replica = self.replicas[self._turn % len(self.replicas)]
        self._turn += 1
        self._tried += 1
        conn = self._next_conn
        self._next_conn += 1
        self.dialing = conn
        self._dial_replica = replica
        # Two thirds of the timeout, as for a silent replica. A new session's create is a txn: on
        # a loaded ensemble it may need longer, and each try given up leaves an orphan session
        # whose expiry is one more txn (tries that keep running out would keep the ensemble
        # too busy to ever commit one). So each try that ran out doubles the next one's wait.
        wait = max(500, 2 * self.timeout_ms // 3)
        if self.session_id == 0:
            wait = min(self.op_timeout_ms, wait << min(self._late_creates, 5))
        self.dial_deadline = self.now + wait
        self._out.append(Dial(conn, replica))

    def _dialed(self, conn: int) -> None:
        if conn != self.dialing:
            return
        w: dict[str, list[str]] = {"data": [], "exist": [], "child": []}
        for (_table, path), (kind, _) in sorted(self.watchers.items()):
            w[kind].append(path)
        xid = self._xid()
        self._connect_xid = xid
        # A read-only session is local to its replica: until the client has been on a
        # read-write one it asks for a new session each time (the Java client's rule).
        sid = self.session_id if self.seen_rw or not self.read_only else 0
        # Watches are re-registered from the newest reply, not the newest notification: a
        # change fires several notifications (the path's data and child watches, its
        # parent's), and a connection can break after the first of them arrived.
        self._out.append(SendOp(conn, xid, Connect(sid, self.timeout_ms, self.last_zxid,
                                                   Watches(tuple(w["data"]), tuple(w["exist"]), tuple(w["child"])),
                                                   watches_since=self.replied_zxid, read_only=self.read_only)))
        if self.eager:
            self._send(conn)

    def _give_up_dial(self) -> None:
        conn = self.dialing
        if conn is not None:
            self.dialing = None
            self._out.append(Hangup(conn))
            self._lose_eager()
        self._dial()

    def _lose_eager(self) -> None:
        """The connect whose connection carried eager calls failed: their fate is unknown (the
        replica may have created the session and run them just before the answer was lost)."""
        calls = list(self.inflight.values())
        self.inflight.clear()
        for c in calls:
            self._complete(c, 0, ErrorInfo(_LOSS, "the connection broke before the session was there"), None)

    def _connected(self, conn: int, value: Any) -> None:
        first = self.session_id == 0
        if not first:
            self.moves += 1
        self.session_id, self.timeout_ms = int(value[0]), int(value[1])
        self.connected_ro = len(value) > 2 and bool(value[2])
        self.seen_rw |= not self.connected_ro
        self._ro_since = self.now
        self.dialing = None
        self.conn = conn
        self.connected_to = self._dial_replica
        self._tried = 0
        self.last_heard = self.last_sent = self.now
        self._out.append(Connected(self._dial_replica, self.session_id, first, self.connected_ro))
        self._flush()

    def _xid(self) -> int:
        x = self._next_xid
        self._next_xid += 1
        return x

    # -- requests ----------------------------------------------------------------------------------

    def _call(self, call_id: int, op: ClientOp, watch: bool) -> None:
        if self.expired:
            self._complete(_Call(call_id, op, watch, 0), 0,
                           ErrorInfo("SESSION_EXPIRED", f"session 0x{self.session_id:x} has expired"), None)
            return
        if self.closed:
            self._complete(_Call(call_id, op, watch, 0), 0, ErrorInfo(_LOSS, "the session is closed"), None)
            return
        self.outbox.append(_Call(call_id, op, watch, self.now + self.op_timeout_ms))
        self._flush()

    def _flush(self) -> None:
        if self.conn is not None:
            self._send(self.conn)

    def _send(self, conn: int) -> None:
        while self.outbox:
            c = self.outbox.popleft()
            xid = self._xid()
            self.inflight[xid] = c
            self.last_sent = self.now
            self._out.append(SendOp(conn, xid, c.op))

    def _complete(self, c: _Call, zxid: int, error: ErrorInfo | None, value: Any) -> None:
        self._out.append(Completed(c.call_id, zxid, error, value, self.events))

    def _received(self, conn: int, msg: Reply | WatchFired | SessionEnded) -> None:
        if conn == self.dialing and type(msg) is Reply and msg.xid == self._connect_xid:
            if msg.zxid > self.last_zxid and msg.error is None:
                self.last_zxid = msg.zxid
            if msg.zxid > self.replied_zxid and msg.error is None:
                self.replied_zxid = msg.zxid
            if msg.error is None:
                self._connected(conn, msg.value)
            elif msg.error.code == "SESSION_EXPIRED":
                self._end(ErrorInfo("SESSION_EXPIRED", msg.error.message), expired=True)
            else:
                self._give_up_dial()
            return
        if conn != self.conn and not (conn == self.dialing and type(msg) is not Reply):
            return  # (SetWatches fires on the new connection before the connect is answered)
        self.last_heard = self.now
        if type(msg) is Reply:
            if msg.zxid > self.last_zxid:
                self.last_zxid = msg.zxid
            if msg.zxid > self.replied_zxid:
                self.replied_zxid = msg.zxid
            c = self.inflight.pop(msg.xid, None)
            if c is None:
                return  # a ping
            err = msg.error
            if err is not None and err.code == "NOT_READY" and self.now < c.deadline:
                # Certainly not applied: send it again, and everything after it, elsewhere.
                again = [c, *self.inflight.values()]
                self.inflight.clear()
                self.outbox.extendleft(reversed(again))
                self._drop_conn(ErrorInfo(_LOSS, "unreachable"))
                return
            if err is None and c.watch:
                op = c.op
                if type(op) is GetChildren:
                    self._register("child", op.path, "child", c.call_id)
                elif type(op) is Exists and msg.value is None:
                    self._register("data", op.path, "exist", c.call_id)
                elif type(op) in (GetData, Exists):
                    self._register("data", op.path, "data", c.call_id)  # type: ignore[union-attr]
            if err is None and type(c.op) is CloseSession:
                self._complete(c, msg.zxid, None, msg.value)
                self._end(ErrorInfo(_LOSS, "the session is closed"), expired=False)
                return
            self._complete(c, msg.zxid, err, msg.value)
        elif type(msg) is WatchFired:
            if msg.zxid > self.last_zxid:
                self.last_zxid = msg.zxid
            # As ZooKeeper's client does: the server tells a session once per change, and a
            # deletion is news to the data and the child watches on the path alike. A
            # notification no watch is waiting for is dropped, as the Java client drops it: a
            # moved session's SetWatches tells a deleted path once per table, and the first of
            # the two already fired both watches (a watch fires at most once).
            kinds = ("data", "child") if msg.event == "deleted" else (msg.kind,)
            for kind in kinds:
                entry = self.watchers.pop((kind, msg.path), None)
                if entry is not None:
                    self.events += 1  # one per Notice: the shell counts the Notices it dispatched
                    self._out.append(Notice(tuple(entry[1]), kind, msg.path, msg.event, msg.zxid))
        else:
            self._end(ErrorInfo("SESSION_EXPIRED", f"session 0x{self.session_id:x} has expired"), expired=True)

    def _register(self, table: str, path: str, kind: str, call_id: int) -> None:
        old = self.watchers.get((table, path))
        calls = old[1] if old else []
        calls.append(call_id)
        self.watchers[(table, path)] = (kind, calls)

    # -- losing connections, time, the end ----------------------------------------------------------

    def _drop_conn(self, error: ErrorInfo) -> None:
        """Leave the serving connection: what is in flight has an unknown fate."""
        conn = self.conn
        if conn is None:
            return
        self.conn = None
        self.connected_to = None
        self._out.append(Hangup(conn))
        inflight = list(self.inflight.values())
        self.inflight.clear()
        for c in inflight:
            self._complete(c, 0, error, None)
        self._dial()

    def _lost(self, conn: int) -> None:
        if conn == self.dialing:
            self.dialing = None
            self._lose_eager()
            self._dial()
        elif conn == self.conn:
            self._drop_conn(ErrorInfo(_LOSS, f"connection to replica {self.connected_to} lost"))

    def _tick(self) -> None:
        if self.over:
            return
        now = self.now
        # Calls never sent that ran out of time: certainly not applied.
        while self.outbox and self.outbox[0].deadline <= now:
            c = self.outbox.popleft()
            self._complete(c, 0, ErrorInfo("NOT_READY", "no replica took the request in time"), None)
        if self.dialing is not None:
            if now >= self.dial_deadline:
                if self.session_id == 0:
                    self._late_creates += 1
                self._give_up_dial()
            return
        conn = self.conn
        if conn is None:
            self._dial()
            return
        t = self.timeout_ms
        if now - self.last_heard > 2 * t // 3:
            self._drop_conn(ErrorInfo(_LOSS, f"nothing from replica {self.connected_to} for {now - self.last_heard} ms"))
            return
        if self.connected_ro and not self.inflight and not self.outbox and now - self._ro_since >= self.rw_probe_ms:
            # Read-only and idle: try the next replica, which may be read-write again.
            self._drop_conn(ErrorInfo(_LOSS, "looking for a read-write replica"))
            return
        if now - self.last_sent > t // 3 or now - self.last_heard > t // 3:
            self.last_sent = now
            self._out.append(SendOp(conn, self._xid(), Ping()))

    def _end(self, error: ErrorInfo, *, expired: bool) -> None:
        if self.over:
            return
        if expired:
            self.expired = True
        else:
            self.closed = True
        for conn in (self.conn, self.dialing):
            if conn is not None:
                self._out.append(Hangup(conn))
        self.conn = self.dialing = None
        self.connected_to = None
        calls = [*self.inflight.values(), *self.outbox]
        self.inflight.clear()
        self.outbox.clear()
        for c in calls:
            self._complete(c, 0, error, None)
        self.watchers.clear()
        self._out.append(SessionOver(expired))
