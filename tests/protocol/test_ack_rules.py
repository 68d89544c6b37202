"""Paper rules about acknowledgements, checked by stepping one core by hand.

"A follower acknowledges NEWEPOCH only after persisting acceptedEpoch; it acknowledges
NEWLEADER only after the history and currentEpoch are durable; it acknowledges a proposal
only after logging it" (Zab, phases 1-3). The core must hold each ACK until the shell reports
the covering write durable, whatever order the shell does things in.
"""

from __future__ import annotations

from zabray.protocol import actions as a
from zabray.protocol import messages as m
from zabray.protocol.durable import DurableState
from zabray.protocol.events import ChannelId, Notified, Persisted, Received, Submit, Tick
from zabray.protocol.node import Node
from zabray.protocol.protocol_config import ProtocolConfig
from zabray.protocol.zxid import Zxid

CFG = ProtocolConfig(voters=frozenset({1, 2, 3}))


def follower_of_1() -> tuple[Node, ChannelId]:
    """Replica 2, told by 1 (leading) and 3 (following 1) who leads: the late-joiner path."""
    n = Node(2, CFG, DurableState())
    n.step(Notified(1, m.Notification(1, m.PeerState.LEADING, 1, 0, 0, 1)))
    out = n.step(Notified(3, m.Notification(3, m.PeerState.FOLLOWING, 1, 0, 0, 1)))
    opens = [x for x in out if isinstance(x, a.Open)]
    assert len(opens) == 1 and opens[0].channel.leader == 1
    sends = [x.msg for x in out if isinstance(x, a.Send)]
    assert sends == [m.FollowerInfo(2, 0, Zxid(0))]
    return n, opens[0].channel


def sent(out: list[a.Action]) -> list[m.Message]:
    return [x.msg for x in out if isinstance(x, a.Send)]


def persists(out: list[a.Action]) -> list[a.Persist]:
    return [x for x in out if isinstance(x, a.Persist)]


def test_ackepoch_waits_for_accepted_epoch_to_be_durable() -> None:
    n, ch = follower_of_1()
    out = n.step(Received(ch, m.LeaderInfo(5)))
    (w,) = persists(out)
    assert isinstance(w, a.WriteAcceptedEpoch) and (w.epoch, w.leader) == (5, 1)
    assert sent(out) == []
    assert sent(n.step(Persisted(w.token))) == [m.AckEpoch(0, Zxid(0), True)]


def test_newleader_ack_waits_for_history_then_current_epoch() -> None:
    n, ch = follower_of_1()
    n.step(Received(ch, m.LeaderInfo(5)))
    n.step(Persisted(1))
    t1 = m.Txn(Zxid.of(4, 1), b"a")
    t2 = m.Txn(Zxid.of(4, 2), b"b")
    out = n.step(Received(ch, m.Diff((t1, t2))))
    out += n.step(Received(ch, m.NewLeader(5, Zxid.of(4, 2))))
    ps = persists(out)
    assert [type(p) for p in ps] == [a.AppendTxns, a.WriteCurrentEpoch]  # history first
    assert sent(out) == []
    assert sent(n.step(Persisted(ps[0].token))) == []  # history durable, currentEpoch not yet
    assert sent(n.step(Persisted(ps[1].token))) == [m.AckNewLeader(5, Zxid.of(4, 2))]
    assert not [x for x in out if isinstance(x, a.Deliver)]  # nothing delivered before UPTODATE


def established_follower() -> tuple[Node, ChannelId]:
    n, ch = follower_of_1()
    n.step(Received(ch, m.LeaderInfo(5)))
    n.step(Persisted(1))
    n.step(Received(ch, m.NewLeader(5, Zxid(0))))
    n.step(Persisted(2))
    n.step(Received(ch, m.UpToDate(Zxid(0))))
    return n, ch


