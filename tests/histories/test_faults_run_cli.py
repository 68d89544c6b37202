"""`zabray faults run --histories` end to end, as a user runs it: a fault schedule against a
running ZooKeeper ensemble records client histories, and `zabray check --histories` on the run
directory checks them on Spark and finds no violation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.ensemble.conftest import ray_local, start  # noqa: F401
from zabray.cli.main import main

pytestmark = [pytest.mark.ray, pytest.mark.spark]

SCHEDULE = """\
seed: 7
script:
  - {at: 1.0, fault: kill, target: leader, hold: 1.0}
  - {after: 1.5, fault: pause, target: follower, hold: 1.0}
final: heal-and-restart-all
workload: {in_flight: 20}
"""


def test_faults_run_records_histories_that_check_clean(start, tmp_path: Path,  # noqa: F811
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    ens = start(3, service="zookeeper", trace=False)
    sched = tmp_path / "churn.yaml"
    sched.write_text(SCHEDULE)
    assert main(["faults", "run", str(sched), "--name", ens.name, "--histories"]) == 0
    out = capsys.readouterr().out
    run_dir = Path(ens.info["run_dir"])
    assert f"zabray check --histories {run_dir}" in out and "every acknowledged write is on every replica" in out
    # Not a terminal: one progress line per fault done, no bar redrawn with carriage returns.
    progress = [line for line in out.splitlines() if " faults, " in line]
    assert "\r" not in out and progress[-1].startswith("  [") and "2/2 faults" in progress[-1], out
    assert len(progress) == len({line.split("]")[1].split(" faults")[0] for line in progress}) <= 3, out
    assert any((run_dir / "histories").iterdir()), "no history was written"
    assert main(["check", "--histories", str(run_dir), "--master", "local[2]"]) == 0
    report = json.loads((run_dir / "analysis" / "histories.json").read_text())
    assert report["ok"] and report["ops"] > 100 and report["outcomes"].get("ok", 0) > 0, report
    assert not report["violations"] and not report["session_violations"] and not report["unknown"]
