"""ZooKeeper sessions: the public ``Session`` API over TCP to one replica at a time.

``Session`` (sync methods, each with an ``_async`` twin) runs a ``SessionCore`` on a private
asyncio loop thread. The core holds one TCP connection to one replica (``zabray.zk``
serves it): it pipelines requests in issue order, pings after a third of the timeout idle,
moves to another replica after two thirds of it without hearing back, re-registers its watches
there with its last seen zxid, and is refused by a replica whose tree is behind that zxid.
``actors.session.SessionActor`` (``Ensemble.session_actor()``) owns a ``Session`` in its own
Ray actor, for a client that should live, and die, apart from the driver.

Watch callbacks run, in the order the replica sent them, on the session's own dispatch thread.
A sync call returns only after every notification received before its reply was dispatched,
so no read of this session shows a change before its watch callback ran.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import logging
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zabray import clientproto as cp
from zabray.errors import CodecError, ConfigError
from zabray.framing import FrameDecoder, FrameEncoder
from zabray.tree import (
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
)

log = logging.getLogger(__name__)

__all__ = ["Session", "ConnectionLossError", "WatchedEvent", "Create", "Delete", "SetData", "Check", "Stat", "NoNodeError", "NodeExistsError",
           "BadVersionError", "NotEmptyError", "SessionExpiredError", "ZooKeeperError"]


class ConnectionLossError(ZooKeeperError):
    """The connection to the replica broke (or the replica lost its leader) with this request in
    flight: it may or may not have been applied. The session itself goes on (on another replica)."""

    code = "CONNECTION_LOSS"

    def __reduce__(self) -> tuple[object, ...]:
        return (ConnectionLossError, (self.message,))


@dataclass(frozen=True)
class WatchedEvent:
    """A fired watch: ``type`` is "created", "deleted", "changed" or "child"; ``kind`` is the
    watch that fired ("data" for get/exists watches, "child" for children watches)."""

    type: str
    path: str
    kind: str
    zxid: int


def _error(e: list[Any]) -> ZooKeeperError:
    code, message, path, index = e
    if code in ("CONNECTION_LOSS", "NOT_READY", "BEHIND"):
        return ConnectionLossError(message, path=path, index=index)
    return error_for_code(code, message, path=path, index=index)


class _Proto(asyncio.Protocol):
    def __init__(self, core: SessionCore, sid: int) -> None:
        self.core = core
        self.sid = sid
        self.decoder = FrameDecoder()
        self.encoder = FrameEncoder()
        self.transport: asyncio.Transport | None = None
        self.lost = asyncio.get_running_loop().create_future()
        self._flush_pending = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            for payload in self.decoder.feed(data):
                self.core._on_frame(self, cp.decode_reply(payload))
        except CodecError as e:
            log.warning("session: bad frame from replica %d: %s", self.sid, e)
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if not self.lost.done():
            self.lost.set_result(None)
        self.core._on_lost(self)

    def send_raw(self, payload: bytes) -> None:
        if self.transport is None:
            return
        self.encoder.add_payload(payload)
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if self.transport is not None and len(self.encoder):
            self.transport.write(bytes(self.encoder.take()))

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class SessionCore:
    """The session's protocol engine; every method runs on its asyncio loop (see module doc)."""

    def __init__(self, ensemble: str, addresses: dict[int, tuple[str, int]], timeout_ms: int,
                 refresh: Callable[[], dict[int, tuple[str, int]]] | None = None,
                 on_event: Callable[[list[Callable[[WatchedEvent], Any]], WatchedEvent | None], None] | None = None,
                 ) -> None:
        self.ensemble = ensemble
        self.addresses = dict(addresses)
        self.refresh = refresh
        self.on_event = on_event or (lambda cbs, ev: None)
        self.timeout_ms = timeout_ms
        self.session_id = 0
        self.last_zxid = 0
        self.conn: _Proto | None = None
        self.connected_to: int | None = None
        self.inflight: dict[int, tuple[str, list[Any], cf.Future[Any], Any]] = {}
        self.outbox: deque[tuple[int, str, list[Any], cf.Future[Any], Any]] = deque()
        self.next_rid = 1
        self.watchers: dict[tuple[str, str], tuple[str, list[Callable[[WatchedEvent], Any]]]] = {}
        self.events_received = 0
        self.expired = False
        self.closed = False
        self.last_heard = 0.0
        self.last_sent = 0.0
        self.moves = 0
        self.prefer: int | None = None
        self.first_connect: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        self.first_connect = loop.create_future()
        self._task = loop.create_task(self._run())
        return self.first_connect

    async def _run(self) -> None:
        try:
            while not self.closed and not self.expired:
                conn = await self._connect_somewhere()
                if conn is None:
                    continue
                await self._serve(conn)
        except asyncio.CancelledError:
            pass
        except Exception:  # never leave callers hanging on a dead engine
            log.exception("session 0x%x: engine failed", self.session_id)
            self._fail_all(ConnectionLossError("session engine failed"))

    def kill(self) -> None:
        """Stop dead, like a crashed client: no close_session, the connection just drops."""
        self.closed = True
        if self._task is not None:
            self._task.cancel()
        if self.conn is not None:
            self.conn.abort()
        self._fail_all(ConnectionLossError("session killed"))

    def _expire(self) -> None:
        if self.expired:
            return
        self.expired = True
        if self.conn is not None:
            self.conn.abort()
        self._fail_all(SessionExpiredError(f"session 0x{self.session_id:x} has expired"))
        self.events_received += 1
        self.on_event([], None)
        if self.first_connect is not None and not self.first_connect.done():
            self.first_connect.set_exception(SessionExpiredError("session expired"))

    def _fail_all(self, exc: BaseException) -> None:
        for _, _, fut, _ in list(self.inflight.values()):
            if not fut.done():
                fut.set_exception(exc)
        self.inflight.clear()
        while self.outbox:
            fut = self.outbox.popleft()[3]
            if not fut.done():
                fut.set_exception(exc)

    # -- connecting ------------------------------------------------------------------------------

    async def _connect_somewhere(self) -> _Proto | None:
        sids = sorted(self.addresses)
        random.shuffle(sids)
        if self.connected_to in sids and len(sids) > 1:  # move away from the replica we lost
            sids.remove(self.connected_to)
            sids.append(self.connected_to)
        if self.prefer in sids:
            sids.remove(self.prefer)
            sids.insert(0, self.prefer)
            self.prefer = None
        for sid in sids:
            if self.closed or self.expired:
                return None
            conn = await self._try(sid)
            if conn is not None:
                return conn
        if self.refresh is not None:
            try:
                self.addresses = dict(await asyncio.get_running_loop().run_in_executor(None, self.refresh))
            except Exception as e:  # the controller may be busy restarting a replica
                log.debug("session: address refresh failed: %s", e)
        await asyncio.sleep(0.05 + random.random() * 0.1)
        return None

    async def _try(self, sid: int) -> _Proto | None:
        loop = asyncio.get_running_loop()
        host, port = self.addresses[sid]
        budget = max(0.5, min(3.0, self.timeout_ms / 3000))
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(lambda: _Proto(self, sid), host, port), budget)
        except (OSError, asyncio.TimeoutError):
            return None
        conn.send_raw(cp.handshake(self.ensemble))
        watches: dict[str, list[str]] = {"data": [], "exist": [], "child": []}
        for (_table, path), (kind, _) in self.watchers.items():
            watches[kind].append(path)
        fut: cf.Future[Any] = cf.Future()
        rid = self.next_rid
        self.next_rid += 1
        self.inflight[rid] = ("connect", [], fut, conn)
        conn.send_raw(cp.encode(cp.ZkReq(rid, "connect", [self.session_id, self.timeout_ms, self.last_zxid, watches])))
        try:
            value, _, _ = await asyncio.wait_for(asyncio.wrap_future(fut), budget)
        except SessionExpiredError:
            conn.abort()
            self._expire()
            return None
        except (ZooKeeperError, asyncio.TimeoutError) as e:
            log.debug("session: replica %d refused: %s", sid, e)
            self.inflight.pop(rid, None)
            conn.abort()
            return None
        if conn.transport is None:
            return None
        if self.session_id and self.connected_to is not None:
            self.moves += 1
        self.session_id, self.timeout_ms = int(value[0]), int(value[1])
        self.conn, self.connected_to = conn, sid
        self.last_heard = self.last_sent = time.monotonic()
        while self.outbox:
            r, op, args, f, extra = self.outbox.popleft()
            self._send(r, op, args, f, extra)
        if self.first_connect is not None and not self.first_connect.done():
            self.first_connect.set_result(None)
        return conn

    async def _serve(self, conn: _Proto) -> None:
        t = self.timeout_ms / 1000
        while not conn.lost.done() and not self.closed and not self.expired:
            try:
                await asyncio.wait_for(asyncio.shield(conn.lost), t / 10)
            except asyncio.TimeoutError:
                pass
            now = time.monotonic()
            if now - self.last_heard > 2 * t / 3:
                log.info("session 0x%x: nothing from replica %d for %.2f s, moving", self.session_id, conn.sid,
                         now - self.last_heard)
                conn.abort()
                break
            if now - self.last_sent > t / 3 or now - self.last_heard > t / 3:
                self.last_sent = now
                rid = self.next_rid
                self.next_rid += 1
                conn.send_raw(cp.encode(cp.ZkReq(rid, "ping", [])))
        if self.conn is conn:
            self.conn = None

    # -- requests --------------------------------------------------------------------------------

    def submit(self, op: str, args: list[Any], fut: cf.Future[Any], extra: Any = None) -> None:
        """Queue ``op`` in issue order; ``fut`` gets (value, zxid, events seen before the reply)."""
        if self.expired:
            fut.set_exception(SessionExpiredError(f"session 0x{self.session_id:x} has expired"))
            return
        if self.closed:
            fut.set_exception(ConnectionLossError("the session is closed"))
            return
        rid = self.next_rid
        self.next_rid += 1
        if self.conn is None or self.conn.transport is None or self.outbox:
            self.outbox.append((rid, op, args, fut, extra))
        else:
            self._send(rid, op, args, fut, extra)

    def _send(self, rid: int, op: str, args: list[Any], fut: cf.Future[Any], extra: Any) -> None:
        conn = self.conn
        assert conn is not None
        self.inflight[rid] = (op, args, fut, extra)
        self.last_sent = time.monotonic()
        conn.send_raw(cp.encode(cp.ZkReq(rid, op, args)))

    def _on_frame(self, conn: _Proto, msg: Any) -> None:
        if type(msg) is cp.ZkRep:
            self.last_heard = time.monotonic()
            if msg.zxid > self.last_zxid:
                self.last_zxid = msg.zxid
            entry = self.inflight.pop(msg.rid, None)
            if entry is None:
                return
            op, args, fut, extra = entry
            if fut.done():
                return
            if msg.error is not None:
                fut.set_exception(_error(msg.error))
                return
            if extra is not None and op in ("get", "exists", "children"):
                if op == "children":
                    self._register("child", args[0], "child", extra)
                elif op == "exists" and msg.value is None:
                    self._register("data", args[0], "exist", extra)
                else:
                    self._register("data", args[0], "data", extra)
            fut.set_result((msg.value, msg.zxid, self.events_received))
        elif type(msg) is cp.ZkEvent:
            self.last_heard = time.monotonic()
            if msg.kind == "watch":
                table, path, event, zxid = msg.args
                entry = self.watchers.pop((table, path), None)
                self.events_received += 1
                self.on_event(entry[1] if entry else [], WatchedEvent(event, path, table, zxid))
            elif msg.kind == "expired":
                self._expire()

    def _register(self, table: str, path: str, kind: str, cb: Callable[[WatchedEvent], Any]) -> None:
        old = self.watchers.get((table, path))
        cbs = old[1] if old else []
        cbs.append(cb)
        self.watchers[(table, path)] = (kind, cbs)

    def _on_lost(self, conn: _Proto) -> None:
        if self.conn is not conn:
            # A connect attempt that failed; its connect request is answered by the timeout.
            for rid, (op, _, fut, extra) in list(self.inflight.items()):
                if op == "connect" and extra is conn and not fut.done():
                    fut.set_exception(ConnectionLossError("connection refused"))
                    del self.inflight[rid]
            return
        self.conn = None
        exc = ConnectionLossError(f"connection to replica {conn.sid} lost")
        for _rid, (_op, _, fut, _) in list(self.inflight.items()):
            if not fut.done():
                fut.set_exception(exc)
        self.inflight.clear()


