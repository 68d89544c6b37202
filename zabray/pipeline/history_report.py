"""What a history check found, and how it is shown. Pure (no Spark, no IO).

``HistoryReport`` holds counts and counterexamples only, never the history. Its verdict is
``PASS`` only when every key was decided and nothing is violated; a key whose search ran out
of budget makes it ``UNKNOWN`` (exit 3 from the CLI), a violation ``FAIL`` (exit 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zabray.client.histories import SCHEMA_VERSION

# (property, the table's words): every promise checked, in the order shown.
PROPERTIES = (
    ("read-state", "reads return a state the key had"),
    ("zxid-order", "changes legal in zxid order"),
    ("fifo", "session FIFO order"),
    ("stale-read", "no read back in time"),
    ("multi-atomic", "multi atomic"),
    ("multi-isolated", "multi isolated"),
)


@dataclass
class HistoryReport:
    """What ``check_histories`` found; only counterexamples, never the history itself."""

    ops: int = 0
    keys: dict[str, int] = field(default_factory=dict)  # verdict -> number of keys
    violations: list[dict[str, Any]] = field(default_factory=list)  # linearizability, per key
    unknown: list[dict[str, Any]] = field(default_factory=list)  # keys past the budget
    session: list[dict[str, Any]] = field(default_factory=list)  # every other property's violations
    outcomes: dict[str, int] = field(default_factory=dict)
    reads: str = "after-sync"
    search: dict[str, float] = field(default_factory=dict)  # per-key search: ms_mean, ms_p99, ms_max, steps_max

    @property
    def ok(self) -> bool:
        """No violation found (see ``verdict``: a run can be without violation yet undecided)."""
        return not self.violations and not self.session

    @property
    def verdict(self) -> str:
        """PASS (everything checked holds), FAIL (a violation), UNKNOWN (no violation, but some
        key was not decided)."""
        if not self.ok:
            return "FAIL"
        return "UNKNOWN" if self.unknown or self.keys.get("unknown") else "PASS"

    def to_dict(self) -> dict[str, Any]:
        return {"history_schema_version": SCHEMA_VERSION, "verdict": self.verdict, "ok": self.ok,
                "ops": self.ops, "keys": self.keys, "outcomes": self.outcomes, "reads": self.reads,
                "search": self.search, "violations": self.violations, "unknown": self.unknown,
                "session_violations": self.session}


def format_history_report(rep: HistoryReport, show: int = 5) -> str:
    """A summary table, then the time line of the first ``show`` counterexamples of each kind."""
    keys = sum(rep.keys.values())
    n_unknown = rep.keys.get("unknown", len(rep.unknown))
    lin = "FAIL" if rep.violations else "UNKNOWN" if n_unknown else "PASS"
    lines = [f"{rep.ops:,} operations ({', '.join(f'{k} {v:,}' for k, v in sorted(rep.outcomes.items()))}) "
             f"on {keys:,} keys",
             f"{'property':<34}  verdict  violations",
             f"{'linearizable (per key)':<34}  {lin:<7}  {len(rep.violations):>10}"
             + (f"  ({n_unknown} keys UNKNOWN: search budget exceeded)" if n_unknown else "")]
    for prop, words in PROPERTIES:
        n = sum(1 for v in rep.session if v["property"] == prop)
        lines.append(f"{words:<34}  {'FAIL' if n else 'PASS':<7}  {n:>10}")
    lines.append(f"verdict: {rep.verdict}" + (" (keys not decided are not passed)" if rep.verdict == "UNKNOWN" else ""))
    for v in rep.violations[:show]:
        lines += ["", v["timeline"]]
    shown: dict[str, int] = {}
    for v in rep.session:
        if shown.get(v["property"], 0) < show:
            shown[v["property"]] = shown.get(v["property"], 0) + 1
            lines += ["", f"[{v['property']}] {v['detail']}", v["timeline"]]
    for v in rep.unknown[:show]:
        lines += ["", v["timeline"]]
    return "\n".join(lines)
