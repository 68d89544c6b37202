"""A simulated schedule replayed on a real 3-replica ensemble (real Ray, TCP, fsync):
``zabray sim --seed 4 --steps 300 --faults crash,partition --fault-rate 0.02 --export-scenario``
(a kill, a restart from disk while partitioned, two partitions, heals, 28 writes) exported and
run by ``zabray.driver.scenario``.

What "the same final history" can and cannot mean between the simulated run and the live one:

- it cannot mean the same zxids, nor the same set of committed txns: the live scheduler decides
  message, disk and election order, so epochs differ, a kill strikes wherever the live process
  is, and a write the simulation left pending (or saw acknowledged only after a later fault) may
  or may not commit live (the scenario runs those in the background, ``may_fail``);
- it does mean: every value the live run committed is one of the simulation's writes (nothing
  invented), every write the live run acknowledged is committed on every replica, the replicas
  agree with each other, and the writes the simulation acknowledged within their phase (the
  scenario's foreground writes) are all committed live, in their submission order, which the
  live run follows one write at a time, and all committed in the simulation too. The
  simulation need not have committed them in that order: a write a follower forwarded can
  commit after one submitted later at the leader (seed 4 did, once the simulator's learners
  delivered in chunks).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zabray.driver.scenario import run
from zabray.replay.scenario import load
from zabray.sim.export import RecordingSimulation, write
from zabray.sim.simulator import SimOptions
from zabray.trace.files import fault_rows
from zabray.trace.records import digest

pytestmark = pytest.mark.ray

SEED = 4
OPTIONS = dict(steps=300, faults=("crash", "partition"), fault_rate=0.02)


def test_an_exported_simulation_replays_on_a_real_ensemble(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / f"sim-seed-{SEED}.yaml"
    ex = write(path, SEED, SimOptions(**OPTIONS))  # type: ignore[arg-type]
    assert ex.kills >= 1 and ex.restarts >= 1 and ex.writes <= 30
    sc = load(path)
    ens = start(sc.replicas, **dict(sc.config))
    ens.wait_for_leader(30)
    lines: list[str] = []
    result = run(ens, sc, out=lines.append, check=False)
    assert result.ok, "\n".join(list(result.problems) + lines[-20:])  # no loss, histories agree, no loop

    # every kill and restart reached the real replicas, in the scenario's order
    faults = [(r["fault"], r.get("target")) for r in fault_rows(ens.info["run_dir"]) if r["fault"] in ("kill", "restart")]
    assert [f for f, _ in faults] == [s.kind for s in sc.steps if s.kind in ("kill", "restart")], faults

    # the replicas agree: the same values at the same zxids, over what each holds
    hist = ens.histories()
    assert len(hist) == 3
    low = max(h[0][0] for h in hist.values() if h)
    views = {sid: [(z, d) for z, d in h if z >= low] for sid, h in hist.items()}
    assert len({tuple(v) for v in views.values()}) == 1, views
    live = next(iter(views.values()))
    live_digests = [d for _, d in live]

    # nothing invented: every committed value is one of the simulation's writes (or the scenario's)
    sim_values = {digest(f"s{SEED}-r{i}".encode()): f"s{SEED}-r{i}" for i in range(1, ex.writes + 1)}
    assert set(live_digests) <= set(sim_values), "a committed value the simulation never wrote"
    # every write the live run acknowledged is committed (on every replica: checked by result.ok)
    assert result.acked and {d for d in result.acked.values()} <= set(d for h in hist.values() for _, d in h)

    # the writes the simulation acknowledged within their phase: all committed live, in the
    # scenario's order, and all committed in the simulation
    foreground = [s.arg("value") for s in sc.steps if s.kind == "write" and not s.arg("background")]
    sim = RecordingSimulation(SEED, SimOptions(**OPTIONS))  # type: ignore[arg-type]
    sim.run()
    want = {digest(v.encode()): v for v in foreground}
    sim_order = [want[d] for _, d in sim.checker.G if d in want]
    all_live = [d for h in hist.values() for _, d in h]
    live_order = [sim_values[d] for d in dict.fromkeys(d for _, d in max(hist.values(), key=len))
                  if d in want]
    assert set(want) <= set(all_live)
    assert live_order == foreground and sorted(sim_order) == sorted(foreground)
