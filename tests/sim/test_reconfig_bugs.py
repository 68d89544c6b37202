"""ZooKeeper's recorded reconfiguration bugs, replayed in the simulator where they apply to zabray.

Each test scripts the interleaving the bug needed and runs with the checker on (every property
after every step, then liveness once healed). Bugs of ZooKeeper's that cannot happen here, and
why, are listed in docs/reconfiguration.md: ZOOKEEPER-2080 (a deadlock between QuorumPeer's
locks: the core is one single-threaded state machine), ZOOKEEPER-2164 (servers could not rejoin
through a wildcard election address: zabray's replicas dial the address book the controller
publishes), ZOOKEEPER-3829 (membership changed by rolling restarts with new static files:
zabray's membership changes only by reconfiguration txns; ZooKeeper's fix also made a
configuration file override what the log said, which zabray has no file to do).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from zabray.protocol import leader
from zabray.protocol.leader import Leader
from zabray.protocol.learner import Learner
from zabray.protocol.learner import Stage as LearnerStage
from zabray.protocol.membership import PARTICIPANT, ConfigChange, Membership
from zabray.sim import reconfig
from zabray.sim.replica import SimReplica
from zabray.sim.simulator import SimOptions, Simulation


def _quiet(voters: int = 3, **kw: Any) -> Simulation:
    sim = Simulation(1, SimOptions(voters=voters, faults=("reconfig",), fault_rate=0.0, client_rate=0.0,
                                   spares=3, **kw))
    assert sim.settle(lambda: sim.leader() is not None)
    return sim


def _write(sim: Simulation) -> None:
    lead = sim.leader()
    assert lead is not None
    rid = sim.submit(lead)
    assert sim.settle(lambda: (lead, rid) in sim.committed_at), sim.timeline[-30:]


def _leader_role(sim: Simulation) -> Leader:
    lead = sim.leader()
    assert lead is not None
    role = sim.node(lead).role
    assert isinstance(role, Leader)
    return role


def _stage(sim: Simulation, sid: int) -> leader.Stage | None:
    h = _leader_role(sim).learners.get(sid)
    return None if h is None else h.stage


def test_zookeeper_2172_a_reconfiguration_committed_while_a_joiner_syncs(monkeypatch: pytest.MonkeyPatch) -> None:
    """ZOOKEEPER-2172 ("Cluster crashes when reconfig a new node as a participant"): the
    reconfiguration's PROPOSAL and COMMITANDACTIVATE reached a joining server between its
    snapshot and UPTODATE, and it never activated the configuration that made it a voter (its
    next-config file stayed, and the cluster later crashed). Here: the joiner has NEWLEADER but
    its disk is held, so it has not acknowledged it, while the reconfiguration adding it commits
    without it (the old members are a quorum of the new configuration). Once its disk goes on, it
    delivers the reconfiguration with the rest at UPTODATE and has it in force, as a voter."""
    sim = _quiet()
    for _ in range(3):
        _write(sim)
    held = {4}
    ready = SimReplica.ready

    def slow_disk(self: SimReplica, kind: str) -> bool:
        """The joiner's disk stops once it has NEWLEADER (before its acknowledgement can go)."""
        role = self.node.role if self.node is not None else None
        if (self.sid in held and kind in ("write", "fsync", "tell") and isinstance(role, Learner)
                and role.stage >= LearnerStage.NEWLEADER):
            return False
        return ready(self, kind)

    monkeypatch.setattr(SimReplica, "ready", slow_disk)
    reconfig.join(sim, 4)
    assert sim.settle(lambda: _stage(sim, 4) == leader.Stage.SYNCING)  # NEWLEADER sent, not acknowledged
    lead = sim.leader()
    assert lead is not None
    rid = reconfig.submit(sim, lead, ConfigChange(joining=reconfig.spec(4, PARTICIPANT)), "add the joiner")
    assert sim.settle(lambda: (lead, rid) in sim.committed_at)
    z = sim.committed_at[(lead, rid)]
    assert _stage(sim, 4) == leader.Stage.SYNCING and sim.node(4).config.version < z  # not yet
    held.clear()
    assert sim.settle(lambda: sim.node(4).config.version == z and not sim.node(4).is_observer)
    assert 4 in sim.node(4).config.voters and sim.node(4).votes
    _write(sim)
    assert sim.finish().ok


