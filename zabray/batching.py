"""Frames written once per event-loop turn: the batching every zabray client-facing connection
shares (the replica's client port, the broadcast client, the ZooKeeper session).

Frames queued while a loop turn runs leave in one ``transport.write`` when it ends, in the order
they were queued: one syscall per turn rather than per reply, and no reordering on a connection.
"""

from __future__ import annotations

import asyncio

from zabray.framing import FrameEncoder


class BatchingProtocol(asyncio.Protocol):
    """An ``asyncio.Protocol`` with ``send_payload``: frame now, write at the end of the turn.
    Frames sent while ``transport`` is None (not yet connected, or lost) are dropped."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.encoder = FrameEncoder()
        self._flush_pending = False

    def send_payload(self, payload: bytes) -> None:
        if self.transport is None:
            return
        self.encoder.add_payload(payload)
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Write what is queued now (called at the end of the turn; callable earlier)."""
        self._flush_pending = False
        if self.transport is not None and len(self.encoder):
            self.transport.write(bytes(self.encoder.take()))
