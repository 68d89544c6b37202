"""Dynamic reconfiguration in the simulator: random membership changes under crashes, partitions,
restarts and wipes, scripted ones (grow, shrink, hand the leadership over), and the planted bugs
the checker must catch (``zabray.sim.checker``: a quorum of the old and of the new configuration
holds every reconfiguration when it commits, a configuration is the same everywhere, a leader
that gave up its vote proposes nothing more; plus every property of Zab's, and liveness once
everything heals).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest

from zabray.protocol import leader
from zabray.protocol.leader import Leader
from zabray.protocol.membership import OBSERVER, ConfigChange
from zabray.protocol.node import Node
from zabray.sim import reconfig
from zabray.sim.simulator import SimOptions, Simulation, run_seed

RECONFIG = ("crash", "partition", "break", "snapshot", "reconfig")
SWEEPS = [
    # (voters, observers, faults, first seed, seeds)
    (3, 0, RECONFIG, 100, 100),
    (5, 1, (*RECONFIG, "drop", "wipe"), 500, 50),
]


@pytest.mark.parametrize("voters,observers,faults,base,seeds", SWEEPS,
                         ids=[f"{v}v{o}o-{'+'.join(f)}-{n}" for v, o, f, _, n in SWEEPS])
def test_random_reconfigurations_keep_every_property(voters: int, observers: int, faults: tuple[str, ...],
                                                     base: int, seeds: int) -> None:
    stats: Counter[str] = Counter()
    failures = []
    for seed in range(base, base + seeds):
        r = run_seed(seed, SimOptions(voters=voters, observers=observers, faults=faults, fault_rate=0.02))
        stats.update(r.faults)
        if not r.ok:
            failures.append(f"seed {seed}: {r.violations[0]}")
    assert not failures, "\n".join(failures[:10])
    # The sweep must exercise reconfiguration, refusals included, not idle.
    assert stats["reconfig-committed"] >= seeds // 3, stats
    assert stats["join"] >= seeds and stats["departed"] >= seeds // 10, stats
    assert stats["reconfig-NEW_CONFIG_NO_QUORUM"] > 0 and stats["reconfig-BAD_VERSION"] > 0, stats


def test_seeds_without_reconfiguration_are_untouched_by_it() -> None:
    """The ``reconfig`` fault off: no spare replica, no configuration txn, nothing enabled."""
    sim = Simulation(7, SimOptions(voters=3))
    assert sorted(sim.replicas) == [1, 2, 3] and not sim.cfg.reconfig_enabled
    r = sim.run()
    assert r.ok and not sim.checker.configs


# -- scripted ---------------------------------------------------------------------------------


def _quiet(voters: int = 3, **kw: Any) -> Simulation:
    """A simulation with reconfiguration on and no random faults: the test drives it."""
    sim = Simulation(1, SimOptions(voters=voters, faults=("reconfig",), fault_rate=0.0, client_rate=0.0,
                                   spares=4, **kw))
    assert sim.settle(lambda: sim.leader() is not None)
    return sim


def _synced(sim: Simulation, sid: int) -> bool:
    lead = sim.leader()
    if lead is None:
        return False
    role = sim.node(lead).role
    h = role.learners.get(sid) if isinstance(role, Leader) else None
    return h is not None and h.stage == leader.Stage.ACTIVE


def _reconfigure(sim: Simulation, change: ConfigChange) -> int:
    """Submit ``change`` at the leader and run until it is answered; its zxid."""
    lead = sim.leader()
    assert lead is not None
    rid = reconfig.submit(sim, lead, change, "test")
    assert sim.settle(lambda: (lead, rid) in sim.committed_at or (lead, rid) not in sim.pending_requests)
    assert (lead, rid) in sim.committed_at, sim.timeline[-20:]
    return sim.committed_at[(lead, rid)]


def _write(sim: Simulation) -> None:
    lead = sim.leader()
    assert lead is not None
    rid = sim.submit(lead)
    assert sim.settle(lambda: (lead, rid) in sim.committed_at)


def test_a_new_configuration_needs_a_synced_quorum_of_its_own() -> None:
    """Replacing two of three voters by two joiners: refused (NEW_CONFIG_NO_QUORUM) until the
    joiners are synced, as non-voting followers; then committed, and the leader's quorum is
    the new one's. (ZooKeeper's rule: a quorum of the new configuration connected and synced.)"""
    sim = _quiet()
    for _ in range(5):
        _write(sim)
    reconfig.join(sim, 4)
    reconfig.join(sim, 5)
    lead = sim.leader()
    assert lead is not None
    keep = max(s for s in (1, 2, 3) if s != lead)  # the leader goes too: a hand-over
    gone = sorted({1, 2, 3} - {keep})
    change = ConfigChange(leaving=",".join(map(str, gone)),
                          joining=f"{reconfig.spec(4, 'participant')},{reconfig.spec(5, 'participant')}")
    rid = reconfig.submit(sim, lead, change, "early")  # 4 and 5 have not even connected
    sim.settle(lambda: (lead, rid) not in sim.pending_requests)
    assert sim.fault_counts["reconfig-NEW_CONFIG_NO_QUORUM"] == 1
    assert sim.settle(lambda: _synced(sim, 4) and _synced(sim, 5))
    z = _reconfigure(sim, change)
    assert sim.settle(lambda: sim.leader() in (keep, 4, 5) and all(sim.replicas[s].departed for s in gone))
    for s in (keep, 4, 5):
        assert sim.node(s).config.version == z and sim.node(s).config.voters == {keep, 4, 5}
    _write(sim)
    assert sim.finish().ok


def test_growing_3_to_5_and_back() -> None:
    sim = _quiet()
    _write(sim)
    reconfig.join(sim, 4)
    reconfig.join(sim, 5)
    assert sim.settle(lambda: _synced(sim, 4) and _synced(sim, 5))
    grow = _reconfigure(sim, ConfigChange(joining=f"{reconfig.spec(4, 'participant')},"
                                                  f"{reconfig.spec(5, 'participant')}"))
    assert sim.settle(lambda: all(sim.node(s).config.version == grow for s in range(1, 6)))
    _write(sim)
    shrink = _reconfigure(sim, ConfigChange(leaving="4,5"))
    assert sim.settle(lambda: all(sim.node(s).config.version == shrink for s in range(1, 4))
                      and sim.replicas[4].departed and sim.replicas[5].departed)
    _write(sim)
    assert sim.finish().ok


def test_removing_the_leader_hands_over_without_an_election() -> None:
    sim = _quiet(voters=5)
    _write(sim)
    old = sim.leader()
    assert old is not None
    iterations = {s: sim.node(s).iteration for s in range(1, 6)}
    z = _reconfigure(sim, ConfigChange(leaving=str(old)))
    assert sim.settle(lambda: sim.leader() not in (None, old) and sim.replicas[old].departed)
    new = sim.leader()
    assert new is not None and new in sim.node(new).config.voters
    assert sim.node(new).config.version == z
    # The designated leader took over directly: from following the old leader to leading, one
    # iteration, with no election between (which would have been another).
    assert sim.node(new).iteration == iterations[new] + 1
    _write(sim)
    r = sim.finish()
    assert r.ok, r.violations


def test_role_changes_and_a_leader_crash_mid_reconfiguration() -> None:
    sim = _quiet(voters=5)
    _write(sim)
    lead = sim.leader()
    assert lead is not None
    follower = min(s for s in range(1, 6) if s != lead)
    z = _reconfigure(sim, ConfigChange(joining=reconfig.spec(follower, OBSERVER)))
    assert sim.settle(lambda: sim.node(follower).is_observer and sim.node(follower).config.version == z)
    # Back to a voter; the leader dies right after proposing it, before anyone acknowledged it.
    reconfig.submit(sim, lead, ConfigChange(joining=reconfig.spec(follower, "participant")), "voter again")
    sim.crash(lead, in_flight_arrives=True)
    assert sim.settle(lambda: sim.leader() not in (None, lead))
    sim.restart(lead)
    _write(sim)
    r = sim.finish()
    assert r.ok, r.violations


# -- planted bugs: the checker must catch each ------------------------------------------------


def _first_violation(seeds: range, **opts: Any) -> str | None:
    for seed in seeds:
        r = run_seed(seed, SimOptions(voters=3, faults=RECONFIG, fault_rate=0.02, **opts))
        if r.violations:
            return f"seed {seed}: {r.violations[0]}"
    return None


def _old_quorum_only(self: Leader) -> Any:
    """Commits (and so activates) a reconfiguration once the *old* configuration's quorum has
    acknowledged it, whatever the new one's voters hold."""
    n = self.node
    acks = {s: h.acked for s, h in self.learners.items() if not h.observer and h.stage == leader.Stage.ACTIVE}
    acks[n.sid] = self.self_acked
    return self._point(n.quorum_configs()[0], acks)


def test_activating_before_the_new_quorum_acked_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Leader, "_commit_point", _old_quorum_only)
    found = _first_violation(range(60))
    assert found is not None and "quorum of the new configuration" in found, found


def test_a_removed_leader_that_keeps_proposing_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Leader, "_step_aside", lambda self, designated: None)
    found = _first_violation(range(100))
    assert found is not None and "hand-off" in found, found


class ForgetsItsConfiguration(Node):
    """Restarts under its static configuration, as if the configuration file were never read:
    it counts votes and acks under a configuration it has not durably learned."""

    def __init__(self, sid: int, cfg: Any, durable: Any, **kw: Any) -> None:
        kw["join"] = True  # (it may not be in its static configuration)
        super().__init__(sid, cfg, dataclasses.replace(durable, config=None, left=False), **kw)


def test_a_replica_that_forgets_its_configuration_on_restart_is_caught() -> None:
    found = _first_violation(range(100), node_factory=ForgetsItsConfiguration)
    assert found is not None and any(p in found for p in ("durability", "agreement", "quorum")), found
