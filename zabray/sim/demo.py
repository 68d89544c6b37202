"""A short, readable simulated run: three replicas, writes, a leader crash, recovery."""

from __future__ import annotations

from zabray.protocol.zxid import fmt
from zabray.sim.simulator import SimOptions, Simulation


def simulated_demo(seed: int = 1, writes: int = 20) -> int:
    sim = Simulation(seed, SimOptions(voters=3, faults=(), fault_rate=0.0, client_rate=0.0,
                                      config=dict(max_outstanding=1000, diff_window=1000, diff_chunk=100)),
                     timeline=True)
    print("zabray demo (simulated): 3 replicas of the Zab core under a seeded scheduler\n")
    if not sim.settle(lambda: sim.leader() is not None):
        print("no leader was elected")
        return 1
    leader = sim.leader()
    assert leader is not None
    t0 = sim.ticks
    print(f"  leader elected: replica {leader} (epoch {sim.node(leader).current_epoch}) after {t0} ticks")
    for _ in range(writes):
        sim.submit(leader)
    sim.settle(lambda: sim.stats["acked"] >= writes)
    acked = set(sim.checker.acked)
    print(f"  {len(acked)} writes acknowledged, last {fmt(max(acked))}")
    sim.crash(leader, in_flight_arrives=False)
    crashed_at = sim.ticks
    print(f"  crashed the leader, replica {leader}, at tick {crashed_at}")
    ok = sim.settle(lambda: sim.leader() not in (None, leader))
    new = sim.leader()
    if not ok or new is None:
        print("  no new leader")
        return 1
    print(f"  new leader: replica {new} (epoch {sim.node(new).current_epoch}), "
          f"established {sim.ticks - crashed_at} ticks after the crash")
    sim.restart(leader)
    sim.settle(lambda: sim.node(leader).applied >= sim.node(new).applied)
    lost = [z for z in acked if z not in set(sim.delivered(new))]
    result = sim.finish()
    print(f"  replica {leader} restarted and caught up to {fmt(sim.node(leader).applied)}")
    print(f"  acknowledged writes lost: {len(lost)}; property violations: {len(result.violations)}")
    return 0 if result.ok and not lost else 1
