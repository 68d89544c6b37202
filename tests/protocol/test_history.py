from __future__ import annotations

import pytest

from zabray.errors import ProtocolError
from zabray.protocol.history import History
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import ZERO, Zxid


def z(e: int, c: int) -> Zxid:
    return Zxid.of(e, c)


def hist(*zs: Zxid, base: Zxid = ZERO) -> History:
    return History(base, [Txn(x, b"v") for x in zs])


def test_append_requires_increasing_zxids() -> None:
    h = hist(z(1, 1), z(1, 2))
    with pytest.raises(ProtocolError):
        h.append(Txn(z(1, 2), b"dup"))
    h.append(Txn(z(2, 1), b"next epoch"))
    assert h.last == z(2, 1)


def test_contains_floor_and_after() -> None:
    h = hist(z(1, 1), z(1, 2), z(2, 1), base=ZERO)
    assert h.contains(ZERO) and h.contains(z(1, 2)) and not h.contains(z(1, 3))
    assert h.floor(z(1, 3)) == z(1, 2)  # a learner's uncommitted (1,3) is cut back to (1,2)
    assert h.floor(z(9, 9)) == z(2, 1)
    assert [t.zxid for t in h.after(z(1, 1))] == [z(1, 2), z(2, 1)]
    assert [t.zxid for t in h.after(ZERO, z(1, 2))] == [z(1, 1), z(1, 2)]


def test_truncate_and_compact() -> None:
    h = hist(z(1, 1), z(1, 2), z(1, 3))
    h.truncate(z(1, 1))
    assert h.last == z(1, 1) and len(h) == 1
    h = hist(z(1, 1), z(1, 2), z(1, 3))
    h.compact(z(1, 2))
    assert h.base == z(1, 2) and [t.zxid for t in h.txns()] == [z(1, 3)]
    assert h.floor(z(1, 1)) is None  # below the snapshot: the leader must send SNAP
    with pytest.raises(ProtocolError):
        h.truncate(z(1, 1))
