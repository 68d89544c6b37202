"""ZooKeeper sessions for users: ``Session`` (sync and ``_async`` methods) over TCP, one replica
at a time.

The session logic (pipelining, pings, moving between replicas, re-registering watches with the
last seen zxid, refusals, retrying what was certainly not applied) is the pure
``zabray.zk.client_session.ClientSession``; ``_Shell`` here only dials, frames and keeps time for
it, on one asyncio loop thread shared by every session of the process. The sync methods are thin
wrappers over the async ones. ``actors.session_actor.SessionActor`` (``Ensemble.session_actor()``)
owns a ``Session`` in its own Ray actor, for a client that should live, and die, apart.

Outcomes. ``ConnectionLossError`` (an ``UncertainOutcomeError``): the request was sent and its
fate is unknown. ``NotReadyError`` (a ``NoQuorumError``): no replica took it before its time
ran out, so it was certainly not applied (a refusal before the core is retried, in order, on
the session's next connection). Watch callbacks run, in the order the replica sent them, on the
session's dispatch thread; a call returns only after every notification received before its
reply was dispatched, so no read of this session shows a change before its watch callback ran;
if that cannot happen in time (a callback is stuck), the call raises ``WatchDispatchError``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from zabray.client.broadcast import LoopThread
from zabray.errors import CodecError, ConfigError, NoQuorumError, UncertainOutcomeError, ZabError
from zabray.net.batching import BatchingProtocol
from zabray.tree import (
    BadArgumentsError,
    BadVersionError,
    Check,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SetData,
    Stat,
    ZooKeeperError,
    error_for_code,
    validate_path,
)
from zabray.wire import clientproto as cp
from zabray.wire.framing import FrameDecoder
from zabray.zk import client_session as cs
from zabray.zk import messages as zm

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["Session", "ConnectionLossError", "NotReadyError", "WatchDispatchError", "WatchedEvent", "Create",
           "Delete", "SetData", "Check", "Stat", "NoNodeError", "NodeExistsError", "BadVersionError",
           "NotEmptyError", "SessionExpiredError", "ZooKeeperError"]


def _data(data: Any) -> bytes | None:
    """A znode's data as bytes, or None for ZooKeeper's null (as the Java client's and kazoo's
    null); ``BadArgumentsError`` for anything else (a str has no one encoding)."""
    if data is None:
        return None
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise BadArgumentsError(f"znode data must be bytes or None, got {type(data).__name__}")
    return bytes(data)


class ConnectionLossError(ZooKeeperError, UncertainOutcomeError):
    """The connection to the replica broke (or the replica lost its leader) with this request in
    flight: it may or may not have been applied. The session itself goes on (on another replica)."""

    code = "CONNECTION_LOSS"

    def __reduce__(self) -> tuple[object, ...]:
        return (ConnectionLossError, (self.message,))


class NotReadyError(ZooKeeperError, NoQuorumError):
    """No replica took the request before its time ran out: it was certainly not applied."""

    code = "NOT_READY"

    def __reduce__(self) -> tuple[object, ...]:
        return (NotReadyError, (self.message,))


class WatchDispatchError(ZabError):
    """A watch callback did not finish in time, so this call's reply, which may show the change
    the watch reports, cannot be returned after the callback as promised."""


@dataclass(frozen=True)
class WatchedEvent:
    """A fired watch: ``type`` is "created", "deleted", "changed" or "child"; ``kind`` is the
    watch that fired ("data" for get/exists watches, "child" for children watches)."""

    type: str
    path: str
    kind: str
    zxid: int


def _error(e: zm.ErrorInfo) -> ZooKeeperError:
    if e.code == "CONNECTION_LOSS":
        return ConnectionLossError(e.message, path=e.path, index=e.index)
    if e.code in ("NOT_READY", "BEHIND"):
        return NotReadyError(e.message, path=e.path, index=e.index)
    return error_for_code(e.code, e.message, path=e.path, index=e.index)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


# -- the bespoke wire protocol, client side --------------------------------------------------------


def _op_wire(op: Any) -> list[Any]:
    if isinstance(op, Create):
        return ["create", [op.path, _data(op.data), op.ephemeral, op.sequential]]
    if isinstance(op, Delete):
        return ["delete", [op.path, op.version]]
    if isinstance(op, SetData):
        return ["set", [op.path, _data(op.data), op.version]]
    if isinstance(op, Check):
        return ["check", [op.path, op.version]]
    raise ConfigError(f"multi takes Create/Delete/SetData/Check records, got {op!r:.60}")


def _request(xid: int, op: zm.ClientOp) -> cp.ZkReq:
    match op:
        case zm.Connect(sid, timeout, last, w, watches_since=since, credentials=creds):
            return cp.ZkReq(xid, "connect", [sid, timeout, last, {"data": list(w.data), "exist": list(w.exist),
                                                                    "child": list(w.child)},
                                             last if since is None else since, [list(c) for c in creds]])
        case zm.Ping():
            return cp.ZkReq(xid, "ping", [])
        case zm.GetData(path, watch):
            return cp.ZkReq(xid, "get", [path, watch])
        case zm.Exists(path, watch):
            return cp.ZkReq(xid, "exists", [path, watch])
        case zm.GetChildren(path, watch):
            return cp.ZkReq(xid, "children", [path, watch])
        case zm.Sync(path):
            return cp.ZkReq(xid, "sync", [path])
        case zm.Multi(ops):
            return cp.ZkReq(xid, "multi", [_op_wire(o) for o in ops])
        case zm.CloseSession():
            return cp.ZkReq(xid, "close", [])
        case zm.Reconfig(joining, leaving, members, version):
            return cp.ZkReq(xid, "reconfig", [joining, leaving, members, version])
        case _:
            kind, args = _op_wire(op)
            return cp.ZkReq(xid, kind, args)


def _incoming(msg: cp.ZkRep | cp.ZkEvent) -> zm.Reply | zm.WatchFired | zm.SessionEnded | None:
    if type(msg) is cp.ZkRep:
        e = msg.error
        err = None if e is None else zm.ErrorInfo(str(e[0]), str(e[1]), e[2], e[3])
        return zm.Reply(0, msg.rid, msg.zxid, err, msg.value)
    if type(msg) is cp.ZkEvent and msg.kind == "watch" and len(msg.args) == 4:
        table, path, event, zxid = msg.args
        return zm.WatchFired(0, str(table), str(path), str(event), int(zxid))
    if type(msg) is cp.ZkEvent and msg.kind == "expired":
        return zm.SessionEnded(0, int(msg.args[0]), int(msg.args[1]))
    return None


# -- the shell: sockets and time for the pure session ----------------------------------------------

_shared: Any = None
_shared_lock = threading.Lock()


def _loop_thread() -> Any:
    """The one asyncio loop thread every session of this process runs on."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.thread.is_alive():
            _shared = LoopThread()
        return _shared


