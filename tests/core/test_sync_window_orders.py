"""The exact message orders of ZOOKEEPER-4394 and ZOOKEEPER-4685, fed to one core by hand.

On a real ensemble zabray never produces them (configs/scenarios replays the nearest orders it
allows; docs/replay.md, "The two sync-window bugs in detail"): its leader sends no COMMIT
between NEWLEADER and UPTODATE, and its follower's ACKs leave after its ACK of NEWLEADER on one
FIFO channel. Here each side gets the exact order anyway, to pin down what it would do: the
learner takes a COMMIT inside its sync window without delivering early or twice (4394), and the
leader ignores an ACK from a learner still syncing instead of giving up leadership (4685)."""

from __future__ import annotations

from zabray.protocol import actions as a
from zabray.protocol import messages as m
from zabray.protocol.durable import DurableState
from zabray.protocol.events import ChannelId, Notified, Persisted, Received, Submit
from zabray.protocol.node import Node
from zabray.protocol.protocol_config import ProtocolConfig
from zabray.protocol.zxid import Zxid

CFG = ProtocolConfig(voters=frozenset({1, 2, 3}))


def sent(out: list[a.Action]) -> list[m.Message]:
    return [x.msg for x in out if isinstance(x, a.Send)]


def delivered(out: list[a.Action]) -> list[Zxid]:
    return [x.txn.zxid for x in out if isinstance(x, a.Deliver)]


def test_4394_a_commit_between_newleader_and_uptodate() -> None:
    n = Node(2, CFG, DurableState())
    n.step(Notified(1, m.Notification(1, m.PeerState.LEADING, 1, 0, 0, 1)))
    out = n.step(Notified(3, m.Notification(3, m.PeerState.FOLLOWING, 1, 0, 0, 1)))
    ch = next(x.channel for x in out if isinstance(x, a.Open))
    n.step(Received(ch, m.LeaderInfo(5)))
    n.step(Persisted(1))
    out = n.step(Received(ch, m.NewLeader(5, Zxid(0))))
    p = Zxid.of(5, 1)
    out += n.step(Received(ch, m.Proposal(m.Txn(p, b"during sync"))))
    out += n.step(Received(ch, m.Commit(p)))  # ZooKeeper's exact order: COMMIT inside the window
    assert delivered(out) == [] and n.state == m.PeerState.FOLLOWING  # nothing before UPTODATE, no error
    tokens = [x.token for x in out if isinstance(x, a.Persist)]
    acks = sent(n.step(Persisted(max(tokens))))
    assert acks == [m.AckNewLeader(5, Zxid(0)), m.Ack(p)]  # in this order, once durable
    out = n.step(Received(ch, m.UpToDate(p)))
    assert delivered(out) == [p]  # delivered once, at UPTODATE
    assert delivered(n.step(Received(ch, m.Commit(p)))) == []  # a repeated COMMIT changes nothing


def test_4685_an_ack_before_the_ack_of_newleader() -> None:
    n = Node(1, CFG, DurableState(accepted_epoch=3, current_epoch=3))
    n.step(Notified(2, m.Notification(2, m.PeerState.LOOKING, 1, 0, 3, 1)))
    n.step(Notified(3, m.Notification(3, m.PeerState.LOOKING, 1, 0, 3, 1)))
    assert n.state == m.PeerState.LEADING
    c2, c3 = ChannelId(2, 1, 0, 0), ChannelId(3, 1, 0, 0)
    token = 0

    def step(ev: object) -> list[a.Action]:
        nonlocal token
        out = n.step(ev)  # type: ignore[arg-type]
        token = max([token] + [x.token for x in out if isinstance(x, a.Persist)])
        return out

    step(Received(c2, m.FollowerInfo(2, 3, Zxid(0))))
    step(Persisted(token))
    step(Received(c2, m.AckEpoch(3, Zxid(0), True)))
    step(Persisted(token))
    out = step(Received(c2, m.AckNewLeader(4, Zxid(0))))
    assert m.UpToDate(Zxid(0)) in sent(out)  # established with 2
    step(Received(c3, m.FollowerInfo(3, 3, Zxid(0))))
    out = step(Received(c3, m.AckEpoch(3, Zxid(0), True)))
    assert sent(out)[-1] == m.NewLeader(4, Zxid(0))  # 3 is syncing
    p = Zxid.of(4, 1)
    out = step(Submit(7, b"w"))
    assert [x.channel for x in out if isinstance(x, a.Send) and isinstance(x.msg, m.Proposal)] == [c2, c3]
    out = step(Received(c3, m.Ack(p)))  # ZooKeeper's exact order: ACK(p) before ACK of NEWLEADER
    assert n.state == m.PeerState.LEADING and a.Close(c3) not in out and sent(out) == []  # ignored, no step-down
    out = step(Persisted(token))
    out += step(Received(c2, m.Ack(p)))
    assert (c2, m.Commit(p)) in [(x.channel, x.msg) for x in out if isinstance(x, a.Send)]  # 1 and 2 commit p
    out = step(Received(c3, m.AckNewLeader(4, Zxid(0))))
    assert [(x.channel, x.msg) for x in out if isinstance(x, a.Send)] == [(c3, m.UpToDate(p))]  # p committed for 3
    assert n.state == m.PeerState.LEADING and n.current_epoch == 4
