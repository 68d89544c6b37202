"""The check report as a text table (for people) and as JSON (``check.json``, for tools)."""

from __future__ import annotations

import json
import textwrap
from os import PathLike
from pathlib import Path
from typing import Any

from zabray.pipeline.checks import CheckReport
from zabray.trace.records import SCHEMA_VERSION

REPORT_VERSION = 1


def format_table(report: CheckReport, text_width: int = 72) -> str:
    """One line per property: name, PASS/FAIL, violations, the first counterexample (wrapped)."""
    name_w = max([len("property"), *(len(r.name) for r in report.results)])
    head = f"{'property':<{name_w}}  verdict  {'violations':>10}  first counterexample"
    lines = [head, "-" * (len(head) + text_width - len("first counterexample"))]
    for r in report.results:
        text = (r.counterexample or {}).get("text", "-" if r.holds else "")
        wrapped = textwrap.wrap(text, text_width) or [""]
        lines.append(f"{r.name:<{name_w}}  {r.verdict:<7}  {r.violations:>10}  {wrapped[0]}")
        lines += [" " * (name_w + 23) + w for w in wrapped[1:]]
    failed = len(report.failed)
    lines.append(f"{len(report.results) - failed} of {len(report.results)} properties hold"
                 + (f"; {failed} FAIL" if failed else ""))
    return "\n".join(lines)


def report_dict(report: CheckReport, **extra: Any) -> dict[str, Any]:
    """The JSON document: versions, verdicts, counterexamples, input summary, ``extra`` keys."""
    return {"report_version": REPORT_VERSION, "trace_schema_version": SCHEMA_VERSION,
            **report.to_dict(), **extra}


def write_json(report: CheckReport, path: str | PathLike[str], **extra: Any) -> Path:
    """Write :func:`report_dict` to ``path`` (parents created), atomically via a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report_dict(report, **extra), indent=2, default=str) + "\n")
    tmp.replace(path)
    return path
