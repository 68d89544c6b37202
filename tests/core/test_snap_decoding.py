"""A learner hands the shell a SNAP to decode (``DecodeSnapshot``) and goes on answering its
leader's pings meanwhile; it installs and persists the state only once the shell hands it back
decoded (``SnapshotDecoded``), and takes the leader's later messages in order after that. A
300,000-znode SNAP decoded in one go held a real learner 8 s, and its leader dropped it."""

from __future__ import annotations

import msgpack
import pytest

from tests.core.test_ack_rules import CFG, follower_of_1, persists, sent
from zabray.errors import CorruptionError
from zabray.protocol import actions as a
from zabray.protocol import messages as m
from zabray.protocol.events import ChannelId, Persisted, Received, SnapshotDecoded, Tick
from zabray.protocol.node import Node
from zabray.protocol.role import Phase
from zabray.protocol.zxid import Zxid

STATE = msgpack.packb([Zxid.of(4, 7), 7, b"\1" * 16])
AFTER = m.Txn(Zxid.of(4, 8), b"after the image")


def decoding_follower() -> tuple[Node, ChannelId, a.DecodeSnapshot]:
    """Replica 2, past its epoch with leader 1, just handed the last part of a SNAP at 4:7."""
    n, ch = follower_of_1()
    n.step(Received(ch, m.LeaderInfo(5)))
    n.step(Persisted(1))
    out = n.step(Received(ch, m.Snap(Zxid.of(4, 7), STATE)))
    (dec,) = [x for x in out if isinstance(x, a.DecodeSnapshot)]
    assert dec.zxid == Zxid.of(4, 7) and persists(out) == [] and sent(out) == []
    return n, ch, dec


def test_a_snap_is_installed_and_persisted_only_once_decoded_and_what_came_after_waits_for_it() -> None:
    n, ch, dec = decoding_follower()
    # The leader's history after the image and its NEWLEADER arrive while the shell decodes.
    out = n.step(Received(ch, m.Diff((AFTER,))))
    out += n.step(Received(ch, m.NewLeader(5, AFTER.zxid)))
    assert persists(out) == [] and sent(out) == []
    assert n.applied == Zxid(0) and n.history.last == Zxid(0) and n.app.snapshot() != STATE  # type: ignore[attr-defined]
    # Its pings are answered meanwhile, so its leader does not take it for dead.
    assert sent(n.step(Received(ch, m.Ping(Zxid(0))))) == [m.Ping(Zxid(0))]
    assert dec.restore.decode(1)
    out = n.step(SnapshotDecoded(dec.restore))
    install, append, epoch = persists(out)
    assert isinstance(install, a.InstallSnapshot) and (install.zxid, install.state) == (Zxid.of(4, 7), STATE)
    assert isinstance(append, a.AppendTxns) and append.txns == (AFTER,)
    assert isinstance(epoch, a.WriteCurrentEpoch) and epoch.epoch == 5
    assert n.app.snapshot() == STATE and n.applied == Zxid.of(4, 7) and n.history.last == AFTER.zxid  # type: ignore[attr-defined]
    assert sent(out) == []  # the NEWLEADER ack still waits for all of it to be durable
    assert sent(n.step(Persisted(epoch.token))) == [m.AckNewLeader(5, AFTER.zxid)]


def test_a_decoding_learner_outlasts_init_limit_but_not_a_silent_leader() -> None:
    n, ch, _ = decoding_follower()
    for _ in range(CFG.init_limit + 5):
        if n.now % CFG.ping_interval == 0:
            n.step(Received(ch, m.Ping(Zxid(0))))
        n.step(Tick())
    assert n.state == m.PeerState.FOLLOWING
    out = [x for _ in range(CFG.sync_limit + 1) for x in n.step(Tick())]
    assert a.Close(ch) in out and n.state == m.PeerState.LOOKING


def test_what_is_left_of_the_sync_after_a_long_decode_gets_init_limit_of_its_own() -> None:
    n, ch, dec = decoding_follower()
    for _ in range(CFG.init_limit + 5):
        n.step(Received(ch, m.Ping(Zxid(0))))
        n.step(Tick())
    assert dec.restore.decode(1)
    n.step(SnapshotDecoded(dec.restore))
    n.step(Received(ch, m.NewLeader(5, Zxid.of(4, 7))))
    for _ in range(CFG.init_limit - 1):
        n.step(Received(ch, m.Ping(Zxid(0))))
        n.step(Tick())
    assert n.state == m.PeerState.FOLLOWING  # NEWLEADER's ack is on its way: the sync is not stuck
    for _ in range(2):
        n.step(Received(ch, m.Ping(Zxid(0))))
        n.step(Tick())
    assert n.state == m.PeerState.LOOKING  # but a leader that never sends UPTODATE is left


def test_a_snap_still_decoding_when_the_iteration_ends_is_finished_and_installed_then() -> None:
    """Its state is committed; dropped, the learner would be sent it again from the start, by a
    leader that may be waiting for this very learner to establish itself."""
    n, ch, dec = decoding_follower()
    n.step(Received(ch, m.Diff((AFTER,))))  # of the ended iteration: not taken
    out = n.step(Received(ch, m.Trunc(Zxid(0))))
    assert out == [] and n.state == m.PeerState.FOLLOWING  # out of order, but not looked at yet
    out = [x for _ in range(CFG.sync_limit + 1) for x in n.step(Tick())]
    assert n.state == m.PeerState.LOOKING
    (install,) = persists(out)
    assert isinstance(install, a.InstallSnapshot) and install.zxid == Zxid.of(4, 7)
    assert n.app.snapshot() == STATE and n.history.last == Zxid.of(4, 7)  # type: ignore[attr-defined]
    assert dec.restore.stale  # the shell stops decoding it
    assert persists(n.step(SnapshotDecoded(dec.restore))) == []  # and a late hand-back is ignored


def test_a_snap_that_does_not_decode_fails_in_the_shell_and_changes_nothing() -> None:
    n, ch = follower_of_1()
    n.step(Received(ch, m.LeaderInfo(5)))
    n.step(Persisted(1))
    out = n.step(Received(ch, m.Snap(Zxid.of(4, 7), b"\xc1 not msgpack")))
    (dec,) = [x for x in out if isinstance(x, a.DecodeSnapshot)]
    with pytest.raises(CorruptionError):
        dec.restore.decode(1)
    assert n.applied == Zxid(0) and n.history.last == Zxid(0)


def test_a_leader_not_yet_established_pings_learners_it_has_synced() -> None:
    """A learner decoding a large SNAP acknowledges NEWLEADER late; a leader still waiting for
    a quorum of those pings it meanwhile, or it would outlast its sync_limit."""
    from tests.core.test_snapshot_images import leader_with_a_snapshot

    n = leader_with_a_snapshot()
    ch = ChannelId(2, 1, 0, 0)
    n.step(Received(ch, m.FollowerInfo(2, 3, Zxid.of(3, 6))))
    n.step(Persisted(1))
    out = n.step(Received(ch, m.AckEpoch(3, Zxid.of(3, 6), True)))
    assert m.NewLeader(4, Zxid.of(3, 6)) in sent(out)
    pings = [x for _ in range(CFG.ping_interval) for x in sent(n.step(Tick()))]
    assert pings == [m.Ping(Zxid(0))] and n.role.phase is not Phase.BROADCAST
