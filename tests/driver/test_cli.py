"""The `zabray` commands against a real Ray head, as a user drives them from a shell.

The head is the test's own: its own Ray temp dir (so its address file is not the machine's) and
GCS port, stopped by ``zabray down --stop-ray``, which stops exactly that head's processes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.polling import wait_until
from zabray.driver.rayhead import _running

pytestmark = [pytest.mark.ray, pytest.mark.slow]
ZABRAY = [sys.executable, "-m", "zabray.cli.main"]


def run(*args: str, env: dict[str, str], check: int | None = 0, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(ZABRAY + list(args), capture_output=True, text=True, env=env, timeout=timeout)
    if check is not None:
        assert p.returncode == check, f"zabray {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_status(name: str, env: dict[str, str], want: int = 0, timeout: float = 60) -> None:
    wait_until(lambda: run("status", "--name", name, env=env, check=None).returncode == want, timeout,
               f"`zabray status --name {name}` to exit {want}", interval=0.2)


def processes_naming(text: str) -> dict[int, str]:
    """The running processes with ``text`` in an argument of their command line."""
    out = {}
    for d in Path("/proc").iterdir():
        try:
            args = (d / "cmdline").read_bytes().decode(errors="replace").split("\0") if d.name.isdigit() else []
        except OSError:
            continue
        if any(text in a for a in args) and _running(int(d.name)):
            out[int(d.name)] = " ".join(args)
    return out


def user_shell() -> tuple[str, dict[str, str]]:
    """A Ray temp dir of the test's own (short: Ray's socket paths live under it) and a user's
    shell environment that points Ray there."""
    raytmp = tempfile.mkdtemp(prefix="zr", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_worker_niceness")}
    env["RAY_TMPDIR"] = raytmp
    return raytmp, env


def test_cli_up_twice_status_faults_errors_down(tmp_path: Path) -> None:
    raytmp, env = user_shell()
    cfg = tmp_path / "cfg.yaml"
    data = tmp_path / "data"
    cfg.write_text(f"data_dir: {data}\nrun_dir: {tmp_path / 'runs'}\n")
    try:
        up = run("up", "--name", "cli", "--config", str(cfg), "--ray-port", str(free_port()), env=env, timeout=240)
        assert "started a local Ray head" in up.stdout and "is up (broadcast)" in up.stdout
        # A second `up` finds the running head (no second `ray start`), with another service.
        up2 = run("up", "--name", "zk", "--config", str(cfg), "--service", "zookeeper", env=env, timeout=240)
        assert "started" not in up2.stdout and "is up (zookeeper)" in up2.stdout
        assert "Traceback" not in up2.stderr and "Token authentication" not in up2.stderr
        taken = run("up", "--name", "zk", "--config", str(cfg), env=env, check=2)
        assert taken.stderr.strip().splitlines() == ["zabray up: an ensemble named 'zk' is already running; "
                                                     "stop it or pick another name"]

        # The address `up` printed admits its user (Ray sends its token only to a head it finds
        # itself); a port nothing listens on is one line at once, not Ray's minutes of retries.
        head = up.stdout.split("started a local Ray head at ", 1)[1].split(",", 1)[0]
        assert "LEADING" in run("status", "--name", "cli", "--address", head, env=env).stdout
        # With the head's record gone (a `ray stop` of another head in the same temp dir removes
        # it), `up` says how to join the head that still holds the port, and joining works.
        (record,) = Path(raytmp).glob("**/ray_current_cluster")
        record.rename(record.with_suffix(".aside"))
        try:  # (put back whatever happens: `down --stop-ray` below finds the head by it)
            port = head.rpartition(":")[2]
            lost = run("up", "--name", "x", "--config", str(cfg), "--ray-port", port, env=env, check=1)
            assert f"port {port} is taken" in lost.stderr and f"--address 127.0.0.1:{port}" in lost.stderr, lost.stderr
            assert "LEADING" in run("status", "--name", "cli", "--address", f"127.0.0.1:{port}", env=env).stdout
        finally:
            record.with_suffix(".aside").rename(record)
        nothing = f"127.0.0.1:{free_port()}"
        bad = run("status", "--name", "cli", "--address", nothing, env=env, check=1)
        assert bad.stderr.strip().splitlines() == [
            f"zabray status: NotRunningError: cannot join the Ray cluster at {nothing}: nothing listens there "
            "(is the head's port right, and is `ray start --head` running?)"]
        st = json.loads(run("status", "--name", "cli", "--json", env=env).stdout)
        assert sorted(r["sid"] for r in st) == [1, 2, 3] and all(r["client"] and r["node_label"] for r in st)
        assert [r["report"]["nice"] for r in st] == [0, 0, 0]  # servers, not nice-15 Ray workers
        leader = next(r["sid"] for r in st if r["state"] == "LEADING")
        out = run("submit", "--name", "cli", "hello", "world", env=env).stdout.split()
        assert len(out) == 2 and out[0] < out[1]
        summary = run("submit", "--name", "cli", "--count", "200", "--size", "64", env=env).stdout
        assert summary.count("\n") == 1 and "200 writes of 64 bytes committed" in summary and "/s" in summary

        assert f"killed replica {leader}" in run("kill", "--name", "cli", "leader", env=env).stdout
        wait_status("cli", env)
        # Down, it shows what its disk holds (read on its node; unknown, "?", until read).
        seen: dict[str, str] = {}

        def read_from_disk() -> bool:
            seen["table"] = run("status", "--name", "cli", env=env, check=None).stdout
            seen["row"] = next(ln for ln in seen["table"].splitlines() if ln.split()[:2] == [str(leader), "DOWN"])
            assert "~" in seen["row"] or "?" in seen["row"], seen["row"]  # never a value it does not know
            return "~" in seen["row"]

        wait_until(read_from_disk, 60, "the down replica's disk to be read", interval=0.2)
        table, down_row = seen["table"], seen["row"]
        assert "~" in down_row and ":" in down_row  # epoch/zxid from its disk, marked so
        # It had logged the writes above before it died: its disk holds them (the delivered
        # column says only what the disk proves committed, its snapshot's zxid, maybe 0:0).
        assert down_row.split()[4] not in ("0:0~", "?"), down_row
        assert "read from the disk" in table
        # Errors from the controller: one line, the documented exit code.
        live = next(s for s in (1, 2, 3) if s != leader)
        bad = run("restart", "--name", "cli", str(live), env=env, check=2)
        assert bad.stderr.strip() == f"zabray restart: replica {live} is running; kill it before restarting it"
        bad = run("restart", "--name", "cli", "9", env=env, check=2)
        assert bad.stderr.strip().splitlines() == ["zabray restart: no replica 9 in ensemble 'cli' (replicas are [1, 2, 3])"]
        assert f"restarted replica {leader}" in run("restart", "--name", "cli", str(leader), env=env).stdout
        assert "paused replica" in run("pause", "--name", "cli", str(live), env=env).stdout
        assert "PAUSED" in run("status", "--name", "cli", env=env, check=None).stdout
        assert "resumed replica" in run("resume", "--name", "cli", str(live), env=env).stdout
        bad = run("partition", "--name", "cli", "1", "7", env=env, check=2)
        assert "unknown replica(s) 7" in bad.stderr and "disjoint" not in bad.stderr
        assert "partitioned: 1 | 2,3" in run("partition", "--name", "cli", "1", "2,3", env=env).stdout
        assert "partitioned: 2 | 1,3" in run("partition", "--name", "cli", "2", env=env).stdout  # and the rest
        assert "healed" in run("heal", "--name", "cli", env=env).stdout
        raw = run("submit", "--name", "zk", "x", env=env, check=2)
        assert "service: zookeeper" in raw.stderr
        missing = run("status", "--name", "no-such-ensemble", env=env, check=1)
        assert "no ensemble named 'no-such-ensemble'" in missing.stderr
        running = missing.stderr.partition("running here: ")[2]  # names what to pass instead
        assert "'cli'" in running and "'zk'" in running
        # Without --name and with two ensembles (none called 'default'): the error lists them.
        several = run("status", env=env, check=1)
        assert several.stderr.strip().splitlines() == [
            "zabray status: NotRunningError: 2 ensembles are running, none named 'default': 'cli', 'zk'; "
            "pick one with --name"]
        # Ray's own temp dir, passed through: another one holds no head, so nothing runs there.
        other = tempfile.mkdtemp(prefix="zo", dir="/tmp")
        try:
            elsewhere = run("--temp-dir", other, "status", env=env, check=1)
            assert "no Ray cluster is running" in elsewhere.stderr, elsewhere.stderr
        finally:
            shutil.rmtree(other, ignore_errors=True)

        assert list((data / "cli").iterdir())
        assert "wiped 3 data directories" in run("down", "--name", "cli", "--wipe", env=env).stdout
        assert not (data / "cli").exists()
        # One ensemble left: a command without --name takes it, and says which it took.
        only = run("status", env=env)
        assert "LEADING" in only.stdout and only.stderr.strip() == "zabray status: ensemble 'zk', the only one running"
        # Ray's client server names the head only by its address, and `ray start` leaves it an
        # orphan: it was left running, holding its port, after the rest of the head had gone.
        client_server = processes_naming(f"--address={head}")
        assert client_server, "the head's Ray client server was not found"
        assert "ensemble 'zk' stopped" in run("down", env=env).stdout
        # No ensemble left: `down --stop-ray` stops the head all the same, and that is success.
        stopped = run("down", "--stop-ray", env=env)
        assert stopped.stdout.startswith("no ensemble to stop: ") and "none is running here" in stopped.stdout
        assert "stopped the Ray head" in stopped.stdout and "Traceback" not in stopped.stderr
        assert not [pid for pid in client_server if _running(pid)], client_server
        gone = run("status", "--name", "zk", env=env, check=1)
        assert "no Ray cluster is running" in gone.stderr
    finally:
        run("down", "--name", "zk", "--stop-ray", env=env, check=None)
        shutil.rmtree(raytmp, ignore_errors=True)


def test_bad_config_names_every_bad_key_and_sim_exits_2(tmp_path: Path) -> None:
    from zabray.cli.main import main
    from zabray.config import EnsembleConfig
    from zabray.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        EnsembleConfig.from_dict({"tick": 5, "fsnyc": True, "tick_ms": 0, "service": "zk"})
    msg = str(e.value)
    assert "\n" not in msg
    for key in ("'fsnyc'", "'tick'", "'tick_ms'", "'service'"):
        assert key in msg, msg
    assert main(["sim", "--faults", "bogus", "--seeds", "1"]) == 2
    assert main(["sim", "--replicas", "0"]) == 2


def test_up_with_a_bad_config_starts_no_ray_head(tmp_path: Path) -> None:
    """The config is checked before `up` starts a Ray head for it: a typo leaves nothing running."""
    raytmp, env = user_shell()
    bad = tmp_path / "bad.yaml"
    bad.write_text("tick_ms: 20\nfsnyc: true\n")
    try:
        p = run("up", "--config", str(bad), "--ray-port", str(free_port()), env=env, check=2)
        assert p.stdout == "" and p.stderr.startswith("zabray up: unknown config key 'fsnyc'")
        p = run("up", "--replicas", "0", "--ray-port", str(free_port()), env=env, check=2)
        assert p.stdout == "" and p.stderr.startswith("zabray up: replicas must be a positive integer"), p.stderr
        # The files it names are read before a head starts too.
        bad.write_text(f"secret_file: {tmp_path / 'no-such-secret'}\n")
        p = run("up", "--config", str(bad), "--ray-port", str(free_port()), env=env, check=2)
        assert p.stdout == "" and p.stderr.startswith("zabray up: config key 'secret_file': cannot read"), p.stderr
        assert not list(Path(raytmp).glob("**/ray_current_cluster")) and not list(Path(raytmp).glob("*/session_*"))
        # A data directory only a replica can find bad (on its node): one line, and the head
        # started for it is stopped again.
        (tmp_path / "file").write_text("")
        bad.write_text(f"data_dir: {tmp_path / 'file' / 'data'}\nrun_dir: {tmp_path / 'run'}\n")
        p = run("up", "--config", str(bad), "--ray-port", str(free_port()), env=env, check=2)
        err = p.stderr.strip().splitlines()
        assert err[-1].startswith("zabray up: replica ") and "(data_dir): Not a directory; set data_dir" in err[-1], p.stderr
        assert not any("Traceback" in line for line in err), p.stderr
        assert err[-2].startswith("stopped the Ray head at "), p.stderr
        assert run("down", "--stop-ray", env=env, check=None).stdout.strip() == "no local Ray head is running"
    finally:
        if list(Path(raytmp).glob("**/ray_current_cluster")):  # the bug: stop the head it left
            run("down", "--stop-ray", env=env, check=None)
        shutil.rmtree(raytmp, ignore_errors=True)
