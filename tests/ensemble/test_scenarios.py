"""Scenarios (configs/scenarios/*.yaml) replayed on a real 3-replica ensemble (real Ray, TCP,
fsync): the two ZooKeeper bugs with their preconditions proven from the run's trace, nothing
acknowledged lost, no replica looping; and `zabray scenario run` end to end."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from zabray.cli.main import main as cli_main
from zabray.driver.scenario import run
from zabray.replay.scenario import load
from zabray.trace.files import fault_rows, message_rows

pytestmark = pytest.mark.ray

SCENARIOS = Path(__file__).resolve().parents[2] / "configs" / "scenarios"


def replay(start, name: str, check: bool = False):  # type: ignore[no-untyped-def]
    sc = load(SCENARIOS / f"{name}.yaml")
    ens = start(sc.replicas, **dict(sc.config))
    ens.wait_for_leader(30)
    lines: list[str] = []
    result = run(ens, sc, out=lines.append, check=check)
    assert len([ln for ln in lines if ln.startswith("[")]) == len(sc.steps)
    steps = [r for r in fault_rows(ens.info["run_dir"]) if r["fault"] == "scenario-step"]
    assert len(steps) == len(sc.steps)  # every step is in the trace
    return ens, result, lines


def test_zk_4394_commit_of_a_proposal_made_during_sync(start) -> None:  # type: ignore[no-untyped-def]
    ens, result, lines = replay(start, "zk-4394-commit-during-sync", check=True)
    proof = result.proofs[0]
    assert proof.ok, proof.text
    assert "commits_in_window=0" in proof.text  # zabray sends the commit as UPTODATE's, never inside
    assert not result.problems, result.problems
    assert max(result.elections.values()) <= 3  # no loop: F's restart is its only election
    assert result.check == 0  # zabray check: every Zab property holds in the traces
    assert result.ok


def test_zk_4685_ack_of_a_proposal_right_behind_the_newleader_ack(start) -> None:  # type: ignore[no-untyped-def]
    ens, result, lines = replay(start, "zk-4685-ack-before-newleader-ack")
    proof = result.proofs[0]
    assert proof.ok, proof.text
    assert not result.problems, result.problems
    leaders = {s.sid for s in ens.status() if s.established_leader}
    assert len(leaders) == 1 and max(result.elections.values()) <= 3
    assert result.elections[next(iter(leaders))] == 1  # ZooKeeper's leader gave up here: ours never did
    assert result.ok


def test_scenario_command_runs_a_file_and_refuses_a_bad_one(ray_local, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli_main(["scenario", "run", str(SCENARIOS / "hold-a-follower.yaml"), "--no-check",
                       "--data-dir", str(tmp_path / "data"), "--run-dir", str(tmp_path / "run")])
    text = out.getvalue()
    assert rc == 0, text
    assert "[ 1/12] bind" in text and "PASS: hold-a-follower" in text
    assert not list((tmp_path / "data").glob("*/replica-*/store"))  # wiped
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\nsteps:\n  - kill: F\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli_main(["scenario", "run", str(bad)])
    assert rc == 2
    assert err.getvalue().strip().count("\n") == 0 and "step 1 (kill): kill: expected a sid" in err.getvalue()


def _missed_while_down(ens, result, lines: list[str]) -> None:  # type: ignore[no-untyped-def]
    """F had only the 5 writes made before it was killed (a kill is over when it returns: none
    of the 20 made while it was down reached it) and came back through a DIFF carrying the 20."""
    f = int(re.search(r"-> F=(\d+)", lines[0]).group(1))  # type: ignore[union-attr]
    zs = sorted(result.acked)
    rows = [r for r in message_rows(ens.info["run_dir"], f) if r["inc"] == 1]
    assert next(r["zxid"] for r in rows if r["msg"] == "FOLLOWERINFO") == zs[4]
    assert next(r["zxid"] for r in rows if r["msg"] == "DIFF" and r["dir"] == "recv") == zs[24]


def test_zk_4643_the_sync_is_on_disk_when_current_epoch_is(start) -> None:  # type: ignore[no-untyped-def]
    ens, result, lines = replay(start, "zk-4643-current-epoch-before-txns")
    proof = result.proofs[0]
    assert proof.ok, proof.text
    assert "by DIFF" in proof.text  # the txns of the sync came in a DIFF, as in ZooKeeper's report
    _missed_while_down(ens, result, lines)
    seen = "\n".join(lines)
    assert "current epoch 2, accepted 2" in seen and "is on" in seen  # F's disk at its crash: both
    assert not result.problems, result.problems  # F won on its epoch and cut nothing committed off L
    assert max(result.elections.values()) <= 4
    assert result.ok


def test_zk_4646_what_the_newleader_ack_promised_is_on_disk_when_it_leaves(start) -> None:  # type: ignore[no-untyped-def]
    ens, result, lines = replay(start, "zk-4646-ack-newleader-before-txns")
    proof = result.proofs[0]
    assert proof.ok, proof.text
    assert "established epoch 2" in proof.text  # the leader counted the ACK of a follower now dead
    _missed_while_down(ens, result, lines)
    seen = "\n".join(lines)
    assert "current epoch 2, accepted 2" in seen and "is on" in seen  # F's disk right after its ACK left
    assert not result.problems, result.problems
    assert max(result.elections.values()) <= 4
    assert result.ok


def test_zk_4712_proposals_left_open_by_an_ended_iteration_do_not_leak(start) -> None:  # type: ignore[no-untyped-def]
    ens, result, lines = replay(start, "zk-4712-proposals-across-iterations", check=True)
    proof = result.proofs[0]
    assert proof.ok, proof.text
    assert "(incarnation 0, no restart)" in proof.text and "dropped with the channel" in proof.text
    assert not result.problems, result.problems  # nothing stale: every history agrees with the new leader's
    assert max(result.elections.values()) <= 3  # no loop: one start and one ended iteration each, at most one more
    assert result.check == 0  # zabray check: every Zab property holds in the traces
    assert result.ok


def test_zk_3911_follower_synced_with_a_proposal_that_never_commits_never_delivers_it(start) -> None:  # type: ignore[no-untyped-def]
    ens, result, lines = replay(start, "zk-3911-diff-of-uncommitted")  # 5 replicas
    proof = result.proofs[0]
    assert proof.ok, proof.text
    assert "< p: p not known committed there" in proof.text  # its sync ended with p uncommitted: ZooKeeper's window
    assert "never committed p; p died uncommitted: nobody delivered it" in proof.text
    assert not result.problems, result.problems
    assert max(result.elections.values()) <= 3
    assert result.ok


def test_zk_2845_tail_truncated_without_a_restart_stays_gone(start) -> None:  # type: ignore[no-untyped-def]
    ens, result, lines = replay(start, "zk-2845-truncate-without-restart")
    proof = result.proofs[0]
    assert proof.ok, proof.text
    assert "nobody ever delivered p" in proof.text
    assert not result.problems, result.problems
    assert max(result.elections.values()) <= 3
    assert result.ok


def test_zk_1154_replica_down_with_the_highest_zxid_is_truncated_on_return(start) -> None:  # type: ignore[no-untyped-def]
    ens, result, lines = replay(start, "zk-1154-highest-zxid-down", check=True)
    proof = result.proofs[0]
    assert proof.ok, proof.text
    assert "nobody ever delivered p" in proof.text
    assert not result.problems, result.problems
    assert max(result.elections.values()) <= 3
    assert result.check == 0  # zabray check: every Zab property holds in the traces
    assert result.ok
