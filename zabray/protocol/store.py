"""The store interface, and the one place that turns the core's persist actions into store calls.

Durability contract of a ``Store``:
- ``append`` and ``truncate`` are buffered; they are durable only once ``sync`` returns
  (``sync`` is the group commit: one fdatasync for everything buffered since the last one).
- ``write_accepted_epoch``, ``write_current_epoch``, ``install_snapshot`` and ``save_snapshot``
  are atomic and durable when they return.
- ``recover`` returns exactly what was durable, in order, or raises ``CorruptionError``.

``apply_persists`` keeps the order the core asked for *in durability*: before an epoch or
snapshot write it syncs the log, so "history, then currentEpoch" holds even across a crash.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from zabray.protocol.actions import (
    AppendTxns,
    InstallSnapshot,
    Persist,
    PersistSnapshot,
    TruncateLog,
    WriteAcceptedEpoch,
    WriteCurrentEpoch,
)
from zabray.protocol.durable import DurableState
from zabray.protocol.messages import Txn
from zabray.protocol.statemachine import Encoded
from zabray.protocol.zxid import Zxid


class Store(Protocol):
    def recover(self) -> DurableState: ...

    def append(self, txns: Sequence[Txn]) -> None: ...

    def truncate(self, zxid: Zxid) -> None: ...

    def sync(self) -> None: ...

    def write_accepted_epoch(self, epoch: int, leader: int) -> None: ...

    def write_current_epoch(self, epoch: int) -> None: ...

    def install_snapshot(self, zxid: Zxid, state: bytes) -> None: ...

    def save_snapshot(self, zxid: Zxid, state: bytes | Encoded) -> None: ...

    def close(self) -> None: ...


def apply_one(store: Store, action: Persist, dirty: bool) -> bool:
    """Apply one persist action; returns whether the log has unsynced changes afterwards."""
    if isinstance(action, AppendTxns):
        store.append(action.txns)
        return True
    if isinstance(action, TruncateLog):
        store.truncate(action.zxid)
        return True
    if dirty:
        store.sync()
    if isinstance(action, WriteAcceptedEpoch):
        store.write_accepted_epoch(action.epoch, action.leader)
    elif isinstance(action, WriteCurrentEpoch):
        store.write_current_epoch(action.epoch)
    elif isinstance(action, InstallSnapshot):
        store.install_snapshot(action.zxid, action.state)
    elif isinstance(action, PersistSnapshot):
        store.save_snapshot(action.zxid, action.state)
    else:
        raise TypeError(f"not a persist action: {action!r}")
    return False


def apply_persists(store: Store, actions: Iterable[Persist]) -> int:
    """Make ``actions`` durable in order with one sync at the end (group commit).

    Returns the highest token made durable (0 when there was nothing), which is what the shell
    reports back to the core as ``Persisted(upto)``.
    """
    dirty = False
    token = 0
    for action in actions:
        dirty = apply_one(store, action, dirty)
        token = action.token
    if dirty:
        store.sync()
    return token
