"""`zabray demo` leaves nothing behind but what it was asked to keep."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from zabray.driver.demo import run_demo

pytestmark = pytest.mark.ray


@pytest.mark.parametrize("keep", [False, True])
def test_demo_cleans_up_unless_asked_to_keep(ray_local, tmp_path: Path, monkeypatch, capsys, keep: bool) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert run_demo(seconds=1.0, in_flight=20, keep=keep) == 0
    out = capsys.readouterr().out
    assert "nothing acknowledged was lost" in out
    assert "of unknown outcome (in flight when their replica lost its leader" in out
    left = list(tmp_path.glob("zabray-demo-*"))
    if not keep:
        assert left == [] and "cleaned up" in out
    else:
        (run,) = left
        assert not (run / "data").exists()  # the replicas' preallocated logs are gone either way
        assert list((run / "run" / "trace").glob("*.jsonl")) and "zabray check" in out


@pytest.mark.parametrize("argv", [["--seconds", "-1"], ["--seconds", "0"], ["--in-flight", "0"]])
def test_demo_refuses_bad_arguments_before_starting_anything(argv: list[str], capsys) -> None:
    # `--seconds -1` was a ValueError from time.sleep once the ensemble was up and writing;
    # `--in-flight 0` a bare ZabError (exit 1) at the same point.
    from zabray.cli.main import main

    assert main(["demo", *argv]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith("zabray demo: the demo needs --seconds > 0"), out
