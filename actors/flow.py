"""Holding back a client that sends faster than it reads, as ZooKeeper does.

A client may pipeline requests and never read the replies. Taken as they arrive, each reply
waits in the replica until the client reads it: a few thousand reads of a large znode kept
gigabytes there, until the process was killed. So a client port reads a connection's requests
into ``Held`` and hands them on in order only while the client keeps up: while fewer than
``OUT_HIGH`` bytes of its replies wait in the replica (the transport's high-water mark, and
what one burst may add before the transport has it) and while the port's own limit allows
(the ZooKeeper port's ``zk_max_outstanding``). Otherwise the socket is not read until
replies drain. A held client's session is not touched meanwhile, so one that stops reading
for its whole session timeout loses its session, as on ZooKeeper.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

R = TypeVar("R")

OUT_HIGH = 4 << 20
"""Bytes of replies waiting for one client beyond which no more of its requests are taken."""


class Held(Generic[R]):
    """A connection's requests read but not handed on yet, and its socket's reading switch.

    ``take`` hands one request on; ``blocked`` says whether the port's own limits say wait;
    ``after`` runs after a drain that no IO callback ends (the replica's outbox flush)."""

    __slots__ = ("_after", "_blocked", "_counter", "_reading", "_scheduled", "_stats", "_take", "paused_writing",
                 "queue", "transport")

    def __init__(self, take: Callable[[R], None], blocked: Callable[[], bool], after: Callable[[], None],
                 stats: dict[str, int], counter: str) -> None:
        self.queue: deque[R] = deque()
        self.transport: asyncio.Transport | None = None
        self.paused_writing = False  # the transport's buffer passed OUT_HIGH; it says when it drains
        self._take = take
        self._blocked = blocked
        self._after = after
        self._stats = stats
        self._counter = counter
        self._reading = True
        self._scheduled = False

    @property
    def reading(self) -> bool:
        """False while the connection is held back (``stat``/``cons`` show it as interest 0)."""
        return self._reading

    def attach(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=OUT_HIGH)

    def detach(self) -> None:
        self.transport = None
        self.queue.clear()

    def extend(self, requests: Iterable[R]) -> None:
        self.queue.extend(requests)
        self.drain()

    def drain(self) -> None:
        """Hand requests on, in order, while the client keeps up; stop reading its socket while
        any wait, read again once none do."""
        q = self.queue
        while q and self.transport is not None:
            if self.paused_writing or self._blocked():
                if self._reading:
                    self._stats[self._counter] += 1
                self._set_reading(False)
                return
            self._take(q.popleft())
        if not self.paused_writing:
            self._set_reading(True)

    def soon(self) -> None:
        """Replies left or requests were answered: drain again once the current step is over."""
        if self.queue and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._later)

    def _later(self) -> None:
        self._scheduled = False
        self.drain()
        self._after()

    def pause_writing(self) -> None:
        self.paused_writing = True
        self._set_reading(False)

    def resume_writing(self) -> None:
        self.paused_writing = False
        self.drain()
        self._after()

    def _set_reading(self, on: bool) -> None:
        t = self.transport
        if on == self._reading or t is None or t.is_closing():
            return
        self._reading = on
        if on:
            t.resume_reading()
        else:
            t.pause_reading()


__all__ = ["Held", "OUT_HIGH"]
