"""A snapshot is taken in two steps: the core hands the shell an image of the delivered state
(``EncodeSnapshot``), goes on delivering while the shell encodes it, and persists the bytes the
shell hands back (``SnapshotEncoded``), unless a SNAP replaced the state in between."""

from __future__ import annotations

import msgpack

from tests.core.test_ack_rules import established_follower, follower_of_1, persists
from zabray.protocol import actions as a
from zabray.protocol import messages as m
from zabray.protocol.events import Persisted, Received, SnapshotEncoded, SnapshotRequested
from zabray.protocol.zxid import Zxid


def encodes(out: list[a.Action]) -> list[a.EncodeSnapshot]:
    return [x for x in out if isinstance(x, a.EncodeSnapshot)]


def test_the_image_is_of_its_zxid_and_its_bytes_are_persisted_when_handed_back() -> None:
    n, ch = established_follower()
    for c in (1, 2):
        n.step(Received(ch, m.Proposal(m.Txn(Zxid.of(5, c), b"x%d" % c))))
    n.step(Received(ch, m.Commit(Zxid.of(5, 2))))
    out = n.step(SnapshotRequested())
    (enc,) = encodes(out)
    assert enc.zxid == Zxid.of(5, 2) and persists(out) == []
    # The core goes on delivering; a second request while the image is out is dropped.
    n.step(Received(ch, m.Proposal(m.Txn(Zxid.of(5, 3), b"x3"))))
    n.step(Received(ch, m.Commit(Zxid.of(5, 3))))
    assert encodes(n.step(SnapshotRequested())) == []
    data = enc.image.encode(1)
    assert data is not None and msgpack.unpackb(data)[:2] == [Zxid.of(5, 2), 2]  # the state at 5:2
    (p,) = persists(n.step(SnapshotEncoded(enc.image, enc.zxid, data)))
    assert isinstance(p, a.PersistSnapshot) and (p.zxid, p.state) == (Zxid.of(5, 2), data)
    n.step(Persisted(p.token))
    # Once handed back, the next request takes a new image, of the state now.
    (enc2,) = encodes(n.step(SnapshotRequested()))
    assert enc2.zxid == Zxid.of(5, 3)


def test_an_image_taken_before_a_snap_is_never_persisted() -> None:
    n, ch = follower_of_1()
    (old,) = encodes(n.step(SnapshotRequested()))
    n.step(Received(ch, m.LeaderInfo(5)))
    n.step(Persisted(1))
    state = msgpack.packb([Zxid.of(4, 7), 7, b"\1" * 16])
    out = n.step(Received(ch, m.Snap(Zxid.of(4, 7), state)))
    assert [type(p) for p in persists(out)] == [a.InstallSnapshot]
    data = old.image.encode(1)
    assert data is not None
    assert persists(n.step(SnapshotEncoded(old.image, old.zxid, data))) == []
    (new,) = encodes(n.step(SnapshotRequested()))
    assert new.zxid == Zxid.of(4, 7) and new.image.encode(1) == state