def test_zookeeper_2746_the_designated_leader_fails_before_it_leads() -> None:
    """ZOOKEEPER-2746: after a reconfiguration removing the leader, a test checked that the
    designated leader led; it may not (it can fail to gather its quorum during sync), since the
    designation is a best effort, not a promise. Here the designated leader crashes the moment
    the hand-off commits: the others must find another leader of the new configuration by
    election, and lose nothing."""
    sim = _quiet(voters=5)
    _write(sim)
    old = sim.leader()
    assert old is not None
    lead_role = _leader_role(sim)
    designate = Leader._designate

    crashed: list[int] = []

    def designate_then_crash(self: Leader, txn: Any) -> int:
        d = designate(self, txn)
        if d != self.node.sid and not crashed:
            crashed.append(d)
        return d

    Leader._designate = designate_then_crash  # type: ignore[method-assign]
    try:
        rid = reconfig.submit(sim, old, ConfigChange(leaving=str(old)), "remove the leader")
        assert sim.settle(lambda: bool(crashed))
        sim.crash(crashed[0], in_flight_arrives=False)
    finally:
        Leader._designate = designate  # type: ignore[method-assign]
    assert lead_role.handing_over == crashed[0]
    assert sim.settle(lambda: sim.leader() not in (None, old, crashed[0]), max_ticks=300), sim.timeline[-40:]
    assert (old, rid) in sim.committed_at or (old, rid) not in sim.pending_requests
    sim.restart(crashed[0])
    _write(sim)
    r = sim.finish()
    assert r.ok, r.violations


def test_a_leader_that_dies_with_a_reconfiguration_in_flight_is_not_forgotten() -> None:
    """The bug jraft's issue #1 records (a removeServer accepted, the leader dead before it
    committed, the change lost on restart), which ZooKeeper's last-seen configuration prevents:
    a reconfiguration in a replica's log that may have committed must be honoured by whoever
    leads next. Here the leader proposes removing two voters and dies once one follower holds it
    durably; that follower has the proposal pending and counts quorums of both the old and the
    new configuration, and every replica ends with the same configuration, whichever way it
    went."""
    sim = _quiet(voters=5)
    _write(sim)
    lead = sim.leader()
    assert lead is not None
    others = [s for s in range(1, 6) if s != lead]
    change = ConfigChange(leaving=",".join(map(str, others[2:])))  # two of the followers
    reconfig.submit(sim, lead, change, "remove two")
    pending = [lambda s=s: any(t.config is not None for t in sim.replicas[s].store.log) for s in others]
    assert sim.settle(lambda: any(p() for p in pending))
    sim.crash(lead, in_flight_arrives=False)
    holder = next(s for s, p in zip(others, pending, strict=True) if p())
    assert len(sim.node(holder).quorum_configs()) == 2  # old and new must both agree now
    assert sim.settle(lambda: sim.leader() is not None, max_ticks=300)
    sim.restart(lead)
    _write(sim)
    r = sim.finish()
    assert r.ok, r.violations
    versions = {sim.node(s).config.version for s in range(1, 6) if sim.replicas[s].node is not None
                and not sim.replicas[s].departed}
    assert len(versions) == 1


def test_zookeeper_1783_a_joiners_initial_configuration_does_not_pass_for_the_established_one() -> None:
    """ZOOKEEPER-1783 ("Distinguish initial configuration from first established configuration"):
    a joining server's initial configuration (a partial view listing itself) and the ensemble's
    first configuration both had version 0, so one could be taken for the other. Here the
    ensemble's configuration was committed (a version above 0) and a joiner starts with a
    static configuration that lists itself as a voter with one member missing: it must take the
    committed configuration from its peers, not count under its own, and not disturb the leader."""
    sim = _quiet()
    lead = sim.leader()
    assert lead is not None
    rid = reconfig.submit(sim, lead, ConfigChange(), "commit the configuration as it is")
    assert sim.settle(lambda: (lead, rid) in sim.committed_at)
    version = sim.committed_at[(lead, rid)]
    # The joiner's own view: itself a voter, member 3 missing, version 0.
    static = sim.cfg
    sim.cfg = dataclasses.replace(static, voters=frozenset({1, 2, 4}))
    reconfig.join(sim, 4)
    sim.cfg = static
    assert sim.settle(lambda: sim.node(4).config.version == version)
    assert sim.node(4).config == Membership.parse(sim.node(1).config.text())
    assert sim.leader() == lead and 4 not in sim.node(lead).config.sids
    _write(sim)
    assert sim.finish().ok
