"""`zabray demo` leaves nothing behind but what it was asked to keep."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from zabray.demo import run_demo

pytestmark = pytest.mark.ray


@pytest.mark.parametrize("keep", [False, True])
def test_demo_cleans_up_unless_asked_to_keep(ray_local, tmp_path: Path, monkeypatch, capsys, keep: bool) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert run_demo(seconds=1.0, in_flight=20, keep=keep) == 0
    out = capsys.readouterr().out
    assert "nothing acknowledged was lost" in out
    left = list(tmp_path.glob("zabray-demo-*"))
    if not keep:
        assert left == [] and "cleaned up" in out
    else:
        (run,) = left
        assert not (run / "data").exists()  # the replicas' preallocated logs are gone either way
        assert list((run / "run" / "trace").glob("*.jsonl")) and "zabray check" in out
