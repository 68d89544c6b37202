"""A replica's in-memory history: the txns after ``base``, in zxid order.

``base`` is the zxid of the newest state the replica holds only as a snapshot; txns at or
below it are not available here (a learner that needs them gets a SNAP). Invariant: zxids
strictly increase and all exceed ``base``. ``configs`` lists the reconfiguration txns held
(those with a ``config``), in zxid order: they are rare, and the core asks for them often.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from zabray.errors import ProtocolError
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid


class History:
    __slots__ = ("base", "_txns", "_zxids", "configs")

    def __init__(self, base: Zxid, txns: Iterable[Txn] = ()) -> None:
        self.base = base
        self._txns: list[Txn] = []
        self._zxids: list[int] = []
        self.configs: list[Txn] = []
        for t in txns:
            self.append(t)

    def __len__(self) -> int:
        return len(self._txns)

    @property
    def last(self) -> Zxid:
        return self._txns[-1].zxid if self._txns else self.base

    def append(self, txn: Txn) -> None:
        zxids = self._zxids
        if txn.zxid <= (zxids[-1] if zxids else self.base):
            raise ProtocolError(f"txn {txn.zxid!r} does not follow {self.last!r}")
        self._txns.append(txn)
        zxids.append(txn.zxid)
        if txn.config is not None:
            self.configs.append(txn)

    def contains(self, z: int) -> bool:
        if z == self.base:
            return True
        i = bisect_left(self._zxids, z)
        return i < len(self._zxids) and self._zxids[i] == z

    def floor(self, z: int) -> Zxid | None:
        """The largest zxid held (``base`` included) that is <= ``z``; None if ``z`` < base."""
        if z < self.base:
            return None
        i = bisect_right(self._zxids, z)
        return self._zxids[i - 1] if i else self.base  # type: ignore[return-value]

    def get(self, z: int) -> Txn | None:
        i = bisect_left(self._zxids, z)
        if i < len(self._zxids) and self._zxids[i] == z:
            return self._txns[i]
        return None

    def after(self, z: int, upto: int | None = None, limit: int | None = None) -> list[Txn]:
        """Txns with ``z`` < zxid <= ``upto`` (to the end when ``upto`` is None), the first
        ``limit`` of them if given."""
        lo = bisect_right(self._zxids, z)
        hi = len(self._zxids) if upto is None else bisect_right(self._zxids, upto)
        if limit is not None:
            hi = min(hi, lo + limit)
        return self._txns[lo:hi]

    def truncate(self, z: int) -> None:
        """Drop every txn after ``z``."""
        if z < self.base:
            raise ProtocolError(f"cannot truncate to {Zxid(z)!r}, below the snapshot at {self.base!r}")
        i = bisect_right(self._zxids, z)
        del self._txns[i:]
        del self._zxids[i:]
        self.configs = [t for t in self.configs if t.zxid <= z]

    def compact(self, upto: int) -> None:
        """Forget txns at or below ``upto`` (they are covered by a snapshot)."""
        if upto <= self.base:
            return
        i = bisect_right(self._zxids, upto)
        del self._txns[:i]
        del self._zxids[:i]
        self.base = Zxid(upto)
        self.configs = [t for t in self.configs if t.zxid > upto]

    def reset(self, base: Zxid) -> None:
        """Replace everything by a snapshot at ``base`` (SNAP)."""
        self.base = base
        self._txns.clear()
        self._zxids.clear()
        self.configs = []

    def zxid_at_or_before(self, index_from_end: int) -> Zxid:
        return self._txns[-index_from_end].zxid if 0 < index_from_end <= len(self._txns) else self.base

    def txns(self) -> list[Txn]:
        return list(self._txns)