def test_proposals_are_acked_cumulatively_once_durable() -> None:
    n, ch = established_follower()
    out: list[a.Action] = []
    for c in (1, 2, 3):
        out += n.step(Received(ch, m.Proposal(m.Txn(Zxid.of(5, c), b"x%d" % c))))
    tokens = [p.token for p in persists(out)]
    assert len(tokens) == 3 and sent(out) == []
    # A group commit that covers the first two releases one ACK for both.
    assert sent(n.step(Persisted(tokens[1]))) == [m.Ack(Zxid.of(5, 2))]
    assert sent(n.step(Persisted(tokens[2]))) == [m.Ack(Zxid.of(5, 3))]


def test_commit_is_cumulative_and_delivers_in_order() -> None:
    n, ch = established_follower()
    for c in (1, 2, 3):
        n.step(Received(ch, m.Proposal(m.Txn(Zxid.of(5, c), b"x%d" % c))))
    out = n.step(Received(ch, m.Commit(Zxid.of(5, 2))))
    assert [d.txn.zxid for d in out if isinstance(d, a.Deliver)] == [Zxid.of(5, 1), Zxid.of(5, 2)]
    assert n.applied == Zxid.of(5, 2)


def test_a_proposal_from_another_epoch_ends_the_iteration() -> None:
    n, ch = established_follower()
    out = n.step(Received(ch, m.Proposal(m.Txn(Zxid.of(4, 9), b"stale"))))
    assert a.Close(ch) in out
    assert n.state == m.PeerState.LOOKING


def test_forwarded_request_fails_uncertain_when_the_leader_is_lost() -> None:
    n, ch = established_follower()
    out = n.step(Submit(7, b"w"))
    assert sent(out) == [m.Request(2, 7, b"w")]
    for _ in range(CFG.sync_limit + 1):
        out = n.step(Tick())
        if n.state == m.PeerState.LOOKING:
            break
    assert a.Failed(7, "iteration ended (leader 1 silent)", uncertain=True) in out


def test_leader_offers_its_epoch_only_once_it_is_durable() -> None:
    n = Node(1, CFG, DurableState(accepted_epoch=3, current_epoch=3))
    n.step(Notified(2, m.Notification(2, m.PeerState.LOOKING, 1, 0, 3, 1)))
    n.step(Notified(3, m.Notification(3, m.PeerState.LOOKING, 1, 0, 3, 1)))
    assert n.state == m.PeerState.LEADING
    ch = ChannelId(2, 1, 0, 0)
    out = n.step(Received(ch, m.FollowerInfo(2, 3, Zxid(0))))
    (w,) = persists(out)
    assert isinstance(w, a.WriteAcceptedEpoch) and w.epoch == 4  # above every acceptedEpoch seen
    assert sent(out) == []
    assert [x.msg for x in n.step(Persisted(w.token)) if isinstance(x, a.Send)] == [m.LeaderInfo(4)]


def test_session_touches_reach_the_leaders_shell() -> None:
    """A learner forwards the sessions its clients were heard from; the leader reports them."""
    from zabray.protocol.events import TouchSessions

    n, ch = established_follower()
    assert sent(n.step(TouchSessions((7, 9)))) == [m.Touch((7, 9))]
    leader = Node(1, CFG, DurableState(accepted_epoch=3, current_epoch=3))
    assert [x for x in leader.step(TouchSessions((7,))) if isinstance(x, a.SessionsTouched)] == []  # not leading


# -- batch frames: PROPOSALS and REQUESTS are the same as their messages one by one ---------------


def test_a_proposals_frame_is_appended_as_one_write_and_acked_once_durable() -> None:
    one, ch1 = established_follower()
    batch, ch = established_follower()
    txns = tuple(m.Txn(Zxid.of(5, c), b"x%d" % c) for c in (1, 2, 3))
    singles: list[a.Action] = []
    for t in txns:
        singles += one.step(Received(ch1, m.Proposal(t)))
    out = batch.step(Received(ch, m.Proposals(txns)))
    (w,) = persists(out)
    assert isinstance(w, a.AppendTxns) and w.txns == txns
    assert [t for p in persists(singles) for t in p.txns] == list(txns)  # type: ignore[attr-defined]
    assert sent(out) == []  # nothing acknowledged before the write is durable
    assert sent(batch.step(Persisted(w.token))) == [m.Ack(Zxid.of(5, 3))]
    out = batch.step(Received(ch, m.Commit(Zxid.of(5, 3))))
    assert [d.txn for d in out if isinstance(d, a.Deliver)] == list(txns)


