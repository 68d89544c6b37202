"""Experiments as data: every shipped YAML loads, a bad key names itself, sweeps expand."""

from __future__ import annotations

from pathlib import Path

import pytest

from zabray.cli.main import main
from zabray.errors import ConfigError
from zabray.experiments import Experiment, FaultStep
from zabray.experiments.metrics import limit, percentile, recoveries, summary, timeline
from zabray.experiments.spec import CONFIG_DIR


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_experiment_loads(path: Path) -> None:
    exp = Experiment.load(path)
    assert exp.points() and exp.name == path.stem


def test_a_sweep_multiplies_into_points_ensemble_shapes_outermost() -> None:
    exp = Experiment.from_dict({"service": "zookeeper", "sweep": {"read_fraction": [0, 1], "voters": [3, 5]}})
    assert [(p.voters, p.read_fraction) for p in exp.points()] == [(3, 0.0), (3, 1.0), (5, 0.0), (5, 1.0)]


def test_faults_are_sorted_and_targets_may_be_replica_ids() -> None:
    exp = Experiment.from_dict({"duration": 5, "faults": [{"at": 3, "action": "restart", "target": "killed"},
                                                         {"at": 1, "action": "kill", "target": [2, 3]}]})
    assert exp.faults == (FaultStep(1.0, "kill", (2, 3)), FaultStep(3.0, "restart", "killed"))


@pytest.mark.parametrize(("data", "names"), [
    ({"voterz": 3}, "'voterz'"),
    ({"voters": "three"}, "'voters'"),
    ({"service": "etcd"}, "'service'"),
    ({"read_fraction": 0.5}, "broadcast service has no reads"),
    ({"service": "zookeeper", "read_fraction": 1.5}, "'read_fraction'"),
    ({"sweep": {"duration": [1, 2]}}, "'sweep.duration'"),
    ({"faults": [{"at": 1, "action": "explode", "target": "leader"}]}, "action must be one of"),
    ({"faults": [{"at": 1, "action": "kill", "target": "boss"}]}, "target must be one of"),
    ({"faults": [{"at": 1, "action": "kill", "target": "leader", "hold": 2}]}, "unknown key 'hold'"),
    ({"duration": 2, "faults": [{"at": 3, "action": "heal"}]}, "after the measured window"),
    ({"ensemble": {"tick_mz": 5}}, "'tick_mz'"),
])
def test_a_bad_key_names_itself_in_one_line(data: dict[str, object], names: str) -> None:
    with pytest.raises(ConfigError, match=names) as e:
        Experiment.from_dict(data)
    assert "\n" not in str(e.value)


def test_bad_yaml_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("voters: [3\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        Experiment.load(tmp_path / "x.yaml")
    with pytest.raises(ConfigError, match="no experiment .*missing.yaml.*not a file, nor one of .*: broadcast-scaling"):
        Experiment.load(tmp_path / "missing.yaml")


def test_cli_validate_shows_points_and_rejects_a_bad_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "validate", "zk-read-mix"]) == 0
    out = capsys.readouterr().out
    assert "20 points" in out and "n=13+0o reads=90%" in out
    (tmp_path / "bad.yaml").write_text("name: bad\nclientz: 3\n")
    assert main(["experiment", "validate", str(tmp_path / "bad.yaml")]) == 2
    assert "unknown experiment key 'clientz'" in capsys.readouterr().err
    assert main(["experiment", "validate", "failures", "--set", "duration=1"]) == 2


def test_metrics_from_records() -> None:
    import pandas as pd

    # 10 ok writes per second for 4 s, nothing completes between t=2 and t=3 (a fault at 2).
    done = [i / 10 for i in range(40) if not 20 <= i < 30]
    ops = pd.DataFrame({"invoke": [d - 0.01 for d in done], "complete": done, "outcome": ["ok"] * len(done),
                        "op": ["write"] * len(done), "zxid": range(len(done)), "digest": [None] * len(done),
                        "client": 0})
    s = summary(ops, 0.0, 4.0)
    assert s["throughput"] == pytest.approx(30 / 4) and s["latency_p50_ms"] == pytest.approx(10, abs=0.01)
    tl = timeline(ops, 0.0, 0.0, 4.0, 1.0)
    assert tl.ops_per_s.tolist() == [10, 10, 0, 10]
    (rec,) = recoveries(ops, [{"t": 2.0, "what": "kill leader"}], 0.0, 4.0, 0.5)
    assert rec["stall_s"] == pytest.approx(1.0, abs=0.11)
    assert rec["recovered_s"] == pytest.approx(1.5, abs=0.01)
    assert percentile([1, 2, 3, 4], 50) == 2
    assert limit([0.95], [0.4]) == "clients" and limit([0.2], [0.9]) == "replicas"
    assert limit([0.2], [0.3]) == "latency (fsync, round trips)"
    assert limit([0.2], [0.3], contended=True) == "machine CPU (contended)"


def test_an_experiment_on_a_named_ensemble_with_no_ray_cluster_says_so_and_starts_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # It started a Ray instance, made its run directory, and then reported that no ensemble
    # ran "in this Ray cluster".
    raytmp, out = tmp_path / "ray", tmp_path / "out"
    raytmp.mkdir()
    monkeypatch.setenv("RAY_TMPDIR", str(raytmp))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert main(["experiment", "run", "failures", "--ensemble", "nosuch", "--out", str(out)]) == 1
    assert "no Ray cluster is running on this machine" in capsys.readouterr().err
    assert list(raytmp.iterdir()) == [] and not out.exists()
