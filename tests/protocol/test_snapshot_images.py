"""A snapshot is taken in two steps: the core hands the shell an image of the delivered state
(``EncodeSnapshot``), goes on delivering while the shell encodes it, and persists the bytes the
shell hands back (``SnapshotEncoded``), unless a SNAP replaced the state in between. A leader's
SNAP to a learner waits for such an image too, instead of encoding the tree on the spot."""

from __future__ import annotations

import msgpack

from tests.protocol.test_ack_rules import CFG, established_follower, follower_of_1, persists, sent
from zabray.protocol import actions as a
from zabray.protocol import messages as m
from zabray.protocol.durable import DurableState
from zabray.protocol.events import (
    ChannelId,
    Notified,
    Persisted,
    Received,
    SnapshotDecoded,
    SnapshotEncoded,
    SnapshotRequested,
    Submit,
    Tick,
)
from zabray.protocol.node import Node
from zabray.protocol.protocol_config import ProtocolConfig
from zabray.protocol.statemachine import ValueLog
from zabray.protocol.zxid import Zxid


def encodes(out: list[a.Action]) -> list[a.EncodeSnapshot]:
    return [x for x in out if isinstance(x, a.EncodeSnapshot)]


def decoded(n: Node, out: list[a.Action]) -> list[a.Action]:
    """The actions of handing ``n`` back the SNAP its step asked the shell to decode (in ``out``)."""
    (dec,) = [x for x in out if isinstance(x, a.DecodeSnapshot)]
    while not dec.restore.decode(1):
        pass
    return n.step(SnapshotDecoded(dec.restore))


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
    assert data is not None and msgpack.unpackb(b"".join(data))[:2] == [Zxid.of(5, 2), 2]  # the state at 5:2
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
    out = decoded(n, n.step(Received(ch, m.Snap(Zxid.of(4, 7), state))))
    assert [type(p) for p in persists(out)] == [a.InstallSnapshot]
    data = old.image.encode(1)
    assert data is not None
    assert persists(n.step(SnapshotEncoded(old.image, old.zxid, data))) == []
    (new,) = encodes(n.step(SnapshotRequested()))
    assert new.zxid == Zxid.of(4, 7) and new.image.encode(1) == (state,)


def leader_with_a_snapshot(**config: int) -> Node:
    """Replica 1, recovered from a snapshot at 3:5 with 3:6 logged after it, electing itself."""
    log = ValueLog()
    for c in range(1, 6):
        log.apply(m.Txn(Zxid.of(3, c), b"v%d" % c))
    durable = DurableState(accepted_epoch=3, current_epoch=3, snapshot_zxid=Zxid.of(3, 5),
                           snapshot=log.snapshot(), txns=(m.Txn(Zxid.of(3, 6), b"v6"),))
    n = Node(1, ProtocolConfig(voters=CFG.voters, **config), durable)
    n.step(Notified(2, m.Notification(2, m.PeerState.LOOKING, 1, 0, 3, 1)))
    n.step(Notified(3, m.Notification(3, m.PeerState.LOOKING, 1, 0, 3, 1)))
    return n


def test_a_leader_snaps_a_learner_once_its_image_is_encoded_and_pings_it_meanwhile() -> None:
    n = leader_with_a_snapshot()
    ch = ChannelId(2, 1, 0, 0)
    n.step(Received(ch, m.FollowerInfo(2, 0, Zxid(0))))  # an empty learner: below the leader's snapshot
    n.step(Persisted(1))
    out = n.step(Received(ch, m.AckEpoch(0, Zxid(0), True)))
    (enc,) = encodes(out)
    assert enc.zxid == Zxid.of(3, 5)
    assert [x for x in sent(out) if isinstance(x, m.Snap | m.Diff | m.NewLeader)] == []
    # While the image is being encoded the learner is pinged, so it does not take the leader for dead.
    pings = [x for _ in range(CFG.ping_interval) for x in sent(n.step(Tick()))]
    assert pings == [m.Ping(Zxid(0))]
    data = enc.image.encode(1)
    assert data is not None
    out = n.step(SnapshotEncoded(enc.image, enc.zxid, data))
    assert sent(out) == [m.Snap(Zxid.of(3, 5), b"".join(data)), m.Diff((m.Txn(Zxid.of(3, 6), b"v6"),)),
                         m.NewLeader(4, Zxid.of(3, 6))]
    assert persists(out) == []  # an image for a SNAP is not a local snapshot


