"""A simulated replica: the real core, its ``MemoryStore``, and its own work still to do.

The disk work is split as a real replica's is not, so that a crash can fall between any two
parts: persists emitted but not written, written but not fsynced, fsynced but not yet told to
the core.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from zabray.protocol.actions import DecodeSnapshot, EncodeSnapshot, Persist
from zabray.protocol.node import Node
from zabray.sim.memstore import MemoryStore

LOCAL_WORK = ("write", "fsync", "tell", "encode", "decode", "resume")
"""A replica's own work, as a step lists it: its disk (write, fsync, hearing it is durable), a
slice of a snapshot being encoded or decoded, a yielded core's next turn. Every scheduler draws
from this one list, so none can leave a kind of work to the fair rounds alone."""


class SimReplica:
    def __init__(self, sid: int, factory: Callable[[int], Any] | None = None) -> None:
        self.sid = sid
        self.factory = factory
        self.store: Any = factory(sid) if factory else MemoryStore()
        self.dirty = False  # appended or truncated since the last fsync
        self.node: Node | None = None
        self.incarnation = -1
        self.pending: deque[Persist] = deque()  # emitted, not yet written
        self.written = 0  # highest token written to the store
        self.synced = 0  # highest token durable
        self.told = 0  # highest token reported to the core
        self.encoding: EncodeSnapshot | None = None  # a snapshot image being encoded, in slices
        self.decoding: DecodeSnapshot | None = None  # a SNAP being decoded, in slices
        self.resume = False  # the core yielded: step it with Resumed
        self.last_event = "start"
        # As a real replica's shell numbers its requests: from the same first id in every
        # incarnation, so a txn an earlier one forwarded may carry an id a later one reuses.
        self.core_rids: dict[int, int] = {}  # the core's request id -> the simulation's
        self.next_core_rid = 0

    def ready(self, kind: str) -> bool:
        """Whether this replica has work of ``kind`` (one of ``LOCAL_WORK``) to do."""
        match kind:
            case "write":
                return bool(self.pending)
            case "fsync":
                return self.written > self.synced
            case "tell":
                return self.synced > self.told
            case "encode":
                return self.encoding is not None
            case "decode":
                return self.decoding is not None
            case "resume":
                return self.resume
            case _:
                raise ValueError(f"no such work: {kind!r}")
