"""The replicated state machine the core delivers committed txns to.

It must be deterministic: the same txns applied in the same order from the same snapshot give
the same state and results on every replica. ``ValueLog``, the default, treats values as
opaque and keeps a hash chain over everything delivered, so two replicas (or a replica and a
SNAP) agree on the whole history exactly when their chains agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import msgpack
from xxhash import xxh3_128_digest

from zabray.errors import CodecError, CorruptionError, ReconfigError
from zabray.protocol.membership import ConfigChange, Membership
from zabray.protocol.messages import Txn

Decide = Callable[[ConfigChange], Membership]
"""The leader's judgement of a reconfiguration (``Leader._decide``): the next configuration,
or ``ReconfigError``."""


class StateMachine(Protocol):
    def prepare(self, request: bytes, zxid: int) -> bytes:
        """Leader only: turn a client request into the txn value to propose as ``zxid``.

        Computed against the *future* state (committed plus everything already prepared), so
        the txn is idempotent and a failed condition becomes an error txn. Called in zxid order.
        """
        ...

    def prepare_reconfig(self, request: bytes, zxid: int, decide: Decide) -> tuple[bytes, Membership | None]:
        """Leader only: a reconfiguration request (``SubmitReconfig``) as the txn ``zxid``: its
        value, and the configuration it makes (None: a refusal the txn records, as the data
        tree's error txns do). The state machine decodes its own request, runs its own checks
        and calls ``decide`` where its order of checks puts the leader's (ZooKeeper checks the
        ACL of /zookeeper/config last); raising ``ReconfigError`` refuses it with no txn."""
        ...

    def abandon_prepared(self) -> None:
        """The leader's iteration ended: forget the future state built by ``prepare``."""
        ...

    def apply(self, txn: Txn) -> object: ...

    def snapshot(self) -> bytes: ...

    def image(self) -> SnapshotImage:
        """The state as of now, for the shell to encode (in slices, if it is large) while
        txns go on being applied; its bytes are what ``snapshot`` returns now."""
        ...

    def restore(self, data: bytes) -> None:
        """Replace the whole state with a snapshot's, in one go (at start-up)."""
        ...

    def restoring(self, data: bytes) -> SnapshotRestore:
        """A restore of a snapshot's ``data`` for the shell to decode (in slices, if it is
        large); the state changes only at its ``install``. ``CorruptionError`` if ``data`` is
        not a snapshot, now or at any ``decode``."""
        ...


Encoded = tuple[bytes, ...]
"""An encoded state in parts, in order: their concatenation is its bytes. A large tree's snapshot
stays in the slices it was encoded in, since copying it whole (a join of 150 MB) held a
replica's loop for most of a second; the disk writes the parts as they are."""


def joined(state: bytes | Encoded) -> bytes:
    """The bytes of ``state``; only where they are needed whole (a SNAP to a learner)."""
    if isinstance(state, tuple):
        return state[0] if len(state) == 1 else b"".join(state)
    return state


class SnapshotImage(Protocol):
    """A snapshot in the making (``zabray.tree.image`` has the one that takes slices)."""

    stale: bool  # the state was restored since: the image no longer describes it

    def encode(self, budget: int) -> Encoded | None:
        """Encode about ``budget`` more units; the snapshot once complete, ``None`` until then."""
        ...


class SnapshotRestore(Protocol):
    """A snapshot being decoded (``zabray.tree.restore`` has the one that takes slices)."""

    stale: bool  # given up: the core will not install it

    def decode(self, budget: int) -> bool:
        """Decode about ``budget`` more units; True once all is decoded and checked."""
        ...

    def install(self) -> None:
        """Replace the state machine's state with the decoded one."""
        ...


class EncodedImage:
    """An image of a small state, encoded when taken."""

    __slots__ = ("data", "stale")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.stale = False

    def encode(self, budget: int) -> Encoded | None:
        return (self.data,)


def chain_step(chain: bytes, zxid: int, value: bytes) -> bytes:
    """The next link of the value log's hash chain (XXH3-128: replicas that applied different
    txns end with different chains; it guards against bugs, not an adversary)."""
    return xxh3_128_digest(chain + zxid.to_bytes(8, "big") + value)


class ValueLog:
    """Opaque values: state is (last zxid, count, hash chain)."""

    __slots__ = ("zxid", "count", "chain")

    def __init__(self) -> None:
        self.zxid = 0
        self.count = 0
        self.chain = b"\0" * 16

    def prepare(self, request: bytes, zxid: int) -> bytes:
        return request

    def prepare_reconfig(self, request: bytes, zxid: int, decide: Decide) -> tuple[bytes, Membership | None]:
        """The request is a ``ConfigChange``; it is also the txn's value (the configuration
        travels in the txn itself). A refusal makes no txn: opaque values cannot record one."""
        try:
            change = ConfigChange.decode(request)
        except CodecError as e:
            raise ReconfigError("BAD_ARGUMENTS", str(e)) from None
        return request, decide(change)

    def abandon_prepared(self) -> None:
        pass

    def apply(self, txn: Txn) -> object:
        self.chain = chain_step(self.chain, txn.zxid, txn.value)
        self.zxid = txn.zxid
        self.count += 1
        return None

    def snapshot(self) -> bytes:
        return msgpack.packb([self.zxid, self.count, self.chain])

    def image(self) -> EncodedImage:
        return EncodedImage(self.snapshot())

    def restore(self, data: bytes) -> None:
        self.zxid, self.count, self.chain = _value_log_state(data)

    def restoring(self, data: bytes) -> ValueLogRestore:
        return ValueLogRestore(self, data)


def _value_log_state(data: bytes) -> tuple[int, int, bytes]:
    try:
        zxid, count, chain = msgpack.unpackb(data)
    except Exception as e:
        raise CorruptionError(f"bad ValueLog snapshot: {e}") from None
    return zxid, count, chain


class ValueLogRestore:
    """A value log's snapshot is three numbers: decoded by the first ``decode``."""

    __slots__ = ("stale", "_log", "_data", "_state")

    def __init__(self, log: ValueLog, data: bytes) -> None:
        self.stale = False
        self._log, self._data = log, data
        self._state: tuple[int, int, bytes] | None = None

    def decode(self, budget: int) -> bool:
        self._state = _value_log_state(self._data)
        return True

    def install(self) -> None:
        if self._state is None or self.stale:
            raise RuntimeError("install of a restore that is not done, or was given up")
        self._log.zxid, self._log.count, self._log.chain = self._state
