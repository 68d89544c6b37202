"""``zabray sim --export-scenario`` without Ray: a simulated schedule becomes a scenario that
validates (``zabray.replay.scenario``), whose steps carry the simulation's faults in order and its
writes (values and target replicas) in submission order, with a timeout on every wait, and whose
recording does not change the simulated run."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from zabray.cli.main import main as cli_main
from zabray.errors import ConfigError
from zabray.replay.scenario import load, parse
from zabray.sim.export import RecordingSimulation, export
from zabray.sim.simulator import SimOptions, run_seed

SHORT = dict(steps=300, faults=("crash", "partition"), fault_rate=0.02)
SEEDS = [0, 2, 3, 4, 5, 11]


def kinds(steps: list[dict[str, Any]]) -> list[str]:
    return [next(iter(s)) for s in steps]


@pytest.mark.parametrize("seed", SEEDS)
def test_exported_seed_validates_and_carries_the_faults(seed: int) -> None:
    ex = export(seed, SimOptions(**SHORT))  # type: ignore[arg-type]
    sc = parse(yaml.safe_load(ex.yaml()))
    assert sc.name == f"sim-seed-{seed}" and sc.replicas == 3 and sc.notes
    faults = ex.result.faults
    steps = [s.kind for s in sc.steps]
    # every simulated crash is a kill; every restart (the final liveness phase's included) a restart
    assert steps.count("kill") == faults["crash"] == ex.kills
    sim = RecordingSimulation(seed, SimOptions(**SHORT))  # type: ignore[arg-type]
    sim.run()
    final_restarts = len([e for e in sim.events[[e.kind for e in sim.events].index("final"):] if e.kind == "restart"])
    assert steps.count("restart") == faults["restart"] + final_restarts == ex.restarts
    assert steps.count("partition") == faults["partition"]
    heals = faults["heal"] + (1 if any(e.kind == "final" and e.groups for e in sim.events) else 0)
    assert steps.count("heal") == heals
    # the faults in the simulated order
    order = [e.kind for e in sim.events if e.kind in ("kill", "restart", "partition", "heal")]
    assert [k for k in steps if k in ("kill", "restart", "partition")] == [k for k in order if k != "heal"]
    # the writes: the simulator's values, aimed where it aimed them, in submission order
    writes = [s for s in sc.steps if s.kind == "write"]
    sim_writes = [e for e in sim.events if e.kind == "write"]
    assert [(w.arg("value"), w.arg("replica")) for w in writes] == \
        [(f"s{seed}-r{e.request}", e.sid) for e in sim_writes]
    # a write the simulation acknowledged in its phase runs in the foreground; the rest may fail
    for w, e in zip(writes, sim_writes, strict=True):
        o = sim.outcomes.get(e.request)
        acked_in_phase = o is not None and o.outcome == "ok" and o.faults_before == e.phase
        assert w.arg("background") is not acked_in_phase and bool(w.arg("may_fail")) is not acked_in_phase
    # every kill is followed by a wait until the replica is down; every restart until it is alive
    for i, s in enumerate(sc.steps):
        if s.kind == "kill":
            nxt = sc.steps[i + 1]
            assert nxt.condition is not None and nxt.condition.what == "down" and nxt.condition.arg("sid") == s.arg("sid")
        if s.kind == "restart":
            nxt = sc.steps[i + 1]
            assert nxt.condition is not None and nxt.condition.what == "alive"
            assert not s.arg("fresh")  # the simulator restarts from what was durable
    assert all(0 < s.timeout <= 30 for s in sc.steps if s.kind == "wait")
    if ex.result.ok:
        assert sc.steps[-1].condition is not None and sc.steps[-1].condition.what == "converged"
    assert any("not carried over" in n for n in sc.notes)
    assert len([n for n in sc.notes if "crashed as" in n]) == ex.kills


def test_recording_does_not_change_the_run() -> None:
    for seed in SEEDS[:3]:
        a = run_seed(seed, SimOptions(**SHORT))  # type: ignore[arg-type]
        b = RecordingSimulation(seed, SimOptions(**SHORT)).run()  # type: ignore[arg-type]
        assert (a.steps, a.ticks, a.acked, a.committed, a.deliveries, dict(a.faults)) == \
            (b.steps, b.ticks, b.acked, b.committed, b.deliveries, dict(b.faults))


def test_the_same_seed_exports_the_same_file() -> None:
    one = export(4, SimOptions(**SHORT)).yaml()  # type: ignore[arg-type]
    assert one == export(4, SimOptions(**SHORT)).yaml()  # type: ignore[arg-type]


def test_wait_conditions_follow_the_phases() -> None:
    # seed 4 (3 voters, 300 steps): a kill, a restart in a partition, heals; the restarted
    # replica followed in the simulation before the next fault, so the scenario waits for it
    ex = export(4, SimOptions(**SHORT))  # type: ignore[arg-type]
    steps = ex.scenario["steps"]
    i = kinds(steps).index("restart")
    assert steps[i + 1] == {"wait": {"alive": steps[i]["restart"], "timeout": 30}}
    assert steps[i + 2]["wait"]["state"] == {"sid": steps[i]["restart"], "is": ["FOLLOWING", "LEADING"]}
    assert ex.kills >= 1 and ex.restarts >= 1 and ex.writes <= 30


def test_cli_exports_a_file_scenario_validate_accepts(tmp_path: Path) -> None:
    path = tmp_path / "s4.yaml"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli_main(["sim", "--seed", "4", "--steps", "300", "--faults", "crash,partition", "--fault-rate", "0.02",
                       "--export-scenario", str(path)])
    assert rc == 0, out.getvalue()
    assert re.search(r"\b[1-9]\d* kill\(s\)", out.getvalue()) and f"zabray scenario run {path}" in out.getvalue()
    text = path.read_text()
    assert text.startswith("# Exported from the simulator") and "Not carried over" in text
    sc = load(path)
    assert "zabray sim --seed 4 --replicas 3 --steps 300 --faults crash,partition --fault-rate 0.02" in sc.notes[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["scenario", "validate", str(path)]) == 0
    assert f"sim-seed-4: {len(sc.steps)} steps" in out.getvalue()


def test_observers_and_the_zookeeper_service_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="observers"):
        export(1, SimOptions(observers=1, steps=50))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli_main(["sim", "--seed", "1", "--service", "zookeeper", "--export-scenario", str(tmp_path / "x.yaml")])
    assert rc == 2 and "--export-scenario" in err.getvalue()


def test_a_violating_schedule_exports_up_to_the_violation() -> None:
    """A planted core that acknowledges before its write is durable: seed 3 violates at step 11,
    after one crash. The scenario carries that crash, says which violation in its notes, and
    ends where the simulation stopped (no liveness phase, no final convergence wait)."""
    from tests.sim.test_planted_bugs import AcksBeforeDurable

    opts = SimOptions(node_factory=AcksBeforeDurable, steps=300, faults=("crash",), fault_rate=0.02)
    ex = export(3, opts)
    assert not ex.result.ok and ex.kills == ex.result.faults["crash"] == 1
    sc = parse(yaml.safe_load(ex.yaml()))
    assert "violation ack before durable at step 11" in sc.notes[0]
    assert [s.kind for s in sc.steps][:2] == ["kill", "wait"]
    assert not any(s.condition is not None and s.condition.what == "converged" for s in sc.steps)
