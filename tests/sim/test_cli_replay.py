"""A failing sweep's replay command reproduces the failure: it carries every option that shapes
a schedule (a planted bug provides the failure)."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.sim.test_planted_bugs import AcksBeforeDurable
from zabray.cli import main
from zabray.sim import cli as sim_cli


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
