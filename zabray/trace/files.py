"""Reading a run's trace files back in Python (small runs: scenarios, tests), without Spark.

Rows come back per writer in the order written; ``message_rows`` and ``fault_rows`` pick the
kinds a replayed scenario proves its preconditions from (``zabray.trace.records``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zabray.trace.records import expand

Row = dict[str, Any]


def _rows(path: Path) -> list[Row]:
    """The file's rows, run rows expanded (``zabray.trace.expand``)."""
    out: list[Row] = []
    for line in path.read_text().splitlines():
        try:
            out.extend(expand(json.loads(line)))
        except json.JSONDecodeError:  # a torn last line of a killed writer
            continue
    return out


def replica_rows(run_dir: str | Path, sid: int) -> list[Row]:
    """Every row replica ``sid`` wrote, incarnation after incarnation, each in written order."""
    files = sorted((Path(run_dir) / "trace").glob(f"replica-{sid}-inc*.jsonl"),
                   key=lambda p: int(p.stem.rsplit("inc", 1)[1]))
    return [r for f in files for r in _rows(f)]


def message_rows(run_dir: str | Path, sid: int, *, direction: str | None = None) -> list[Row]:
    """Replica ``sid``'s ``message`` rows (``trace_messages: true``), optionally one ``dir``."""
    return [r for r in replica_rows(run_dir, sid)
            if r.get("kind") == "message" and (direction is None or r.get("dir") == direction)]


def fault_rows(run_dir: str | Path) -> list[Row]:
    """The fault injector's and controller's ``fault`` rows (holds, releases, scenario steps too),
    one per fault in the order they began. A fault that lasts (a partition, a pause, a delay, a
    hold) is written when it begins and again, with its ``end``, when it ends: here it is one
    row, with the ``end`` once it has one."""
    path = Path(run_dir) / "trace" / "faults.jsonl"
    if not path.exists():
        return []
    faults: dict[tuple[Any, Any, Any], Row] = {}
    for r in _rows(path):
        if r.get("kind") != "fault":
            continue
        first = faults.setdefault((r.get("fault"), r.get("target"), r.get("start")), r)
        if first is not r and r.get("end") is not None:
            first["end"] = r["end"]
    return list(faults.values())


def state_rows(run_dir: str | Path, sid: int) -> list[Row]:
    return [r for r in replica_rows(run_dir, sid) if r.get("kind") == "state"]
