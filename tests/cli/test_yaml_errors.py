"""A YAML file with a syntax error is one line naming the file, the line and the column, with
exit code 2, for every command that reads one (no Ray is started for any of them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

BROKEN = "replicas: 3\nsteps:\n  - {at: 1.0, do: kill\n  - at: 2\n"  # the flow mapping is never closed


@pytest.mark.parametrize("argv", [
    ["faults", "plan", "{f}"],
    ["scenario", "validate", "{f}"],
    ["experiment", "validate", "{f}"],
    ["up", "--config", "{f}"],
])
def test_a_broken_yaml_file_is_one_line_with_file_line_and_column(tmp_path: Path, argv: list[str]) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text(BROKEN)
    out = subprocess.run([sys.executable, "-m", "zabray.cli.main", *(a.format(f=f) for a in argv)],
                         capture_output=True, text=True, timeout=100, env={"PATH": "/usr/bin:/bin",
                                                                          "RAY_TMPDIR": str(tmp_path)})
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert f"{f}:4:" in lines[0] and "is not valid YAML" in lines[0], lines[0]
    assert "<unicode string>" not in lines[0] and "Traceback" not in out.stderr


def test_an_unknown_experiment_lists_the_ones_there_are(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "zabray.cli.main", "experiment", "validate", "nosuch"],
                         capture_output=True, text=True, timeout=100)
    assert out.returncode == 2
    known = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "configs" / "experiments").glob("*.yaml"))
    assert known and all(k in out.stderr for k in known), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