def test_a_snap_carries_on_with_everything_the_leader_proposed_while_its_image_was_encoded() -> None:
    n = leader_with_a_snapshot()
    ch2, ch3 = ChannelId(2, 1, 0, 0), ChannelId(3, 1, 0, 0)
    n.step(Received(ch2, m.FollowerInfo(2, 3, Zxid.of(3, 6))))
    n.step(Persisted(1))
    n.step(Received(ch2, m.AckEpoch(3, Zxid.of(3, 6), True)))
    n.step(Persisted(2))
    n.step(Received(ch2, m.AckNewLeader(4, Zxid.of(3, 6))))
    assert n.applied == Zxid.of(3, 6)  # established with replica 2
    n.step(Received(ch3, m.FollowerInfo(3, 0, Zxid(0))))
    (enc,) = encodes(n.step(Received(ch3, m.AckEpoch(0, Zxid(0), True))))
    assert enc.zxid == Zxid.of(3, 6)
    # A write is proposed (to replica 2 only) and committed while the image is out.
    out = n.step(Submit(7, b"w"))
    txn = m.Txn(Zxid.of(4, 1), b"w", 1, 7)
    assert [x for x in out if isinstance(x, a.Send)] == [a.Send(ch2, m.Proposal(txn))]
    (append,) = persists(out)
    n.step(Persisted(append.token))
    n.step(Received(ch2, m.Ack(Zxid.of(4, 1))))
    assert n.applied == Zxid.of(4, 1)
    data = enc.image.encode(1)
    assert data is not None
    out = n.step(SnapshotEncoded(enc.image, enc.zxid, data))
    assert [(x.channel, x.msg) for x in out if isinstance(x, a.Send)] == [
        (ch3, m.Snap(Zxid.of(3, 6), b"".join(data))), (ch3, m.Diff((txn,))), (ch3, m.NewLeader(4, Zxid.of(4, 1)))]