def test_a_proposals_frame_with_one_stale_txn_ends_the_iteration_and_appends_none() -> None:
    n, ch = established_follower()
    out = n.step(Received(ch, m.Proposals((m.Txn(Zxid.of(5, 1), b"a"), m.Txn(Zxid.of(4, 9), b"stale")))))
    assert a.Close(ch) in out and n.state == m.PeerState.LOOKING
    assert persists(out) == [] and n.history.last == Zxid(0)


def established_leader() -> tuple[Node, ChannelId]:
    """Replica 1 leading epoch 4 with replica 2 synced: a quorum of 3."""
    n = Node(1, CFG, DurableState(accepted_epoch=3, current_epoch=3))
    n.step(Notified(2, m.Notification(2, m.PeerState.LOOKING, 1, 0, 3, 1)))
    n.step(Notified(3, m.Notification(3, m.PeerState.LOOKING, 1, 0, 3, 1)))
    ch = ChannelId(2, 1, 0, 0)
    n.step(Received(ch, m.FollowerInfo(2, 3, Zxid(0))))
    n.step(Persisted(1))
    n.step(Received(ch, m.AckEpoch(3, Zxid(0), True)))
    n.step(Persisted(2))
    assert sent(n.step(Received(ch, m.AckNewLeader(4, Zxid(0))))) == [m.UpToDate(Zxid(0))]
    return n, ch


def test_a_requests_frame_is_proposed_as_its_requests_in_order() -> None:
    pairs = ((7, b"a"), (8, b"b"), (9, b"c"))
    one, ch1 = established_leader()
    singles = [x for rid, v in pairs for x in sent(one.step(Received(ch1, m.Request(2, rid, v))))]
    batch, ch = established_leader()
    out = sent(batch.step(Received(ch, m.Requests(2, pairs))))
    assert out == singles == [
        m.Proposal(m.Txn(Zxid.of(4, i + 1), v, 2, rid)) for i, (rid, v) in enumerate(pairs)
    ]


def leader_syncing_3() -> tuple[Node, ChannelId, ChannelId]:
    """``established_leader`` with replica 3 joining: NEWLEADER sent, not yet acknowledged."""
    n, ch2 = established_leader()
    ch3 = ChannelId(3, 1, 0, 0)
    n.step(Received(ch3, m.FollowerInfo(3, 3, Zxid(0))))
    assert m.NewLeader(4, Zxid(0)) in sent(n.step(Received(ch3, m.AckEpoch(3, Zxid(0), True))))
    return n, ch2, ch3


def test_a_learner_still_syncing_has_init_limit_to_answer_a_synced_one_sync_limit() -> None:
    # As ZooKeeper's leader does. A learner installing a large SNAP cannot answer meanwhile; at
    # sync_limit it was dropped, and a tree that took longer to install than that never got in.
    n, ch2, ch3 = leader_syncing_3()
    for t in range(1, CFG.init_limit + 2):
        closed = [x.channel for x in n.step(Tick()) if isinstance(x, a.Close)]
        n.step(Received(ch2, m.Ping(Zxid(0))))  # replica 2 answers every ping; replica 3 none
        assert closed == ([ch3] if t == CFG.init_limit + 1 else []), t
    # Both silent: the synced learner goes at sync_limit, the syncing one is still given time.
    n, ch2, ch3 = leader_syncing_3()
    closes = [[x.channel for x in n.step(Tick()) if isinstance(x, a.Close)] for _ in range(CFG.sync_limit + 1)]
    assert closes[-1] == [ch2] and not any(closes[:-1])
