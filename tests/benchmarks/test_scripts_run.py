"""The cheap benchmark scripts run to the end at a tiny size and say what machine and
configuration they measured: a benchmark that hangs or prints bare figures is no benchmark.
(Nothing here is timed; the figures themselves are not checked.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def run(script: str, *args: str) -> str:
    out = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("machine: "), out.stdout[:500]
    assert " cores (" in out.stdout.splitlines()[0] and "python " in out.stdout.splitlines()[0]
    return out.stdout


@pytest.mark.parametrize("where", ["--inproc", "--two-procs"])
def test_transport_stream_completes(where: str) -> None:
    """The learner sees every PROPOSAL of a stream the transport frames in batches, and ACKs the
    last one, in one process and across two."""
    out = run("transport.py", "--n", "3000", "--window", "200", *([where] if where == "--inproc" else []))
    assert "3000 PROPOSALs of 1024 B" in out
    assert "one process" in out if where == "--inproc" else "two processes" in out


def test_storage_prints_disk_and_every_group_size(tmp_path: Path) -> None:
    out = run("storage.py", "--dir", str(tmp_path), "--seconds", "0.05", "--segment-mb", "2")
    assert "DiskStore: fsync on" in out
    rows = [line.split("|")[0].strip() for line in out.splitlines() if "%" in line and "|" in line]
    assert rows == ["1", "10", "100", "1000"]


@pytest.mark.spark
def test_the_checker_benchmarks_run(tmp_path: Path) -> None:
    """pipeline.py and histories.py import pyspark, which imports the standard library's
    profile: run as scripts, they must not find benchmarks/profile.py in its place."""
    out = run("pipeline.py", "--deliveries", "5000", "--replicas", "3", "--dir", str(tmp_path / "run"))
    assert "checker: Spark local[2]" in out and "check:durability" in out
    out = run("histories.py", "--ops", "1000", "--keys", "5", "--repeat", "1")
    assert "Spark" in out and "{'ok': 5}" in out
