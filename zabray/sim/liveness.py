"""The simulation's last check: once every fault is healed and every replica restarted, a leader
must be established and a new write committed on every replica within ``liveness_ticks``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zabray.sim.simulator import Simulation


def heal_and_check_liveness(sim: Simulation) -> None:
    sim.heal()
    sim._log("FINAL: heal all, restart all")
    for sid in sim.restartable():
        sim._start(sid)
    deadline = sim.ticks + sim.opt.liveness_ticks
    leader = None
    while sim.ticks < deadline and (not sim.checker.violations or not sim.opt.stop_on_violation):
        sim._calm_round()
        leader = sim._established_leader()
        if leader is not None:
            break
    if leader is None:
        sim.checker.step = sim.step_no
        sim.checker._fail("liveness", f"no leader established within {sim.opt.liveness_ticks} ticks of healing")
        return
    # Like a client: write through the current leader, and try again if that one fails
    # (not once it committed: then wait for every replica to apply it, even under load).
    done = False
    sub: tuple[int, int] | None = None
    while sim.ticks < deadline and not done and (not sim.checker.violations or not sim.opt.stop_on_violation):
        leader = sim._established_leader()
        if leader is not None and (sub is None or (sub not in sim.pending_requests and sub not in sim.committed_at)):
            sub = (leader, sim.next_request)
            sim._submit(leader)
        sim._calm_round()
        zxid = sim.committed_at.get(sub) if sub is not None else None
        done = zxid is not None and all(
            r.node is not None and r.node.applied >= zxid for r in sim.replicas.values()
            if not r.departed and r.incarnation >= 0)
    if not done:
        sim.checker._fail("liveness", f"no write committed on every replica within "
                          f"{sim.opt.liveness_ticks} ticks of healing")