class _Proto(BatchingProtocol):
    def __init__(self, shell: _Shell, conn: int) -> None:
        super().__init__()
        self.shell = shell
        self.conn = conn
        self.decoder = FrameDecoder()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            for payload in self.decoder.feed(data):
                rep = cp.decode_reply(payload)
                msg = _incoming(rep) if isinstance(rep, (cp.ZkRep, cp.ZkEvent)) else None
                if msg is not None:
                    self.shell.feed(cs.Received(self.conn, msg))
        except CodecError as e:
            log.warning("session: bad frame from a replica: %s", e)
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.shell.lost(self)

    send = BatchingProtocol.send_payload

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


Callback = Callable[[WatchedEvent], Any]


class _Shell:
    """Carries out a ``ClientSession``'s actions; every method runs on the shared loop."""

    def __init__(self, ensemble: str, addresses: dict[int, tuple[str, int]], timeout_ms: int,
                 refresh: Callable[[], dict[int, tuple[str, int]]] | None,
                 on_event: Callable[[list[Callback], WatchedEvent | None], None], prefer: int | None,
                 ssl: Any = None, credentials: tuple[tuple[str, bytes], ...] = ()) -> None:
        self.ensemble = ensemble
        self.ssl = ssl
        self.addresses = dict(addresses)
        self.refresh = refresh
        self.on_event = on_event
        replicas = sorted(self.addresses)
        random.shuffle(replicas)  # spread sessions over the replicas
        self.core = cs.ClientSession(replicas, timeout_ms, _now_ms(), prefer=prefer, credentials=credentials)
        self.protos: dict[int, _Proto] = {}
        self.calls: dict[int, tuple[cf.Future[Any], Callback | None]] = {}
        self.watch_cbs: dict[int, Callback] = {}
        self.next_call = 1
        self.loop = asyncio.get_running_loop()
        self.first: asyncio.Future[None] = self.loop.create_future()
        self._refreshing = False
        self._last_refresh = 0.0
        self._ticker: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Future[None]:
        self._apply(self.core.start())
        self._ticker = self.loop.create_task(self._tick_loop())
        return self.first

    async def _tick_loop(self) -> None:
        period = max(0.01, min(0.1, self.core.timeout_ms / 10_000))
        while not self.core.over:
            await asyncio.sleep(period)
            self.feed(cs.ClientTick(_now_ms()))

    def feed(self, event: cs.ClientEvent) -> None:
        self._apply(self.core.step(event))

    def call(self, op: zm.ClientOp, watch: Callback | None, fut: cf.Future[Any]) -> None:
        call_id = self.next_call
        self.next_call += 1
        self.calls[call_id] = (fut, watch)
        self.feed(cs.Call(call_id, op, watch is not None))

    def lost(self, proto: _Proto) -> None:
        if self.protos.get(proto.conn) is proto:
            del self.protos[proto.conn]
            self.feed(cs.ConnLost(proto.conn))

    def _apply(self, actions: list[cs.ClientAction]) -> None:
        for a in actions:
            match a:
                case cs.SendOp(conn, xid, op):
                    p = self.protos.get(conn)
                    if p is not None:
                        p.send(cp.encode(_request(xid, op)))
                case cs.Completed(call_id, zxid, error, value, events):
                    fut, watch = self.calls.pop(call_id, (None, None))
                    if error is None and watch is not None:
                        self.watch_cbs[call_id] = watch
                    if fut is not None and not fut.done():
                        fut.set_result((value, zxid, error, events))
                case cs.Notice(calls, kind, path, event, zxid):
                    cbs = [self.watch_cbs.pop(c) for c in calls if c in self.watch_cbs]
                    self.on_event(cbs, WatchedEvent(event, path, kind, zxid))
                case cs.Dial(conn, replica):
                    self.loop.create_task(self._dial(conn, replica))
                case cs.Hangup(conn):
                    p = self.protos.pop(conn, None)
                    if p is not None:
                        p.abort()
                case cs.Connected():
                    if not self.first.done():
                        self.first.set_result(None)
                case cs.SessionOver(expired):
                    if expired:
                        self.on_event([], None)
                    if not self.first.done():
                        self.first.set_exception(SessionExpiredError("session expired") if expired
                                                 else ConnectionLossError("the session was closed"))
                    self.watch_cbs.clear()

    async def _dial(self, conn: int, replica: int) -> None:
        addr = self.addresses.get(replica)
        budget = max(0.5, min(3.0, self.core.timeout_ms / 3000))
        proto: _Proto | None = None
        if addr is not None:
            try:
                _, proto = await asyncio.wait_for(
                    self.loop.create_connection(lambda: _Proto(self, conn), addr[0], addr[1], ssl=self.ssl), budget)
            except (TimeoutError, OSError):
                proto = None
        if proto is None:
            self._maybe_refresh()
            self.feed(cs.ConnLost(conn))
            return
        if self.core.dialing != conn:  # given up on meanwhile
            proto.abort()
            return
        self.protos[conn] = proto
        proto.send(cp.handshake(self.ensemble))
        self.feed(cs.Dialed(conn))

    def _maybe_refresh(self) -> None:
        """A replica restarted by the controller listens on a new port: ask for the addresses
        again, at most once a second."""
        if self.refresh is None or self._refreshing or time.monotonic() - self._last_refresh < 1.0:
            return
        self._refreshing = True
        self._last_refresh = time.monotonic()
        refresh = self.refresh

        async def go() -> None:
            try:
                self.addresses.update(await self.loop.run_in_executor(None, refresh))
            except Exception as e:  # the controller may be busy restarting a replica
                log.debug("session: address refresh failed: %s", e)
            finally:
                self._refreshing = False

        self.loop.create_task(go())

    def stop(self, kill: bool) -> None:
        if kill:
            self.feed(cs.Kill())
        for p in list(self.protos.values()):
            p.abort()
        self.protos.clear()
        if self._ticker is not None:
            self._ticker.cancel()
        for fut, _ in self.calls.values():
            if not fut.done():
                fut.set_exception(ConnectionLossError("the session is closed"))
        self.calls.clear()


