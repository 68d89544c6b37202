"""An in-memory store with the disk's failure model, for the simulator.

Appends and truncations sit in a volatile list until ``sync``; ``crash`` throws that list away,
which is exactly what a power cut does to data written but not fsynced.
"""

from __future__ import annotations

from collections.abc import Sequence

from zabray.protocol.durable import DurableState
from zabray.protocol.messages import Txn
from zabray.protocol.statemachine import Encoded, joined
from zabray.protocol.zxid import ZERO, Zxid


class MemoryStore:
    def __init__(self) -> None:
        self.accepted_epoch = 0
        self.accepted_leader = -1
        self.current_epoch = 0
        self.snapshot_zxid: Zxid = ZERO
        self.snapshot: bytes | None = None
        self.log: list[Txn] = []
        self._volatile: list[tuple[str, object]] = []
        self.syncs = 0
        self.rejoining = False  # DiskStore.mark_rejoining: a wiped store, until currentEpoch > 0

    @property
    def dirty(self) -> bool:
        return bool(self._volatile)

    def recover(self) -> DurableState:
        return DurableState(
            self.accepted_epoch,
            self.accepted_leader,
            self.current_epoch,
            self.snapshot_zxid,
            self.snapshot,
            tuple(self.log),
            self.rejoining and self.current_epoch == 0,
        )

    def append(self, txns: Sequence[Txn]) -> None:
        self._volatile.append(("append", tuple(txns)))

    def truncate(self, zxid: Zxid) -> None:
        self._volatile.append(("truncate", zxid))

    def sync(self) -> None:
        for op, arg in self._volatile:
            if op == "append":
                self.log.extend(arg)  # type: ignore[arg-type]
            else:
                self.log = [t for t in self.log if t.zxid <= arg]  # type: ignore[operator]
        self._volatile.clear()
        self.syncs += 1

    def write_accepted_epoch(self, epoch: int, leader: int) -> None:
        self.accepted_epoch, self.accepted_leader = epoch, leader

    def write_current_epoch(self, epoch: int) -> None:
        self.current_epoch = epoch

    def install_snapshot(self, zxid: Zxid, state: bytes) -> None:
        self.snapshot_zxid, self.snapshot = zxid, state
        self.log = []

    def save_snapshot(self, zxid: Zxid, state: bytes | Encoded) -> None:
        self.snapshot_zxid, self.snapshot = zxid, joined(state)
        self.log = [t for t in self.log if t.zxid > zxid]

    def crash(self) -> None:
        self._volatile.clear()

    def close(self) -> None:
        pass
