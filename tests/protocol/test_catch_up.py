"""A learner delivers a large backlog a chunk per step (``deliver_chunk``) and yields in
between (``Yield``, answered by ``Resumed`` at the shell's next loop turn), in order, so it
answers its leader between chunks. 100,000 ZooKeeper creates delivered in one step at UPTODATE
held a real learner 3.2 and 5.8 s in two runs, and its leader dropped it."""

from __future__ import annotations

from tests.protocol.test_ack_rules import sent
from zabray.protocol import actions as a
from zabray.protocol import messages as m
from zabray.protocol.durable import DurableState
from zabray.protocol.events import ChannelId, Notified, Persisted, Received, Resumed
from zabray.protocol.node import Node
from zabray.protocol.protocol_config import ProtocolConfig
from zabray.protocol.zxid import Zxid

CFG = ProtocolConfig(voters=frozenset({1, 2, 3}), deliver_chunk=3)
TXNS = tuple(m.Txn(Zxid.of(4, c), b"v%d" % c) for c in range(1, 11))


def delivered(out: list[a.Action]) -> list[Zxid]:
    return [x.txn.zxid for x in out if isinstance(x, a.Deliver)]


def yields(out: list[a.Action]) -> int:
    return sum(isinstance(x, a.Yield) for x in out)


def synced_by_a_long_diff() -> tuple[Node, ChannelId, list[a.Action]]:
    """Replica 2 following 1, synced by a DIFF of ten txns: the actions of its UPTODATE."""
    n = Node(2, CFG, DurableState())
    n.step(Notified(1, m.Notification(1, m.PeerState.LEADING, 1, 0, 0, 1)))
    out = n.step(Notified(3, m.Notification(3, m.PeerState.FOLLOWING, 1, 0, 0, 1)))
    (ch,) = [x.channel for x in out if isinstance(x, a.Open)]
    n.step(Received(ch, m.LeaderInfo(5)))
    n.step(Persisted(1))
    n.step(Received(ch, m.Diff(TXNS)))
    n.step(Received(ch, m.NewLeader(5, TXNS[-1].zxid)))
    n.step(Persisted(n.token))
    return n, ch, n.step(Received(ch, m.UpToDate(TXNS[-1].zxid)))


def test_a_backlog_is_delivered_a_chunk_per_step_in_order() -> None:
    n, ch, out = synced_by_a_long_diff()
    got = delivered(out)
    assert got == [t.zxid for t in TXNS[:3]] and yields(out) == 1
    # Between chunks the learner is itself: it answers a ping at once.
    assert sent(n.step(Received(ch, m.Ping(Zxid(0))))) == [m.Ping(TXNS[-1].zxid)]
    out = n.step(Received(ch, m.Commit(TXNS[-1].zxid)))  # a commit takes the next chunk too
    assert len(delivered(out)) == 3 and yields(out) == 0  # one Yield is out already
    got += delivered(out)
    while n.applied < TXNS[-1].zxid:
        out = n.step(Resumed())
        assert 0 < len(delivered(out)) <= CFG.deliver_chunk
        got += delivered(out)
        assert yields(out) == (n.applied < TXNS[-1].zxid)  # another turn while any is left
    assert got == [t.zxid for t in TXNS]


def test_a_commit_within_the_chunk_is_delivered_in_the_same_step() -> None:
    n, ch, _ = synced_by_a_long_diff()
    while n.applied < TXNS[-1].zxid:
        n.step(Resumed())
    out = n.step(Received(ch, m.Proposal(m.Txn(Zxid.of(5, 1), b"w"))))
    out = n.step(Received(ch, m.Commit(Zxid.of(5, 1))))
    assert delivered(out) == [Zxid.of(5, 1)] and yields(out) == 0
