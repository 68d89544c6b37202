"""A core built without tracing does the same protocol work and only skips its trace records
(and the per-txn digests they carry): turning tracing off must never change what a replica
sends, persists or delivers."""

from __future__ import annotations

from zabray.protocol import actions as a
from zabray.protocol import messages as m
from zabray.protocol.durable import DurableState
from zabray.protocol.events import Event, Notified, Persisted, Received, Submit
from zabray.protocol.node import Node
from zabray.protocol.protocol_config import ProtocolConfig
from zabray.protocol.zxid import Zxid

CFG = ProtocolConfig(voters=frozenset({1, 2, 3}))


def run(sid: int, events: list[Event], *, tracing: bool) -> list[a.Action]:
    n = Node(sid, CFG, DurableState(), tracing=tracing)
    out: list[a.Action] = []
    for e in events:
        out += n.step(e)
    return out


def follower_events() -> list[Event]:
    """Replica 2 joins leader 1, syncs, then accepts and commits two proposals."""
    n = Node(2, CFG, DurableState())
    n.step(Notified(1, m.Notification(1, m.PeerState.LEADING, 1, 0, 0, 1)))
    (ch,) = [x.channel for x in n.step(Notified(3, m.Notification(3, m.PeerState.FOLLOWING, 1, 0, 0, 1)))
             if isinstance(x, a.Open)]
    t1, t2 = m.Txn(Zxid.of(5, 1), b"a"), m.Txn(Zxid.of(5, 2), b"b")
    return [Notified(1, m.Notification(1, m.PeerState.LEADING, 1, 0, 0, 1)),
            Notified(3, m.Notification(3, m.PeerState.FOLLOWING, 1, 0, 0, 1)),
            Received(ch, m.LeaderInfo(5)), Persisted(1),
            Received(ch, m.NewLeader(5, Zxid(0))), Persisted(2), Received(ch, m.UpToDate(Zxid(0))),
            Received(ch, m.Proposal(t1)), Received(ch, m.Proposal(t2)), Persisted(4),
            Received(ch, m.Commit(t2.zxid)), Submit(7, b"c")]


def test_a_follower_without_tracing_acts_the_same_minus_its_trace() -> None:
    events = follower_events()
    on, off = run(2, events, tracing=True), run(2, events, tracing=False)
    assert [x for x in on if not isinstance(x, a.Trace)] == off
    kinds = {type(x.record).__name__ for x in on if isinstance(x, a.Trace)}
    assert {"StateChange", "Delivered"} <= kinds  # the traced run did trace, deliveries included
    assert sum(isinstance(x, a.Deliver) for x in off) == 2
