"""Frames written once per burst of work: the batching every zabray connection shares (the
replica's peer channels and client ports, the broadcast client, the ZooKeeper session).

Frames queued while an IO callback runs leave in one ``transport.write`` per connection when the
callback returns, in the order they were queued: one syscall per burst rather than per frame,
and no reordering on a connection. The shell that owns an ``Outbox`` calls ``flush`` at the end
of each callback that may queue frames (a socket's data, a finished fdatasync); anything queued
elsewhere (a timer, a control call) leaves at the next loop turn through one ``call_soon``.
Flushing when the callback returns, rather than at the next turn, matters for latency: by the
next turn the loop has polled its sockets again and may run other connections' reads first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from zabray.wire.framing import FrameEncoder


class Flushable(Protocol):
    def flush(self) -> None: ...


class Outbox:
    """The connections with frames queued since the last ``flush``; each is added once (the
    connection keeps its own "queued" flag and clears it in its ``flush``).

    ``before`` runs ahead of writing any frame: a replica hands its trace rows to the kernel
    there, so no frame is on the wire before the rows that record what it says (a replica killed
    right after a PROPOSAL left must not leave a trace in which nobody proposed it). ``then``
    runs after every flush: a replica starts its pending group commit there, once its frames
    are written."""

    __slots__ = ("_before", "_dirty", "_scheduled", "_then")

    def __init__(self, then: Callable[[], None] | None = None, before: Callable[[], None] | None = None) -> None:
        self._dirty: list[Flushable] = []
        self._scheduled = False
        self._then = then
        self._before = before

    def add(self, conn: Flushable) -> None:
        self._dirty.append(conn)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._turn)

    def write_now(self, conn: Flushable) -> None:
        """Write one connection's frames outside a flush (it was just connected, authenticated or
        resumed), after ``before`` as any frame."""
        if self._before is not None:
            self._before()
        conn.flush()

    def _turn(self) -> None:
        self._scheduled = False
        self.flush()

    def flush(self) -> None:
        """Write what every queued connection holds, now."""
        while self._dirty:
            if self._before is not None:
                self._before()
            dirty, self._dirty = self._dirty, []
            for conn in dirty:
                conn.flush()
        if self._then is not None:
            self._then()


class BatchingProtocol(asyncio.Protocol):
    """An ``asyncio.Protocol`` with ``send_payload``: frame now, write when the burst ends
    (``outbox``: a shared one whose owner flushes it, or by default at the end of the loop turn).
    Frames sent while ``transport`` is None (not yet connected, or lost) are dropped."""

    def __init__(self, outbox: Outbox | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.encoder = FrameEncoder()
        self.outbox = outbox
        self._flush_pending = False

    def send_payload(self, payload: bytes) -> None:
        if self.transport is None:
            return
        self.encoder.add_payload(payload)
        if not self._flush_pending:
            self._flush_pending = True
            if self.outbox is not None:
                self.outbox.add(self)
            else:
                asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Write what is queued now (called when the burst ends; callable earlier)."""
        self._flush_pending = False
        if self.transport is not None and len(self.encoder):
            self.transport.write(bytes(self.encoder.take()))
