"""What a replica's core starts from: the durable part of its state, as recovered from storage."""

from __future__ import annotations

from dataclasses import dataclass

from zabray.protocol.membership import Membership
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import ZERO, Zxid


@dataclass(frozen=True, slots=True)
class DurableState:
    """What a replica recovers: its epochs, newest valid snapshot, and the log after it."""

    accepted_epoch: int = 0
    accepted_leader: int = -1
    current_epoch: int = 0
    snapshot_zxid: Zxid = ZERO
    snapshot: bytes | None = None
    txns: tuple[Txn, ...] = ()
    rejoining: bool = False
    """It lost its disk (a fresh restart) and no leader has made it whole since: what it votes,
    promises or acknowledges could stand in for data it no longer has, so it counts in no
    quorum until a NEWLEADER has synced it (then its currentEpoch is no longer 0)."""
    config: Membership | None = None
    """The configuration last made durable (``WriteConfig``); None: never written (the static
    configuration the replica is started with is in force)."""
    left: bool = False
    """``config`` does not include this replica, which was a member before it: it left."""

    @property
    def last_zxid(self) -> Zxid:
        return self.txns[-1].zxid if self.txns else self.snapshot_zxid
