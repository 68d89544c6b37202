"""An experiment against a running ZooKeeper-service ensemble on a local Ray, through the CLI:
the fault timeline kills the leader under load, the marks and recovery show it, the client
operations land in the ensemble's trace, and a mismatched ensemble is a one-line error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.ensemble.conftest import ray_local  # noqa: F401  (the suite's shared local Ray)
from zabray.cli.main import main
from zabray.driver.ensemble import Ensemble
from zabray.experiments.runner import load_results

pytestmark = pytest.mark.ray


def test_leader_kill_on_a_running_ensemble_via_the_cli(ray_local: None, tmp_path: Path,  # noqa: F811
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    name = f"exp-local-{os.getpid()}"
    ens = Ensemble.start(3, name=name, data_dir=str(tmp_path / "data"), run_dir=str(tmp_path / "ens"),
                         service="zookeeper")
    try:
        ens.wait_for_leader(60)
        exp = tmp_path / "kill.yaml"
        exp.write_text("name: kill\nservice: zookeeper\nvoters: 3\nread_fraction: 0.5\nclients: 2\nin_flight: 4\n"
                       "warmup: 0.3\nduration: 3.0\nfaults:\n  - {at: 0.5, action: kill, target: leader}\n"
                       "  - {at: 2.0, action: restart, target: killed}\n")
        rc = main(["experiment", "run", str(exp), "--ensemble", name, "--out", str(tmp_path / "runs"),
                   "--no-progress", "--actor-bars"])
        out = capsys.readouterr().out
        assert rc == 0, out
        (run_dir,) = (tmp_path / "runs").iterdir()
        res = load_results(run_dir)
        assert list(res.marks.what) == ["kill leader", "restart killed"]
        assert list(res.marks.scheduled) == [0.5, 2.0]  # beside when each began (`at`)
        assert all(res.marks["at"] >= res.marks.scheduled - 0.1)
        row = res.df.iloc[0]
        assert row.ops_ok > 0 and row.read_throughput > 0 and row.write_throughput > 0
        assert row.faults.tolist() == ["kill leader", "restart killed"]
        # The clients' operations sit next to the replicas' traces, for `zabray check`.
        rows = [json.loads(line) for p in (tmp_path / "ens" / "trace").glob("client-exp*.jsonl")
                for line in p.read_text().splitlines()]
        assert {r["op"] for r in rows} == {"get", "set"} and sum(r["outcome"] == "ok" for r in rows) >= row.ops_ok
        assert all(s.alive for s in ens.status())  # the timeline restarted what it killed

        # A wrong size or name is refused before the run writes anything (it left a run
        # directory holding only experiment.yaml, by default under the current directory).
        (tmp_path / "five.yaml").write_text("name: five\nservice: zookeeper\nvoters: 5\n")
        out2 = tmp_path / "runs2"
        assert main(["experiment", "run", str(tmp_path / "five.yaml"), "--ensemble", name, "--out", str(out2)]) == 2
        assert "has 3 voters" in capsys.readouterr().err
        assert main(["experiment", "run", str(exp), "--ensemble", "nosuch", "--out", str(out2)]) == 1
        assert "no ensemble named 'nosuch'" in capsys.readouterr().err
        assert not out2.exists()
    finally:
        ens.stop()


def test_an_experiment_deletes_the_replica_data_it_made_and_keeps_its_results(
        ray_local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    exp = tmp_path / "tiny.yaml"
    exp.write_text("name: tiny\nservice: broadcast\nvoters: 3\nclients: 1\nin_flight: 2\nwarmup: 0.2\n"
                   "duration: 1.0\n")
    assert main(["experiment", "run", str(exp), "--out", str(tmp_path / "runs"), "--no-progress"]) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert (run_dir / "results.parquet").exists() and list(run_dir.glob("*/trace/*.jsonl"))
    data = run_dir / "data"
    assert not data.exists() or not any(p.is_file() for p in data.rglob("*")), sorted(data.rglob("*"))[:5]
