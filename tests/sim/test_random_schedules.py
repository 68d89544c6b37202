"""Thousands of seeded random schedules with crashes, restarts, partitions, channel breaks,
lost election messages and snapshots; every property is checked after every step and the
ensemble must recover once faults heal. ``ZABRAY_EXHAUSTIVE=1`` multiplies the seed counts.

A failure message names the seed; ``zabray sim --replicas N --seed S --timeline`` replays it.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from zabray.sim.replica import LOCAL_WORK
from zabray.sim.simulator import SimOptions, Simulation, run_seed
from zabray.sim.zksim import ZkSimulation

SCALE = 20 if os.environ.get("ZABRAY_EXHAUSTIVE") else 1
ALL = ("crash", "partition", "break", "snapshot", "drop")

SWEEPS = [
    # (voters, observers, faults, seeds)
    (3, 0, ALL, 800),
    (3, 0, ("crash",), 300),
    (3, 0, ("partition", "break", "drop"), 300),
    (5, 0, ALL, 300),
    (7, 0, ALL, 120),
    (3, 2, ALL, 300),
    (1, 1, ALL, 100),
]


@pytest.mark.parametrize("voters,observers,faults,seeds", SWEEPS,
                         ids=[f"{v}v{o}o-{'+'.join(f)}-{n}" for v, o, f, n in SWEEPS])
def test_random_schedules_keep_every_property(voters: int, observers: int, faults: tuple[str, ...],
                                              seeds: int, record_property) -> None:  # type: ignore[no-untyped-def]
    crash_points: Counter[str] = Counter()
    stats: Counter[str] = Counter()
    failures = []
    base = 1000 * voters + 100 * observers + len(faults)
    for seed in range(base, base + seeds * SCALE):
        r = run_seed(seed, SimOptions(voters=voters, observers=observers, faults=faults))
        crash_points.update(r.crash_points)
        stats.update(faults=sum(r.faults.values()), commits=r.committed, acked=r.acked, steps=r.steps)
        if not r.ok:
            failures.append(f"seed {seed}: {r.violations[0]}")
    record_property("crash_points", len(crash_points))
    record_property("stats", dict(stats))
    assert not failures, "\n".join(failures[:10])
    # The sweep must actually exercise the protocol, not idle.
    assert stats["acked"] > seeds * 5
    if "crash" in faults:
        assert stats["faults"] > seeds and len(crash_points) >= 20


def test_crash_points_cover_every_step_between_receiving_and_acknowledging() -> None:
    """Across a sweep, a follower dies after receiving each ack-bearing packet both before its
    write was made, after the write but before the fsync, and after the fsync but before it
    heard (so before the ACK left)."""
    seen: Counter[str] = Counter()
    for seed in range(300):
        seen.update(run_seed(seed, SimOptions(voters=3, faults=("crash",), fault_rate=0.03)).crash_points)
    points = " ".join(seen)
    for packet, write in [("LEADERINFO", "WriteAcceptedEpoch"), ("NEWLEADER", "WriteCurrentEpoch"),
                          ("PROPOSAL", "AppendTxns")]:
        assert "follower/" in points
        assert any(f"after receiving {packet}/{write}" in p for p in seen), f"no crash before writing for {packet}"
    assert any("written-not-synced" in p for p in seen)
    assert any("durable-not-acknowledged" in p for p in seen)


def test_a_seed_reproduces_exactly() -> None:
    opts = SimOptions(voters=5, observers=1)
    a = run_seed(4242, opts, timeline=True)
    b = run_seed(4242, opts, timeline=True)
    c = run_seed(4243, opts, timeline=True)
    assert a.timeline == b.timeline and a.crash_points == b.crash_points
    assert a.timeline != c.timeline


@pytest.mark.parametrize("service", ["broadcast", "zookeeper"])
def test_random_steps_take_every_kind_of_replica_work(service: str) -> None:
    """Each simulator's random steps, not only its fair rounds (warm-up, settling, the closing
    liveness check), write, fsync and report durability, encode and decode snapshot slices, and
    resume a core that yielded. Work only the fair rounds did would never fall between random
    faults and client calls. (The ZooKeeper simulator's random steps once did none of the last
    three.)"""
    base: type[Simulation] = Simulation if service == "broadcast" else ZkSimulation
    taken: Counter[str] = Counter()

    class Counting(base):  # type: ignore[misc, valid-type]
        def _work(self, kind: str, sid: int, rows: int | None = None) -> None:
            if rows is None:  # drawn by a random step; the fair rounds give a slice size
                taken[kind] += 1
            super()._work(kind, sid, rows)

    for seed in range(40):
        Counting(seed, SimOptions(voters=3, observers=1, steps=1500, faults=ALL + ("wipe",))).run()
    assert set(taken) == set(LOCAL_WORK), taken
