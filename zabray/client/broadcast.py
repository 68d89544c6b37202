"""Clients of an ensemble over TCP: the data path never goes through Ray.

``ReplicaConnection`` is one pipelined connection to one replica's client port.
``EnsembleClient`` knows every replica's address, keeps a connection to each, sends writes to
the leader when it knows it (any replica forwards otherwise), and retries a write that was
refused before it left the replica. A write whose replica lost the leader after forwarding it
has an unknown fate and raises ``UncertainOutcomeError``: retrying could apply it twice.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import os
import ssl as ssl_
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from zabray.errors import (
    AuthenticationError,
    CodecError,
    ConfigError,
    NoQuorumError,
    NotRunningError,
    UncertainOutcomeError,
    ZabError,
)
from zabray.net.batching import BatchingProtocol
from zabray.protocol.zxid import Zxid
from zabray.wire import clientproto as cp
from zabray.wire.auth import CLIENT, AuthFailed, Connector, Secret
from zabray.wire.framing import DEFAULT_MAX_FRAME, FrameDecoder, frame

T = TypeVar("T")


SWEEP_S = 0.05  # how often a connection fails its requests past their deadline


class ReplicaConnection(BatchingProtocol):
    def __init__(self, sid: int) -> None:
        super().__init__()
        self.sid = sid
        self.decoder = FrameDecoder()
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        # (deadline, rid) of requests with a timeout, swept by one timer per connection rather
        # than a timer per request (asyncio.wait_for's cost dominated a loaded client).
        self._deadlines: list[tuple[float, int]] = []
        self._sweep_at: asyncio.TimerHandle | None = None
        self.rids = itertools.count(1)
        self.closed = asyncio.get_running_loop().create_future()
        self.auth: Connector | None = None  # the membership proof in progress (zabray.wire.auth)
        self.authed: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, sid: int, host: str, port: int, ensemble: str, timeout: float = 5.0, *,
                   secret: Secret | None = None, ssl: ssl_.SSLContext | None = None) -> ReplicaConnection:
        """Connect and say hello; with ``secret``, return only once the replica has proved it
        holds it (``AuthenticationError`` otherwise) and we have sent our proof."""
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(lambda: cls(sid), host, port, ssl=ssl), timeout)
        except (TimeoutError, OSError, ssl_.SSLError) as e:
            raise NotRunningError(f"replica {sid} at {host}:{port} is not reachable: {e}") from None
        assert conn.transport is not None
        hello = cp.handshake(ensemble)
        if secret is None:
            conn.transport.write(frame(hello))
            return conn
        conn.auth = Connector(secret, CLIENT + hello, os.urandom(32))
        conn.authed = loop.create_future()
        conn.transport.write(frame(hello) + frame(conn.auth.hello()))
        try:
            await asyncio.wait_for(asyncio.shield(conn.authed), timeout)
        except (TimeoutError, ConnectionError) as e:
            conn.close()
            raise NotRunningError(f"replica {sid} at {host}:{port} did not complete authentication: {e}") from None
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            for payload in self.decoder.feed(data):
                if self.auth is not None:
                    self._challenged(payload)
                    continue
                rep = cp.decode_reply(payload)
                if isinstance(rep, cp.ZkEvent):  # watch events go to ZooKeeper sessions only
                    continue
                fut = self.waiting.pop(rep.rid, None)
                if fut is not None and not fut.done():
                    fut.set_result(rep)
        except AuthFailed as e:
            err = AuthenticationError(f"replica {self.sid} did not prove it holds the ensemble secret "
                                      f"(a wrong secret_file, or not a member at its address): {e}")
            if self.authed is not None and not self.authed.done():
                self.authed.set_exception(err)
            self._fail(str(err))
        except CodecError as e:
            self._fail(f"bad reply from replica {self.sid}: {e}")

    def _challenged(self, payload: bytes) -> None:
        """The replica's CHALLENGE: it holds the secret, so send our proof; requests may follow."""
        assert self.auth is not None and self.transport is not None
        proof = self.auth.proof(payload)
        self.auth = None
        self.transport.write(frame(proof))
        if self.authed is not None and not self.authed.done():
            self.authed.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(f"connection to replica {self.sid} lost")

    def _fail(self, why: str) -> None:
        if self._sweep_at is not None:
            self._sweep_at.cancel()
            self._sweep_at = None
        self._deadlines.clear()
        if self.transport is not None:
            self.transport.abort()
            self.transport = None
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError(why))
        self.waiting.clear()
        if self.authed is not None and not self.authed.done():
            self.authed.set_exception(ConnectionError(why))
            self.authed.exception()  # retrieved: nobody may be waiting any more
        if not self.closed.done():
            self.closed.set_result(None)

    @property
    def alive(self) -> bool:
        return self.transport is not None

    def request(self, make: Any, deadline: float | None = None) -> asyncio.Future[Any]:
        """Send ``make(rid)``; the future gets the reply, ``ConnectionError`` if the connection
        dies first, or ``asyncio.TimeoutError`` once ``deadline`` (loop time) passes — within
        ``SWEEP_S`` of it."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        if self.transport is None:
            fut.set_exception(ConnectionError(f"connection to replica {self.sid} is closed"))
            return fut
        rid = next(self.rids)
        self.send_payload(cp.encode(make(rid)))  # a request too large raises here, before it waits
        self.waiting[rid] = fut  # (a reply can only come on a later loop turn)
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, rid))
            if self._sweep_at is None:
                self._sweep_at = loop.call_later(SWEEP_S, self._sweep)
        return fut

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        now, dl, waiting = loop.time(), self._deadlines, self.waiting
        while dl and dl[0][0] <= now:
            fut = waiting.pop(heapq.heappop(dl)[1], None)
            if fut is not None and not fut.done():
                fut.set_exception(TimeoutError())
        self._sweep_at = loop.call_later(SWEEP_S, self._sweep) if dl else None

    async def status(self) -> cp.StatusRep:
        rep: cp.StatusRep = await self.request(lambda rid: cp.StatusReq(rid))
        return rep

    def close(self) -> None:
        self._fail("closed")


def as_value(value: object, what: str = "submit") -> bytes:
    """A write's value as bytes (bytes-like values are copied); ``ConfigError`` for anything
    else, since a str has no one encoding."""
    if type(value) is bytes:
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise ConfigError(f"{what} takes bytes, got {type(value).__name__}")


class EnsembleClient:
    """Async client of a whole ensemble. Use ``submit`` from a coroutine, on one event loop."""

    def __init__(self, ensemble: str, addresses: dict[int, tuple[str, int]],
                 refresh: Callable[[], dict[int, tuple[str, int]]] | None = None, *,
                 secret: Secret | None = None, ssl: ssl_.SSLContext | None = None) -> None:
        self.ensemble = ensemble
        self.secret = secret
        self.ssl = ssl
        self.auth_error: AuthenticationError | None = None  # the last replica that failed to prove itself
        self.addresses = dict(addresses)
        self.conns: dict[int, ReplicaConnection] = {}
        self.leader: int | None = None
        self._lock: asyncio.Lock | None = None
        self._queued = 0  # submits waiting for, or holding, the lock
        self._refresh = refresh  # where replicas listen now (a restarted one moves); blocking
        self._refreshed_at = 0.0

    async def _maybe_refresh(self) -> None:
        """No leader found: replicas may have restarted on new ports. Ask, at most twice a second."""
        if self._refresh is None or time.monotonic() - self._refreshed_at < 0.5:
            return
        self._refreshed_at = time.monotonic()
        try:
            addrs = await asyncio.get_running_loop().run_in_executor(None, self._refresh)
        except Exception:  # the control plane is busy or down; keep what we have
            return
        self.update_addresses(addrs)

    def update_addresses(self, addresses: dict[int, tuple[str, int]]) -> None:
        for sid, addr in addresses.items():
            if self.addresses.get(sid) != tuple(addr):
                old = self.conns.pop(sid, None)
                if old is not None:
                    old.close()
            self.addresses[sid] = tuple(addr)  # type: ignore[assignment]

    async def _conn(self, sid: int) -> ReplicaConnection:
        c = self.conns.get(sid)
        if c is not None and c.alive:
            return c
        host, port = self.addresses[sid]
        try:
            c = await ReplicaConnection.open(sid, host, port, self.ensemble, secret=self.secret, ssl=self.ssl)
        except AuthenticationError as e:
            self.auth_error = e
            raise
        self.conns[sid] = c
        return c

    async def find_leader(self, timeout: float = 2.0) -> int | None:
        async def ask(sid: int) -> cp.StatusRep | None:
            try:
                c = await self._conn(sid)
                return await asyncio.wait_for(c.status(), timeout)
            except (TimeoutError, ZabError, ConnectionError):
                return None

        answers = await asyncio.gather(*(ask(s) for s in sorted(self.addresses)))
        best: tuple[int, int] | None = None
        for st in answers:
            if st is not None and st.state == "LEADING" and st.established:
                key = (st.epoch, st.sid)
                best = max(best, key) if best else key
        self.leader = best[1] if best else None
        return self.leader

    async def _target(self, deadline: float) -> ReplicaConnection:
        """A connection to the leader (or a replica that will forward), found under the lock."""
        last_error = "no replica answered"
        while True:
            target = self.leader
            if target is None:
                target = await self.find_leader()
            if target is not None:
                try:
                    return await self._conn(target)
                except NotRunningError as e:
                    last_error = str(e)
                    self.leader = None
            else:
                last_error = "no established leader"
                if self.auth_error is not None:
                    last_error += f"; {self.auth_error}"
                await self._maybe_refresh()
            if time.monotonic() >= deadline:
                raise NoQuorumError(f"could not submit: {last_error}")
            await asyncio.sleep(0.02)

    async def _aimed(self, sid: int, deadline: float) -> ReplicaConnection:
        """A connection to replica ``sid`` for a write aimed at it: no leader lookup; a replica
        that does not answer is tried again (its address refreshed) until ``deadline``."""
        if sid not in self.addresses:
            raise ConfigError(f"no replica {sid} in ensemble {self.ensemble!r} (replicas are {sorted(self.addresses)})")
        while True:
            try:
                return await self._conn(sid)
            except NotRunningError as e:
                if time.monotonic() >= deadline:
                    raise NotRunningError(f"could not submit to replica {sid}: {e}") from None
            await self._maybe_refresh()
            await asyncio.sleep(0.02)

    async def submit(self, value: bytes, timeout: float = 10.0, replica: int | None = None) -> Zxid:
        """Replicate ``value``; returns its zxid once committed (and delivered by the replica asked).

        Writes leave in the order ``submit`` was called (FIFO client order, as ZooKeeper
        promises): finding the target happens under a fair lock and the send itself never
        waits. A write refused before it left a replica is retried until ``timeout``.
        ``replica`` aims the write at that replica (a follower forwards it to its leader);
        a refusal is retried there, never on another replica.
        """
        value = as_value(value)  # anything else would fail in the encoder, taking the connection with it
        if len(value) >= DEFAULT_MAX_FRAME:  # its frame holds the value and a few bytes more
            raise CodecError(f"a value of {len(value):,} bytes is too large: a client frame holds at most "
                             f"{DEFAULT_MAX_FRAME:,} bytes, the value included")
        deadline = time.monotonic() + timeout
        loop_deadline = asyncio.get_running_loop().time() + timeout
        if self._lock is None:
            self._lock = asyncio.Lock()
        while True:
            leader = self.leader if replica is None else replica
            conn = self.conns.get(leader) if leader is not None else None
            if conn is not None and conn.alive and self._queued == 0:
                # Nobody is waiting to send: sending now keeps the order, without the lock.
                fut = conn.request(lambda rid: cp.SubmitReq(rid, value), loop_deadline)
            else:
                self._queued += 1
                try:
                    async with self._lock:
                        conn = await (self._target(deadline) if replica is None else self._aimed(replica, deadline))
                        fut = conn.request(lambda rid: cp.SubmitReq(rid, value), loop_deadline)
                finally:
                    self._queued -= 1
            try:
                rep = await fut
            except ConnectionError as e:
                # Sent, then the connection died: the write may have been proposed.
                self.leader = None
                raise UncertainOutcomeError(f"{e}; the write may or may not commit") from None
            except TimeoutError:
                if self.leader == conn.sid:
                    self.leader = None  # a frozen or cut-off leader: look again next time
                # Sent: its fate is unknown, which NoQuorumError (nothing was sent) would deny.
                raise UncertainOutcomeError(f"write not committed within {timeout} s (replica {conn.sid}); "
                                            "its fate is unknown") from None
            if isinstance(rep, cp.CommittedRep):
                return Zxid(rep.zxid)
            if rep.uncertain:
                self.leader = None
                raise UncertainOutcomeError(f"replica {conn.sid}: {rep.reason}; the write may or may not commit")
            if self.leader == conn.sid:
                self.leader = None
            if time.monotonic() >= deadline:
                raise NoQuorumError(f"could not submit within {timeout} s: replica {conn.sid}: {rep.reason}")
            await asyncio.sleep(0.02)

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        self.conns.clear()


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed (as Ray's async actors use it), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """A private asyncio loop in a daemon thread, so sync APIs work in scripts and notebooks."""

    def __init__(self) -> None:
        self.loop = new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="zabray-client", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        except Exception:  # the loop is already gone or stuck; stopping it is all that is left
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
