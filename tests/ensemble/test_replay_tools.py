"""The tools exact replay needs (issue 19), against a real ensemble (real Ray, TCP and disk):
crash points armed several at once and armed at a restart, so a replica dies at the first
matching step of its own recovery; writes aimed at one replica; and a read-only view of a
replica's disk, stopped or running."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from tests.ensemble.conftest import assert_no_loss, converged, wait_until
from zabray.cli.main import main as cli_main
from zabray.driver.ensemble import Ensemble
from zabray.errors import ConfigError
from zabray.protocol.zxid import Zxid, fmt
from zabray.trace.files import replica_rows
from zabray.trace.records import digest

pytestmark = pytest.mark.ray


def write(ens: Ensemble, n: int, tag: str, acked: dict[int, str | None], **kw: object) -> list[Zxid]:
    """``n`` writes, all acknowledged (else the test fails), recorded in ``acked``."""
    values = [f"{tag}-{i}".encode() for i in range(n)]
    zs = ens.submit_many(values, **kw)  # type: ignore[arg-type]
    assert all(isinstance(z, Zxid) for z in zs), [z for z in zs if not isinstance(z, Zxid)][:3]
    for v, z in zip(values, zs, strict=True):
        acked[int(z)] = digest(v)
    return zs  # type: ignore[return-value]


def replica(ens: Ensemble, sid: int):  # type: ignore[no-untyped-def]
    return next(s for s in ens.status() if s.sid == sid)


def crash_rows(ens: Ensemble, sid: int) -> list[str]:
    """The crash points replica ``sid`` reported firing, from its trace files (every incarnation)."""
    out = []
    for f in sorted((Path(ens.info["run_dir"]) / "trace").glob(f"replica-{sid}-inc*.jsonl")):
        for line in f.read_text().splitlines():
            row = json.loads(line)
            if row.get("fault") == "crash-point":
                out.append(str(row["target"]))
    return out


def test_a_replica_restarted_with_a_crash_point_dies_in_its_recovery_then_catches_up(start) -> None:  # type: ignore[no-untyped-def]
    ens = start(3)
    leader = ens.wait_for_leader(30)
    follower = next(s.sid for s in ens.status() if s.sid != leader)
    acked: dict[int, str | None] = {}
    write(ens, 50, "before", acked)
    ens.kill(follower)
    write(ens, 50, "while-down", acked)  # it must be synced (DIFF, then NEWLEADER) to rejoin
    inc = replica(ens, follower).incarnation
    ens.restart(follower, crash_points=[("recv:NEWLEADER", 1)])
    assert replica(ens, follower).incarnation == (inc or 0) + 1
    wait_until(lambda: not replica(ens, follower).alive, timeout=60, what=f"replica {follower} to die in recovery")
    assert replica(ens, follower).state == "DOWN"
    wait_until(lambda: f"{follower}:recv:NEWLEADER" in crash_rows(ens, follower), timeout=10,
               what="the crash point in the replica's trace")
    write(ens, 20, "after-crash", acked)  # the other two still form a quorum
    ens.restart(follower)
    wait_until(lambda: converged(ens), timeout=60, what="the restarted replica catching up")
    assert replica(ens, follower).crash_points == []
    write(ens, 10, "after-restart", acked)
    wait_until(lambda: converged(ens), timeout=60, what="all replicas converging")
    assert_no_loss(ens, acked)


def test_two_crash_points_at_once_the_one_reached_fires(start) -> None:  # type: ignore[no-untyped-def]
    ens = start(3)
    leader = ens.wait_for_leader(30)
    follower = next(s.sid for s in ens.status() if s.sid != leader)
    acked: dict[int, str | None] = {}
    write(ens, 5, "warm", acked)
    # TRUNC is never sent to a follower in broadcast: only the 4th PROPOSAL can fire.
    ens.arm_crashes(follower, [("recv:TRUNC", 1), ("recv:PROPOSAL", 4)])
    assert replica(ens, follower).crash_points == [("recv:TRUNC", 1), ("recv:PROPOSAL", 4)]
    for i in range(3):
        write(ens, 1, f"one-{i}", acked)
    wait_until(lambda: replica(ens, follower).crash_points == [("recv:TRUNC", 1), ("recv:PROPOSAL", 1)],
               timeout=10, what="the follower counting three PROPOSALs")
    assert replica(ens, follower).alive
    write(ens, 1, "fourth", acked)  # a quorum without it still commits
    wait_until(lambda: not replica(ens, follower).alive, timeout=30, what=f"replica {follower} to crash")
    wait_until(lambda: crash_rows(ens, follower) == [f"{follower}:recv:PROPOSAL"], timeout=10,
               what="the PROPOSAL crash point in the trace")
    # Armed at a restart too: SNAP is never reached (a DIFF is enough), NEWLEADER is.
    ens.restart(follower, crash_points={"recv:SNAP": 1, "recv:NEWLEADER": 1})
    wait_until(lambda: not replica(ens, follower).alive, timeout=60, what="the crash in recovery")
    wait_until(lambda: crash_rows(ens, follower)[-1:] == [f"{follower}:recv:NEWLEADER"], timeout=10,
               what="the NEWLEADER crash point in the trace")
    ens.restart(follower)
    wait_until(lambda: converged(ens), timeout=60, what="all replicas converging")
    assert_no_loss(ens, acked)


def test_unknown_crash_points_fail_fast_and_touch_nothing(start) -> None:  # type: ignore[no-untyped-def]
    ens = start(3)
    leader = ens.wait_for_leader(30)
    follower = next(s.sid for s in ens.status() if s.sid != leader)
    acked: dict[int, str | None] = {}
    write(ens, 3, "some", acked)
    with pytest.raises(ConfigError, match="unknown crash point 'recv:NOPE'"):
        ens.arm_crashes(follower, [("recv:PROPOSAL", 2), ("recv:NOPE", 1)])
    assert replica(ens, follower).crash_points == []
    ens.kill(follower)
    with pytest.raises(ConfigError, match="unknown crash point 'recv:NOPE'"):
        ens.restart(follower, crash_points=["recv:NOPE"])
    with pytest.raises(ConfigError, match="nth must be an integer >= 1"):
        ens.restart(follower, crash_points=[("recv:NEWLEADER", 0)])
    with pytest.raises(ConfigError, match="named twice"):
        ens.restart(follower, crash_points=["recv:DIFF", ("recv:DIFF", 2)])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli_main(["restart", str(follower), "--name", ens.name, "--crash-point", "recv:NOPE#2"])
    assert rc == 2 and "unknown crash point 'recv:NOPE'" in err.getvalue()
    assert replica(ens, follower).state == "DOWN"  # none of those restarted it
    ens.restart(follower)
    wait_until(lambda: converged(ens), timeout=60, what="the plain restart")
    assert_no_loss(ens, acked)


def test_writes_aimed_at_each_follower_commit(start) -> None:  # type: ignore[no-untyped-def]
    ens = start(3)
    leader = ens.wait_for_leader(30)
    followers = [s.sid for s in ens.status() if s.sid != leader]
    acked: dict[int, str | None] = {}
    aimed: dict[int, int] = {}  # zxid -> the replica the write was aimed at
    for f in followers:
        value = f"aimed at {f}".encode()
        z = ens.submit(value, replica=f)
        acked[int(z)] = digest(value)
        aimed[int(z)] = f
        for z2 in write(ens, 3, f"many-at-{f}", acked, replica=f):
            aimed[int(z2)] = f
    z = ens.submit(b"aimed at the leader", replica=leader)
    acked[int(z)] = digest(b"aimed at the leader")
    aimed[int(z)] = leader
    with pytest.raises(ConfigError, match="no replica 7"):
        ens.submit(b"nowhere", replica=7)
    out = io.StringIO()  # the command, aimed at the last follower
    with contextlib.redirect_stdout(out):
        assert cli_main(["submit", "--name", ens.name, "--replica", str(followers[-1]), "by the command"]) == 0
    epoch, counter = out.getvalue().strip().split(":")
    z = Zxid.of(int(epoch), int(counter))
    acked[int(z)] = digest(b"by the command")
    aimed[int(z)] = followers[-1]
    wait_until(lambda: converged(ens), timeout=60, what="all replicas converging")
    assert_no_loss(ens, acked)
    for sid, h in ens.histories().items():
        held = dict(h)
        assert all(held.get(Zxid(z)) == d for z, d in acked.items()), f"replica {sid}"
    # The log names who asked for each txn: the follower it was aimed at, which forwarded it.
    origin = {int(e.zxid): e.origin for e in ens.inspect(leader).log}
    assert {z: origin[z] for z in aimed} == aimed
    # And the leader's trace proposed each one with its value's digest.
    def proposed() -> dict[int, str]:
        rows = replica_rows(ens.info["run_dir"], leader)
        return {int(r["zxid"]): r["digest"] for r in rows if "digest" in r and r.get("kind") == "propose"}

    wait_until(lambda: all(proposed().get(z) == acked[z] for z in aimed), timeout=10, what="the leader's trace")


def test_inspect_a_stopped_replica(start, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ens = start(3)
    leader = ens.wait_for_leader(30)
    follower = next(s.sid for s in ens.status() if s.sid != leader)
    acked: dict[int, str | None] = {}
    zs = write(ens, 40, "kept", acked)
    wait_until(lambda: converged(ens), timeout=60, what="every replica delivering every write")
    live = ens.inspect(leader)  # a running replica: best effort, but it holds what it acked
    assert live.last_zxid == max(zs)
    ens.kill(follower)
    view = ens.inspect(follower)
    assert view.log[-1].zxid == view.last_zxid == max(zs)
    on_disk = {int(e.zxid): e.digest for e in view.log}
    assert {z: on_disk.get(z) for z in acked} == acked
    assert view.current_epoch == max(zs).epoch and view.incarnation == 0
    # No snapshot yet (snapshot_every is large): nothing on disk proves a commit.
    assert view.committed_through == 0 and len(view.not_known_committed()) == len(view.log)
    # The command, reading the directory with no help from Ray.
    out = io.StringIO()
    root = str(Path(ens.info["config"]["data_dir"]))
    with contextlib.redirect_stdout(out):
        rc = cli_main(["inspect", str(follower), "--name", ens.name, "--data-dir", root, "--tail", "3"])
    text = out.getvalue()
    assert rc == 0, text
    assert f"last zxid {fmt(max(zs))}" in text and text.count("logged (commit not on disk)") == 3
    assert "the disk alone cannot say which committed" in text and "delivered" not in text
    with pytest.raises(ConfigError, match="no replica 9"):
        ens.inspect(9)
    # A killed replica's disk is unchanged by being looked at: it recovers everything.
    ens.restart(follower)
    wait_until(lambda: converged(ens), timeout=60, what="the inspected replica rejoining")
    assert_no_loss(ens, acked)
