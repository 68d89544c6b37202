"""Checking one run directory end to end: its traces loaded once, the properties checked,
``check.json`` (and, if asked, the figures) written. ``zabray check`` and the scenario runner
both check a run through here, so they report the same way."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from zabray.pipeline.checks import CheckReport, check
from zabray.pipeline.frames import TraceFrames
from zabray.pipeline.loader import load, trace_files
from zabray.pipeline.metrics import figures, write_figures
from zabray.pipeline.report import format_table, write_json

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True, slots=True)
class RunCheck:
    """What checking a run directory found and wrote."""

    run_dir: Path
    report: CheckReport
    table: str
    report_path: Path
    figures: tuple[Path, ...]
    trace_files: int


def check_run_dir(spark: SparkSession, run_dir: str | Path, out: str | Path | None = None, *,
                  with_figures: bool = True, bucket: float | None = None) -> RunCheck:
    """Check ``run_dir``'s traces; write ``check.json`` (and figures) into ``out`` (default
    ``RUN_DIR/analysis``). Raises ``TraceError`` on unreadable input, before writing anything."""
    run_dir = Path(run_dir)
    nfiles = len(trace_files(run_dir))
    out_dir = Path(out) if out is not None else run_dir / "analysis"
    started = time.monotonic()
    frames = TraceFrames(load(spark, run_dir))  # parsed once, shared by the checks and the figures
    try:
        report = check(frames)
        written = write_figures(figures(frames, bucket=bucket), out_dir) if with_figures else []
    finally:
        frames.unpersist()
    path = write_json(report, out_dir / "check.json", run_dir=str(run_dir), trace_files=nfiles,
                      figures=[str(p) for p in written], elapsed_s=round(time.monotonic() - started, 3))
    return RunCheck(run_dir, report, format_table(report), Path(path), tuple(Path(p) for p in written), nfiles)
