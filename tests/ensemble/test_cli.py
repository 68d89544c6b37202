"""The `zabray` commands against a real Ray head, as a user drives them from a shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]
ZABRAY = [sys.executable, "-m", "zabray.cli"]


def run(*args: str, env: dict[str, str], check: int | None = 0, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(ZABRAY + list(args), capture_output=True, text=True, env=env, timeout=timeout)
    if check is not None:
        assert p.returncode == check, f"zabray {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def test_cli_up_status_submit_kill_partition_down(tmp_path: Path) -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"data_dir: {tmp_path / 'data'}\nrun_dir: {tmp_path / 'runs'}\n")
    try:
        up = run("up", "--name", "cli", "--replicas", "3", "--config", str(cfg), env=env, timeout=240)
        assert "is up" in up.stdout
        st = json.loads(run("status", "--name", "cli", "--json", env=env).stdout)
        assert sorted(r["sid"] for r in st) == [1, 2, 3]
        leader = next(r["sid"] for r in st if r["state"] == "LEADING")
        out = run("submit", "--name", "cli", "hello", "world", env=env).stdout.split()
        assert len(out) == 2 and out[0] < out[1]
        assert f"killed replica {leader}" in run("kill", "--name", "cli", "leader", env=env).stdout
        deadline = time.monotonic() + 60
        while run("status", "--name", "cli", env=env, check=None).returncode != 0:
            assert time.monotonic() < deadline, "no new leader after killing the old one"
            time.sleep(0.2)
        run("restart", "--name", "cli", str(leader), env=env)
        run("partition", "--name", "cli", "1", "2,3", env=env)
        run("heal", "--name", "cli", env=env)
        run("submit", "--name", "cli", "--count", "3", env=env)
        # Errors: exit 2 for usage, 1 for a failed operation, with a message saying why.
        bad = run("kill", "--name", "cli", "nobody", env=env, check=2)
        assert "replica id or 'leader'" in bad.stderr
        missing = run("status", "--name", "no-such-ensemble", env=env, check=1)
        assert "no ensemble named 'no-such-ensemble'" in missing.stderr
        assert "stopped" in run("down", "--name", "cli", env=env).stdout
    finally:
        run("down", "--name", "cli", "--stop-ray", env=env, check=None)
