"""A failing sweep's replay command reproduces the failure: it carries every option that shapes
a schedule (a planted bug provides the failure)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.sim.test_planted_bugs import AcksBeforeDurable
from zabray.cli import sim as sim_cli
from zabray.cli.main import main


def test_the_printed_replay_reproduces_the_first_failing_seed(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    made = sim_cli._options

    def planted(args):  # type: ignore[no-untyped-def]
        opts = made(args)
        opts.node_factory = AcksBeforeDurable
        return opts

    monkeypatch.setattr(sim_cli, "_options", planted)
    assert main(["sim", "--replicas", "3", "--seeds", "40", "--seed", "500", "--steps", "400",
                 "--faults", "crash,partition", "--fault-rate", "0.03"]) == 1
    out = capsys.readouterr().out
    first = re.search(r"seed (\d+): (.+) at step (\d+):", out)
    replay = re.search(r"replay: zabray (.+)", out)
    assert first and replay, out
    assert "--fault-rate 0.03" in replay.group(1)
    assert main(shlex.split(replay.group(1))) == 1
    again = capsys.readouterr().out
    assert f"seed {first.group(1)}: {first.group(2)} at step {first.group(3)}:" in again, again


@pytest.mark.parametrize("args, message", [
    (["--fault-rate", "2"], "--fault-rate is a share of steps, from 0 to 1; got 2"),
    (["--fault-rate", "-0.1"], "--fault-rate is a share of steps, from 0 to 1; got -0.1"),
    (["--jobs", "0"], "--jobs must be >= 1"),
    (["--service", "zookeeper", "--clients", "0"], "--clients must be >= 1"),
    (["--trace-dir", "{file}/trace"], "--trace-dir: cannot create {file}/trace: "),
    (["--export-scenario", "{file}/x.yaml"], "--export-scenario: cannot write {file}/x.yaml: "),
])
def test_bad_sim_arguments_exit_2_with_one_line(args: list[str], message: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # A fault rate of 2 or -0.1 used to run (as 1 or 0) without a word; a path that cannot be
    # written was a traceback; --clients 0 exited 1, the code for a run that found a violation.
    (tmp_path / "file").write_text("")
    args = [a.replace("{file}", str(tmp_path / "file")) for a in args]
    assert main(["sim", "--seeds", "1", "--steps", "20", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("zabray sim: " + message.replace("{file}", str(tmp_path / "file"))), err
    assert "\n" not in err, err