def test_a_state_larger_than_snap_chunk_goes_in_parts_and_is_restored_whole() -> None:
    n, first, data = snapping_leader(snap_chunk=10, snap_tick_bytes=10)
    assert len(data) > 20
    snaps = parts_over_ticks(n, first)
    assert len(snaps) == -(-len(data) // 10) and all(len(s.state) <= 10 for s in snaps)
    assert [s.last for s in snaps] == [False] * (len(snaps) - 1) + [True]
    assert b"".join(s.state for s in snaps) == data
    # The learner takes the parts in and restores the state only once the last has come.
    f, fch = follower_of_1()
    f.step(Received(fch, m.LeaderInfo(4)))
    f.step(Persisted(1))
    for s in snaps[:-1]:
        assert persists(f.step(Received(fch, s))) == []
    assert f.applied == Zxid(0)
    (install,) = persists(decoded(f, f.step(Received(fch, snaps[-1]))))
    assert isinstance(install, a.InstallSnapshot) and install.state == data
    assert f.applied == Zxid.of(3, 5) and f.app.snapshot() == data


def parts_over_ticks(n: Node, out: list[a.Action], per_tick: int = 1) -> list[m.Snap]:
    """The SNAP parts a leader sends from ``out`` on, tick by tick (at most ``per_tick`` a step),
    until its NEWLEADER, which comes after the last of them with the history between."""
    snaps: list[m.Snap] = []
    for _ in range(1000):
        msgs = [x for x in sent(out) if not isinstance(x, m.Ping)]
        now = [x for x in msgs if isinstance(x, m.Snap)]
        assert len(now) <= per_tick, "more parts in one step than snap_tick_bytes allow"
        snaps += now
        if any(isinstance(x, m.NewLeader) for x in msgs):
            assert snaps and snaps[-1].last
            after = msgs[msgs.index(now[-1]) + 1:] if now else msgs
            assert isinstance(after[-1], m.NewLeader) and not any(isinstance(x, m.Snap) for x in after)
            return snaps
        out = n.step(Tick())
    raise AssertionError("no NEWLEADER after 1000 ticks")


def snapping_leader(**config: int) -> tuple[Node, list[a.Action], bytes]:
    """``leader_with_a_snapshot`` that has just begun to SNAP learner 2: the first step's
    actions and the image's bytes."""
    n = leader_with_a_snapshot(**config)
    ch = ChannelId(2, 1, 0, 0)
    n.step(Received(ch, m.FollowerInfo(2, 0, Zxid(0))))
    n.step(Persisted(1))
    (enc,) = encodes(n.step(Received(ch, m.AckEpoch(0, Zxid(0), True))))
    encoded = enc.image.encode(1)
    assert encoded is not None
    return n, n.step(SnapshotEncoded(enc.image, enc.zxid, encoded)), b"".join(encoded)


def test_a_snap_in_many_parts_goes_a_few_parts_per_tick() -> None:
    # A 320 MB tree went in one step: encoding and framing its 20 parts held a real leader for
    # 1.1 s, longer than sync_limit, and its healthy follower went looking for a new leader.
    n, first, data = snapping_leader(snap_chunk=4, snap_tick_bytes=8)
    # An image taken while the parts go (a local snapshot) starts no second SNAP to the learner.
    (enc,) = encodes(n.step(SnapshotRequested()))
    encoded = enc.image.encode(1)
    assert encoded is not None
    assert not [x for x in sent(n.step(SnapshotEncoded(enc.image, enc.zxid, encoded))) if isinstance(x, m.Snap)]
    snaps = parts_over_ticks(n, first, per_tick=2)
    assert len(snaps) > 4 and b"".join(s.state for s in snaps) == data
    assert n.role.history_floor() is None  # type: ignore[attr-defined]


def test_the_history_a_snap_in_parts_is_followed_by_is_kept_while_the_parts_go() -> None:
    n, out, _ = snapping_leader(snap_chunk=4, snap_tick_bytes=4, diff_window=0)
    assert n.role.history_floor() == Zxid.of(3, 5)  # type: ignore[attr-defined]
    # A snapshot at 3:6 persisted while the parts go (diff_window 0) must not drop 3:6: the
    # learner gets the state at 3:5, and NEWLEADER tells it that it then has 3:6 too.
    n._compact(Zxid.of(3, 6))
    msgs: list[m.Message] = []
    for _ in range(100):
        msgs += [x for x in sent(out) if not isinstance(x, m.Ping)]
        if any(isinstance(x, m.NewLeader) for x in msgs):
            break
        out = n.step(Tick())
    assert msgs[-2:] == [m.Diff((m.Txn(Zxid.of(3, 6), b"v6"),)), m.NewLeader(4, Zxid.of(3, 6))]


def test_anything_but_the_next_part_inside_a_snap_in_parts_ends_the_iteration() -> None:
    for intruder in (m.Diff(()), m.Snap(Zxid.of(3, 6), b"other"), m.NewLeader(4, Zxid(0))):
        f, fch = follower_of_1()
        f.step(Received(fch, m.LeaderInfo(4)))
        f.step(Persisted(1))
        f.step(Received(fch, m.Snap(Zxid.of(3, 5), b"part", False)))
        out = f.step(Received(fch, intruder))
        assert a.Close(fch) in out and f.state == m.PeerState.LOOKING, intruder