# -- the API ---------------------------------------------------------------------------------------


def _stat(v: list[int] | None) -> Stat | None:
    return None if v is None else Stat(*v)


def _same(v: Any, z: int) -> Any:
    return v


def _multi_result(v: Any, z: int) -> list[Any]:
    return [Stat(*x) if isinstance(x, list) else x for x in v]


def _multi_ops(ops: tuple[Any, ...]) -> zm.Multi:
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = tuple(ops[0])
    for o in ops:
        if not isinstance(o, (Create, Delete, SetData, Check)):
            raise ConfigError(f"multi takes Create/Delete/SetData/Check records, got {o!r:.60}")
        if isinstance(o, (Create, SetData)):
            _data(o.data)  # here, in the caller, not when the request is being sent
    return zm.Multi(tuple(ops))


class Session:
    """A ZooKeeper session on an ensemble started with ``service: zookeeper``.

    ``ens.session(timeout=10)``, or ``Ensemble.connect("name").session()`` from another process.
    """

    def __init__(self, ensemble: str, addresses: dict[int, tuple[str, int]], *, timeout: float = 10.0,
                 refresh: Callable[[], dict[int, tuple[str, int]]] | None = None,
                 connect_timeout: float = 30.0, replica: int | None = None, ssl: Any = None,
                 auth: Sequence[tuple[str, str | bytes]] = ()) -> None:
        """``auth``: (scheme, credential) pairs the session authenticates with on every replica
        it connects to, as ZooKeeper's ``addAuth`` (``("digest", "user:password")``; the
        superuser's credential when ``zk_super_digest`` names it)."""
        creds = tuple((str(s), c.encode() if isinstance(c, str) else bytes(c)) for s, c in auth)
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._lt = _loop_thread()
        self._events: queue.Queue[Any] = queue.Queue()
        self._dispatched = 0
        self._cond = threading.Condition()
        self._dispatcher = threading.Thread(target=self._dispatch, name="zabray-watches", daemon=True)
        self._dispatcher.start()
        self.listeners: list[Callable[[str], Any]] = []
        self.op_timeout = max(10.0, 2 * timeout)
        self.dispatch_timeout = self.op_timeout
        """How long a call waits for the watch callbacks due before its reply (then WatchDispatchError)."""

        def on_event(cbs: list[Callback], ev: WatchedEvent | None) -> None:
            self._events.put((cbs, ev))

        async def make() -> tuple[_Shell, asyncio.Future[None]]:
            shell = _Shell(ensemble, addresses, int(timeout * 1000), refresh, on_event, replica, ssl, creds)
            return shell, shell.start()

        self._shell, first = self._lt.run(make())

        async def wait_first() -> None:
            await first

        try:
            self._lt.run(asyncio.wait_for(wait_first(), connect_timeout))
        except (TimeoutError, cf.TimeoutError):
            self._shutdown(kill=True)
            raise ConnectionLossError(f"no replica of {ensemble!r} accepted a session in {connect_timeout} s") from None
        except BaseException:
            self._shutdown(kill=True)
            raise

    # -- introspection ---------------------------------------------------------------------------

    @property
    def session_id(self) -> int:
        return self._shell.core.session_id

    @property
    def timeout(self) -> float:
        """The negotiated timeout, seconds."""
        return self._shell.core.timeout_ms / 1000

    @property
    def last_zxid(self) -> int:
        return self._shell.core.last_zxid

    @property
    def connected_to(self) -> int | None:
        core = self._shell.core
        return core.connected_to if core.conn is not None else None

    @property
    def expired(self) -> bool:
        return self._shell.core.expired

    @property
    def moves(self) -> int:
        return self._shell.core.moves

    # -- plumbing --------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        while True:
            item = self._events.get()
            if item is None:
                return
            cbs, ev = item
            try:
                if ev is None:
                    for fn in list(self.listeners):
                        fn("expired")
                for cb in cbs:
                    cb(ev)
            except Exception:
                log.exception("watch callback failed")
            with self._cond:
                self._dispatched += 1
                self._cond.notify_all()

    def _dispatched_through(self, seen: int) -> bool:
        """Wait until every notification received before a reply was dispatched."""
        if threading.current_thread() is self._dispatcher:
            return True  # a callback calling us: the ones before it already ran
        with self._cond:
            return self._cond.wait_for(lambda: self._dispatched >= seen, timeout=self.dispatch_timeout)

    async def _acall(self, op: zm.ClientOp, watch: Callback | None) -> tuple[Any, int, int]:
        """Run ``op`` through the session; (value, zxid, notifications received before it)."""
        path = getattr(op, "path", None)
        if path is not None:  # as ZooKeeper's client does, before anything is sent
            validate_path(path, sequential=bool(getattr(op, "sequential", False)))
        fut: cf.Future[Any] = cf.Future()
        self._lt.loop.call_soon_threadsafe(self._shell.call, op, watch, fut)
        try:
            # The core completes every call: with its reply, CONNECTION_LOSS once the replica
            # falls silent for two thirds of the timeout, NOT_READY if never sent within
            # ``op_timeout``, or the session's end. A call pipelined behind many others may
            # rightly wait longer than ``op_timeout``; this bound is only a last resort.
            value, zxid, error, events = await asyncio.wait_for(asyncio.wrap_future(fut), 6 * self.op_timeout)
        except TimeoutError:
            raise ConnectionLossError(f"no answer within {6 * self.op_timeout} s") from None
        if error is not None:
            raise _error(error)
        return value, zxid, events

    def _run(self, op: zm.ClientOp, convert: Callable[[Any, int], T], watch: Callback | None = None) -> T:
        value, zxid, seen = self._lt.run(self._acall(op, watch))
        if not self._dispatched_through(seen):
            raise WatchDispatchError(f"a watch callback has not returned within {self.dispatch_timeout} s")
        return convert(value, zxid)

    async def _arun(self, op: zm.ClientOp, convert: Callable[[Any, int], T], watch: Callback | None = None) -> T:
        value, zxid, seen = await self._acall(op, watch)
        if self._dispatched < seen and not await asyncio.get_running_loop().run_in_executor(
                None, self._dispatched_through, seen):
            raise WatchDispatchError(f"a watch callback has not returned within {self.dispatch_timeout} s")
        return convert(value, zxid)

    # -- the API: each op in a sync form and an async twin over the same call ----------------------

    def create(self, path: str, data: bytes | None = b"", ephemeral: bool = False, sequential: bool = False) -> str:
        """Create ``path``; returns the created path (with the sequence suffix if sequential)."""
        return self._run(Create(path, _data(data), bool(ephemeral), bool(sequential)), _same)

    async def create_async(self, path: str, data: bytes | None = b"", ephemeral: bool = False,
                           sequential: bool = False) -> str:
        return await self._arun(Create(path, _data(data), bool(ephemeral), bool(sequential)), _same)

    def get(self, path: str, watch: Callback | None = None) -> tuple[bytes | None, Stat]:
        """Data and Stat; data is None for a znode given ZooKeeper's null (by a Java client)."""
        return self._run(zm.GetData(path, watch is not None), lambda v, z: (v[0], Stat(*v[1])), watch)

    async def get_async(self, path: str, watch: Callback | None = None) -> tuple[bytes | None, Stat]:
        return await self._arun(zm.GetData(path, watch is not None), lambda v, z: (v[0], Stat(*v[1])), watch)

    def exists(self, path: str, watch: Callback | None = None) -> Stat | None:
        return self._run(zm.Exists(path, watch is not None), lambda v, z: _stat(v), watch)

    async def exists_async(self, path: str, watch: Callback | None = None) -> Stat | None:
        return await self._arun(zm.Exists(path, watch is not None), lambda v, z: _stat(v), watch)

    def children(self, path: str, watch: Callback | None = None) -> list[str]:
        return self._run(zm.GetChildren(path, watch is not None), lambda v, z: list(v[0]), watch)

    async def children_async(self, path: str, watch: Callback | None = None) -> list[str]:
        return await self._arun(zm.GetChildren(path, watch is not None), lambda v, z: list(v[0]), watch)

    def set(self, path: str, data: bytes | None, version: int = -1) -> Stat:
        return self._run(SetData(path, _data(data), int(version)), lambda v, z: Stat(*v))

    async def set_async(self, path: str, data: bytes | None, version: int = -1) -> Stat:
        return await self._arun(SetData(path, _data(data), int(version)), lambda v, z: Stat(*v))

    def delete(self, path: str, version: int = -1) -> None:
        self._run(Delete(path, int(version)), _same)

    async def delete_async(self, path: str, version: int = -1) -> None:
        await self._arun(Delete(path, int(version)), _same)

    def sync(self, path: str = "/") -> int:
        """Catch the connected replica up with the leader; returns the sync's zxid."""
        return self._run(zm.Sync(path), lambda v, z: z)

    async def sync_async(self, path: str = "/") -> int:
        return await self._arun(zm.Sync(path), lambda v, z: z)

    def multi(self, *ops: Create | Delete | SetData | Check) -> list[Any]:
        """Apply ``ops`` (``zabray.tree`` Create/Delete/SetData/Check records) atomically; one
        result per op (created path, Stat, None). A failure raises with ``.index`` set."""
        return self._run(_multi_ops(ops), _multi_result)

    async def multi_async(self, *ops: Create | Delete | SetData | Check) -> list[Any]:
        return await self._arun(_multi_ops(ops), _multi_result)

    def reconfig(self, joining: str | None = None, leaving: str | None = None, members: str | None = None,
                 from_config: int = -1) -> tuple[bytes, Stat]:
        """ZooKeeper's reconfig (kazoo's ``reconfig``): add ``joining`` server specs
        (``server.N=host:quorum:election[:role];clientport``, comma-separated) and remove
        ``leaving`` sids, or replace everyone with ``members``; only if the configuration's
        version is ``from_config`` (-1: any). Returns /zookeeper/config's new data and Stat; a
        refusal raises its typed error (NoAuthError without the superuser's credential or WRITE
        on /zookeeper/config; BadVersionError, BadArgumentsError, ...)."""
        op = zm.Reconfig(joining, leaving, members, int(from_config))
        return self._run(op, lambda v, z: (v[0], Stat(*v[1])))

    async def reconfig_async(self, joining: str | None = None, leaving: str | None = None,
                             members: str | None = None, from_config: int = -1) -> tuple[bytes, Stat]:
        op = zm.Reconfig(joining, leaving, members, int(from_config))
        return await self._arun(op, lambda v, z: (v[0], Stat(*v[1])))

    def request(self, op: Create | Delete | SetData | Check | tuple[Create | Delete | SetData | Check, ...]
                ) -> tuple[Any, int]:
        """Run one write (a Create, Delete, SetData or Check record, or a tuple of them as a
        multi); returns (what create, delete, set, check or multi would return, the zxid of its
        txn). The other calls drop that zxid; a history recorder needs it for every change
        (``zabray.client.histories``), creates and deletes included."""
        if isinstance(op, tuple):
            return self._run(_multi_ops(op), lambda v, z: (_multi_result(v, z), z))
        if not isinstance(op, (Create, Delete, SetData, Check)):
            raise ConfigError(f"request takes a Create/Delete/SetData/Check record or a tuple of them, got {op!r:.60}")
        if isinstance(op, (Create, SetData)):
            _data(op.data)
        return self._run(op, lambda v, z: (Stat(*v) if isinstance(op, SetData) else v, z))

    def close(self) -> None:
        """End the session: its ephemerals are deleted, its watches dropped."""
        if not self._shell.core.over:
            try:
                self._run(zm.CloseSession(), _same)
            except (SessionExpiredError, ConnectionLossError, NotReadyError):
                pass
        self._shutdown(kill=False)

    async def close_async(self) -> None:
        if not self._shell.core.over:
            try:
                await self._arun(zm.CloseSession(), _same)
            except (SessionExpiredError, ConnectionLossError, NotReadyError):
                pass
        self._shutdown(kill=False)

    def _kill(self) -> None:
        """Tests: vanish like a crashed client (no close); the leader expires the session later."""
        self._shutdown(kill=True)

    def _shutdown(self, kill: bool) -> None:
        shell = getattr(self, "_shell", None)
        if shell is not None:
            self._lt.loop.call_soon_threadsafe(shell.stop, kill)
        self._events.put(None)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


