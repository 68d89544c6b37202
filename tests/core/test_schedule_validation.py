"""A fault schedule with a typo or an impossible value is refused whole, in one line naming the
key, before anything runs: a misspelt key silently ignored, or a negative step count running
no faults at all, would make a run look like it survived faults it never had."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zabray.errors import ConfigError
from zabray.replay import schedule

BAD: list[tuple[Any, str]] = [
    ({"random": {"stepz": 3}}, "random: unknown key 'stepz'"),
    ({"random": {"steps": -3}}, "random: 'steps' must be an integer >= 0, got -3"),
    ({"random": {"steps": "many"}}, "random: 'steps' must be an integer >= 0"),
    ({"random": {"steps": 2.5}}, "random: 'steps' must be an integer >= 0"),
    ({"random": 5}, "schedule key 'random' must be a mapping"),
    ({"random": {"mix": {"kill": -1}}}, "random.mix: 'kill' must be a number >= 0"),
    ({"random": {"mix": {"kill": 0, "pause": 0}}}, "random.mix: every weight is 0"),
    ({"random": {"mix": ["kill"]}}, "random.mix must map fault kinds to weights"),
    ({"random": {"points": ["recv:PROPOSAL", "bogus"]}}, "unknown crash point 'bogus'"),
    ({"random": {"hold": [-1, 2]}}, "schedule key 'hold' must be a number >= 0 or [low, high]"),
    ({"random": {"interval": [2, 1]}}, "schedule key 'interval' must be a number >= 0 or [low, high]"),
    ({"script": [{"at": -1, "fault": "kill"}]}, "script step 1: 'at' must be a number >= 0"),
    ({"script": [{"at": "soon", "fault": "kill"}]}, "script step 1: 'at' must be a number >= 0"),
    ({"script": [{"fault": "kill"}, {"after": -1, "fault": "kill"}]}, "script step 2: 'after' must be"),
    ({"script": [{"fault": "kill", "hold": -2}]}, "script step 1: 'hold' must be a number >= 0"),
    ({"script": [{"fault": "delay", "delay_ms": True}]}, "script step 1: 'delay_ms' must be a number"),
    ({"script": [{"fault": "crash-point", "point": "recv:PROPOSAL", "nth": 0}]},
     "script step 1: 'nth' must be an integer >= 1"),
    ({"workload": {"in_fligth": 10}}, "schedule key 'workload' takes in_flight, size, sessions, keys"),
    ({"workload": {"size": 0}}, "workload: 'size' must be an integer >= 1, got 0"),
]


@pytest.mark.parametrize("data, message", BAD)
def test_a_bad_schedule_is_one_config_error_naming_the_key(data: Any, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        schedule.parse(data)
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_the_shipped_schedules_parse_into_the_steps_they_ask_for() -> None:
    for path in sorted(Path(__file__).parents[2].glob("configs/faults/*.yaml")):
        plan = schedule.load(path)
        assert plan.steps and all(s.hold >= 0 and s.nth >= 1 for s in plan.steps), path
    s = schedule.parse({"random": {"steps": 0}})
    assert s.steps == ()  # zero faults is allowed: a workload alone


@pytest.mark.parametrize("n", ["0", "-5"])
def test_faults_run_refuses_a_bad_in_flight_before_finding_an_ensemble(
    n: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--in-flight 0` ran the schedule's own 100 in flight without a word; `-5` was refused only
    # by the workload, once an ensemble had been found. (No Ray here: RAY_TMPDIR is empty.)
    from zabray.cli.main import main

    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    mixed = Path(__file__).parents[2] / "configs/faults/mixed.yaml"
    assert main(["faults", "run", str(mixed), "--in-flight", n, "--name", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err == f"zabray faults: --in-flight must be at least 1, got {n}\n", err


def test_faults_run_with_no_ray_cluster_says_so_and_starts_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It started a Ray instance of its own, then reported that no ensemble ran "in this Ray cluster".
    from zabray.cli.main import main

    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    mixed = Path(__file__).parents[2] / "configs/faults/mixed.yaml"
    assert main(["faults", "run", str(mixed), "--name", "nosuch"]) == 1
    assert "no Ray cluster is running on this machine" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
