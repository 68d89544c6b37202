"""An ensemble on the lab, one replica per host, driven from host 1 (the head) as an operator
would, under what real networks do: a follower's host cut off for longer than Ray takes to
declare its node dead, then healed; the leader's host cut off; a host crashed and brought back;
a pause and a partition of a replica on another host than the controller's, from a schedule.

Writes come from a load on host 1 (zabray's own client); nothing acknowledged may be lost and
every replica must end with the same history. No assertion is on a time: a test waits for what
it needs (with a deadline) and checks what happened.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.polling import wait_until
from zabray.lab import Lab

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "configs" / "cluster.yaml")


class Ops:
    """An ensemble ``name`` on the lab, and the zabray commands an operator on host 1 runs."""

    def __init__(self, lab: Lab, name: str, tmp: Path) -> None:
        self.lab, self.name, self.tmp = lab, name, tmp
        self.load_proc: Any = None

    def zabray(self, *args: str, check: int | None = 0, timeout: float = 180) -> Any:
        r = self.lab.exec(1, [sys.executable, "-m", "zabray.cli.main", *args], timeout=timeout,
                          env={"PYTHONPATH": str(ROOT)})
        if check is not None:
            assert r.returncode == check, f"zabray {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    def status(self) -> dict[int, dict[str, Any]]:
        r = self.zabray("status", "--name", self.name, "--json", check=None)
        lines = r.stdout.splitlines()  # Ray may print a raylet's notice before the JSON, or after it
        start = next((i for i, ln in enumerate(lines) if ln.startswith("[")), None)
        rows = json.JSONDecoder().raw_decode("\n".join(lines[start:]))[0] if start is not None else []
        return {int(x["sid"]): x for x in rows}

    def host_of(self, row: dict[str, Any]) -> int:
        host = self.lab.spec.host_of_ip(str(row["client"][0]))
        assert host is not None, row
        return host

    def start_load(self) -> None:
        self.load_proc = self.lab.spawn(1, [sys.executable, "-m", "tests.lab.driver", "load", self.name, str(self.tmp)],
                                        env={"PYTHONPATH": str(ROOT)}, cwd=str(ROOT))
        wait_until(lambda: self.progress()["acked"] > 0, 120, "the first acknowledged writes")

    def progress(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.tmp / "progress.json").read_text()))
        except (OSError, ValueError):
            return {"acked": 0, "last_ack": 0.0}

    def acked_since(self, t: float) -> bool:
        return bool(self.progress()["last_ack"] > t)

    def finish_load(self) -> dict[str, Any]:
        (self.tmp / "stop").touch()
        assert self.load_proc.wait(300) == 0
        return dict(json.loads((self.tmp / "result.json").read_text()))

    def caught_up(self, sid: int, incarnation_above: int | None = None) -> bool:
        st = self.status()
        if not st or not all(r["alive"] and not r["stale"] for r in st.values()):
            return False
        if incarnation_above is not None and int(st[sid].get("incarnation") or 0) <= incarnation_above:
            return False
        return len({r["applied"] for r in st.values()}) == 1


@pytest.fixture
def ops(healed: Lab, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Ops]:
    """The ensemble, started from ``configs/cluster.yaml`` with the keys a test's indirect
    parameter gives (none by default)."""
    lab = healed
    lab.wait_nodes(lab.spec.host_ids, 180)
    name = f"l{time.monotonic_ns() % 10**6}"
    o = Ops(lab, name, tmp_path)
    config = CONFIG
    extra = getattr(request, "param", None)
    if extra:
        config = str(tmp_path / "cluster.yaml")
        Path(config).write_text(yaml.safe_dump({**yaml.safe_load(Path(CONFIG).read_text()), **extra}))
    o.zabray("up", "--name", name, "--config", config)
    yield o
    if o.load_proc is not None and o.load_proc.poll() is None:
        o.load_proc.kill()
    lab.heal()
    for h in lab.spec.host_ids:
        if h in lab.state.crashed:
            lab.revive(h)
    lab.wait_nodes(lab.spec.host_ids, 180)
    o.zabray("down", "--name", name, "--wipe", check=None)


def follower_away_from_head(ops: Ops) -> tuple[int, int]:
    """A follower on another host than host 1 (which runs the controller and the load): sid, host."""
    st = wait_until(lambda: (s := ops.status()) and any(r["state"] == "LEADING" for r in s.values()) and s, 60,
                    "a leader")
    sid = next(s for s, r in sorted(st.items()) if r["state"] == "FOLLOWING" and ops.host_of(r) != 1)
    return sid, ops.host_of(st[sid])


def test_a_follower_cut_off_past_its_nodes_death_comes_back_by_itself(ops: Ops) -> None:
    lab = ops.lab
    ops.start_load()
    sid, host = follower_away_from_head(ops)
    before = ops.status()[sid]
    lab.cut(host)
    # Ray declares the cut host's node dead (its health checks fail): the replica is lost with it.
    lost = wait_until(lambda: (st := ops.status()) and st[sid].get("lost") and st[sid], 120, f"replica {sid} lost")
    assert lost["state"] == "DOWN" and not lost["known"]  # unknown: its disk is out of reach
    t = time.time()
    wait_until(lambda: ops.acked_since(t), 60, "writes acknowledged by the two others")
    lab.heal()
    # Its host's node ends (Ray told it it is dead) and starts again as a new node: the replica comes
    # home from its disk, and the leader syncs it.
    wait_until(lambda: ops.caught_up(sid, incarnation_above=int(before["incarnation"])), 240,
               f"replica {sid} back on host {host} and caught up")
    after = ops.status()[sid]
    assert ops.host_of(after) == host and after["node"] != before["node"]
    assert after["client"] == before["client"]  # same host, same ports, same disk
    result = ops.finish_load()
    assert result["converged"] and result["acked"] > 0 and result["problems"] == [], result
    ops.zabray("check", str(runs_of(ops)), "--no-figures", timeout=600)  # exit 0: no property violated


def runs_of(ops: Ops) -> Path:
    """The run directory of the ensemble (the controller's, on host 1, on the shared file system)."""
    r = ops.lab.exec(1, [sys.executable, "-c",
                         "from zabray.driver.ensemble import Ensemble; import sys; "
                         f"print(Ensemble.connect({ops.name!r}).info['run_dir'])"],
                     env={"PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.strip().splitlines()[-1])


def test_writes_resume_when_the_leaders_host_is_cut_off(ops: Ops) -> None:
    lab = ops.lab
    st = wait_until(lambda: (s := ops.status()) and any(r["state"] == "LEADING" for r in s.values()) and s, 60,
                    "a leader")
    leader = next(s for s, r in st.items() if r["state"] == "LEADING")
    if ops.host_of(st[leader]) == 1:  # the head's host holds the load and the controller: move the leader
        ops.zabray("kill", "--name", ops.name, str(leader))
        ops.zabray("restart", "--name", ops.name, str(leader))
        st = wait_until(lambda: (s := ops.status()) and any(r["state"] == "LEADING" and ops.host_of(r) != 1
                                                            for r in s.values()) and s, 60, "a leader off host 1")
        leader = next(s for s, r in st.items() if r["state"] == "LEADING")
    host = ops.host_of(st[leader])
    ops.start_load()
    lab.cut(host)
    t = time.time()
    wait_until(lambda: ops.acked_since(t), 120, "writes acknowledged again while the old leader's host is cut off")
    new = wait_until(lambda: next((s for s, r in ops.status().items() if r["state"] == "LEADING" and r["alive"]), None),
                     60, "a new leader")
    assert new != leader
    lab.heal()
    wait_until(lambda: ops.caught_up(leader), 240, f"replica {leader} back and caught up")
    result = ops.finish_load()
    assert result["converged"] and result["problems"] == [], result


def test_a_crashed_host_comes_back_with_its_replica_and_its_disk(ops: Ops) -> None:
    lab = ops.lab
    ops.start_load()
    sid, host = follower_away_from_head(ops)
    before = ops.status()[sid]
    lab.crash(host)
    wait_until(lambda: (st := ops.status()) and st[sid].get("lost"), 120, f"replica {sid} lost with its host")
    t = time.time()
    wait_until(lambda: ops.acked_since(t), 60, "writes acknowledged by the two others")
    lab.revive(host)
    wait_until(lambda: ops.caught_up(sid, incarnation_above=int(before["incarnation"])), 240,
               f"replica {sid} back on host {host} and caught up")
    assert ops.host_of(ops.status()[sid]) == host
    result = ops.finish_load()
    assert result["converged"] and result["problems"] == [], result


def test_a_schedule_pauses_and_partitions_replicas_on_other_hosts_than_the_controllers(ops: Ops) -> None:
    st = wait_until(lambda: (s := ops.status()) and any(r["state"] == "LEADING" for r in s.values()) and s, 60,
                    "a leader")
    away = sorted(s for s, r in st.items() if ops.host_of(r) != 1)
    away_s = [str(s) for s in away]
    assert len(away) == 2
    sched = ops.tmp / "schedule.yaml"
    sched.write_text(yaml.safe_dump({"seed": 1, "lab": ops.lab.spec.name, "workload": {"in_flight": 20, "size": 256},
                                     "script": [{"fault": "pause", "target": [away[0]], "at": 1.0, "hold": 2.0},
                                                {"fault": "partition", "target": [away[1]], "at": 4.0, "hold": 2.0},
                                                {"fault": "host-cut", "target": [away[0]], "at": 7.0, "hold": 2.0}]}))
    r = ops.zabray("faults", "run", str(sched), "--name", ops.name, timeout=400)
    assert [ln.split()[:2] for ln in r.stdout.splitlines() if ln.strip().startswith(("pause", "partition", "host-"))] \
        == [["pause", away_s[0]], ["partition", away_s[1]], ["host-cut", away_s[0]]], r.stdout
    assert "every acknowledged write is on every replica" in r.stdout, r.stdout
    rows = [json.loads(ln) for ln in (runs_of(ops) / "trace" / "faults.jsonl").read_text().splitlines()]
    faults = {(x.get("fault"), str(x.get("target"))) for x in rows if x.get("kind") == "fault"}
    assert ("pause", str(away[0])) in faults, faults
    assert any(k == "partition" and str(away[1]) in tgt for k, tgt in faults), faults
    assert any(k == "host-cut" and tgt.startswith(f"{away[0]} (host ") for k, tgt in faults), faults


@pytest.mark.parametrize("ops", [{"reconfig_enabled": True}], indirect=True)
def test_a_voter_added_on_another_host_and_the_leader_removed_lose_nothing(ops: Ops) -> None:
    """Reconfiguration across hosts: a fourth replica placed on a named host (not the
    controller's), synced and made a voter; then the leader removed, handing over, under load."""
    lab = ops.lab
    ops.start_load()
    ip = lab.spec.ip(3)
    out = ops.zabray("reconfig", "--name", ops.name, "--add", "--node", ip).stdout
    st = wait_until(lambda: (s := ops.status()) and 4 in s and s, 60, "replica 4 in the status")
    assert ops.host_of(st[4]) == 3, (out, st[4])
    wait_until(lambda: ops.caught_up(4), 120, "replica 4 synced with the others")
    leader = next(s for s, r in ops.status().items() if r["state"] == "LEADING")
    ops.zabray("reconfig", "--name", ops.name, "--remove", str(leader))
    wait_until(lambda: (s := ops.status()) and leader not in s
               and any(r["state"] == "LEADING" for r in s.values()), 120,
               f"replica {leader} gone and a leader among the other three")
    t = time.time()
    wait_until(lambda: ops.acked_since(t), 60, "writes acknowledged after the hand-off")
    result = ops.finish_load()
    assert result["converged"] and result["problems"] == [], result