def _stat(v: list[int] | None) -> Stat | None:
    return None if v is None else Stat(*v)


def _op_wire(op: Any) -> list[Any]:
    if isinstance(op, Create):
        return ["create", [op.path, bytes(op.data), op.ephemeral, op.sequential]]
    if isinstance(op, Delete):
        return ["delete", [op.path, op.version]]
    if isinstance(op, SetData):
        return ["set", [op.path, bytes(op.data), op.version]]
    if isinstance(op, Check):
        return ["check", [op.path, op.version]]
    raise ConfigError(f"multi takes Create/Delete/SetData/Check records, got {op!r:.60}")


_MULTI_KIND = {Create: "create", Delete: "delete", SetData: "set", Check: "check"}


class Session:
    """A ZooKeeper session on an ensemble started with ``service: zookeeper``.

    ``ens.session(timeout=10)``, or ``Session.connect("name")`` from another process.
    """

    def __init__(self, ensemble: str, addresses: dict[int, tuple[str, int]], *, timeout: float = 10.0,
                 refresh: Callable[[], dict[int, tuple[str, int]]] | None = None,
                 connect_timeout: float = 30.0, replica: int | None = None) -> None:
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        from zabray.client import LoopThread

        self._lt = LoopThread()
        self._events: queue.Queue[Any] = queue.Queue()
        self._dispatched = 0
        self._cond = threading.Condition()
        self._dispatcher = threading.Thread(target=self._dispatch, name="zabray-watches", daemon=True)
        self._dispatcher.start()
        self.listeners: list[Callable[[str], Any]] = []

        def on_event(cbs: list[Callable[[WatchedEvent], Any]], ev: WatchedEvent | None) -> None:
            self._events.put((cbs, ev))

        async def make() -> tuple[SessionCore, asyncio.Future[None]]:
            core = SessionCore(ensemble, addresses, int(timeout * 1000), refresh, on_event)
            core.prefer = replica
            return core, core.start()

        self._core, first = self._lt.run(make())
        self.op_timeout = max(10.0, 2 * timeout)

        async def wait_first() -> None:
            await first

        try:
            self._lt.run(asyncio.wait_for(wait_first(), connect_timeout))
        except (asyncio.TimeoutError, cf.TimeoutError):
            self._shutdown()
            raise ConnectionLossError(f"no replica of {ensemble!r} accepted a session in {connect_timeout} s") from None
        except BaseException:
            self._shutdown()
            raise

    @classmethod
    def connect(cls, name: str = "default", *, timeout: float = 10.0, address: str | None = None) -> Session:
        from zabray.ensemble import Ensemble

        ens = Ensemble.connect(name, address=address)
        return ens.session(timeout=timeout)

    # -- introspection ---------------------------------------------------------------------------

    @property
    def session_id(self) -> int:
        return self._core.session_id

    @property
    def timeout(self) -> float:
        """The negotiated timeout, seconds."""
        return self._core.timeout_ms / 1000

    @property
    def last_zxid(self) -> int:
        return self._core.last_zxid

    @property
    def connected_to(self) -> int | None:
        return self._core.connected_to if self._core.conn is not None else None

    @property
    def expired(self) -> bool:
        return self._core.expired

    @property
    def moves(self) -> int:
        return self._core.moves

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

    def _submit(self, op: str, args: list[Any], extra: Any = None) -> cf.Future[Any]:
        fut: cf.Future[Any] = cf.Future()
        self._lt.loop.call_soon_threadsafe(self._core.submit, op, args, fut, extra)
        return fut

    def _wait_events(self, seen: int) -> None:
        if threading.current_thread() is self._dispatcher:
            return
        with self._cond:
            self._cond.wait_for(lambda: self._dispatched >= seen, timeout=30)

    def _result(self, fut: cf.Future[Any]) -> tuple[Any, int]:
        try:
            value, zxid, seen = fut.result(self.op_timeout)
        except cf.TimeoutError:
            raise ConnectionLossError(f"no answer within {self.op_timeout} s") from None
        self._wait_events(seen)
        return value, zxid

    async def _aresult(self, fut: cf.Future[Any]) -> tuple[Any, int]:
        try:
            value, zxid, seen = await asyncio.wait_for(asyncio.wrap_future(fut), self.op_timeout)
        except asyncio.TimeoutError:
            raise ConnectionLossError(f"no answer within {self.op_timeout} s") from None
        if self._dispatched < seen:
            await asyncio.get_running_loop().run_in_executor(None, self._wait_events, seen)
        return value, zxid

    # -- the API ---------------------------------------------------------------------------------
    # Each op has a ``_f`` builder (a future in issue order), a sync form and an async twin.

    def _create_f(self, path: str, data: bytes, ephemeral: bool, sequential: bool) -> cf.Future[Any]:
        return self._submit("create", [path, bytes(data), bool(ephemeral), bool(sequential)])

    def create(self, path: str, data: bytes = b"", ephemeral: bool = False, sequential: bool = False) -> str:
        """Create ``path``; returns the created path (with the sequence suffix if sequential)."""
        return self._result(self._create_f(path, data, ephemeral, sequential))[0]

    async def create_async(self, path: str, data: bytes = b"", ephemeral: bool = False,
                           sequential: bool = False) -> str:
        return (await self._aresult(self._create_f(path, data, ephemeral, sequential)))[0]

    def get(self, path: str, watch: Callable[[WatchedEvent], Any] | None = None) -> tuple[bytes, Stat]:
        v, _ = self._result(self._submit("get", [path, watch is not None], watch))
        return v[0], Stat(*v[1])

    async def get_async(self, path: str, watch: Callable[[WatchedEvent], Any] | None = None) -> tuple[bytes, Stat]:
        v, _ = await self._aresult(self._submit("get", [path, watch is not None], watch))
        return v[0], Stat(*v[1])

    def exists(self, path: str, watch: Callable[[WatchedEvent], Any] | None = None) -> Stat | None:
        return _stat(self._result(self._submit("exists", [path, watch is not None], watch))[0])

    async def exists_async(self, path: str, watch: Callable[[WatchedEvent], Any] | None = None) -> Stat | None:
        return _stat((await self._aresult(self._submit("exists", [path, watch is not None], watch)))[0])

    def children(self, path: str, watch: Callable[[WatchedEvent], Any] | None = None) -> list[str]:
        return self._result(self._submit("children", [path, watch is not None], watch))[0][0]

    async def children_async(self, path: str, watch: Callable[[WatchedEvent], Any] | None = None) -> list[str]:
        return (await self._aresult(self._submit("children", [path, watch is not None], watch)))[0][0]

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        return Stat(*self._result(self._submit("set", [path, bytes(data), int(version)]))[0])

    async def set_async(self, path: str, data: bytes, version: int = -1) -> Stat:
        return Stat(*(await self._aresult(self._submit("set", [path, bytes(data), int(version)])))[0])

    def delete(self, path: str, version: int = -1) -> None:
        self._result(self._submit("delete", [path, int(version)]))

    async def delete_async(self, path: str, version: int = -1) -> None:
        await self._aresult(self._submit("delete", [path, int(version)]))

    def sync(self, path: str = "/") -> int:
        """Catch the connected replica up with the leader; returns the sync's zxid."""
        return self._result(self._submit("sync", [path]))[1]

    async def sync_async(self, path: str = "/") -> int:
        return (await self._aresult(self._submit("sync", [path])))[1]

    def _multi_f(self, ops: tuple[Any, ...]) -> cf.Future[Any]:
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = tuple(ops[0])
        return self._submit("multi", [_op_wire(o) for o in ops])

    def multi(self, *ops: Create | Delete | SetData | Check) -> list[Any]:
        """Apply ``ops`` (``zabray.tree`` Create/Delete/SetData/Check records) atomically; one
        result per op (created path, Stat, None). A failure raises with ``.index`` set."""
        v, _ = self._result(self._multi_f(ops))
        return [Stat(*x) if isinstance(x, list) else x for x in v]

    async def multi_async(self, *ops: Create | Delete | SetData | Check) -> list[Any]:
        v, _ = await self._aresult(self._multi_f(ops))
        return [Stat(*x) if isinstance(x, list) else x for x in v]

    def close(self) -> None:
        """End the session: its ephemerals are deleted, its watches dropped."""
        core = self._core
        if not core.expired and not core.closed:
            try:
                self._result(self._submit("close", []))
            except (SessionExpiredError, ConnectionLossError):
                pass
        self._shutdown()

    async def close_async(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def _kill(self) -> None:
        """Tests: vanish like a crashed client (no close); the leader expires the session later."""
        self._lt.loop.call_soon_threadsafe(self._core.kill)
        self._shutdown()

    def _shutdown(self) -> None:
        core = getattr(self, "_core", None)
        if core is not None:
            def stop() -> None:
                core.closed = True
                if core._task is not None:
                    core._task.cancel()
                if core.conn is not None:
                    core.conn.abort()
            self._lt.loop.call_soon_threadsafe(stop)
        self._lt.stop()
        self._events.put(None)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
