"""Every history check on rows in memory, composed exactly as the Spark job composes them. Pure.

The steps, each a pure function over one group of rows (``history_checks`` runs each with
``groupBy(...).applyInPandas`` on Spark):

1. per key: the linearizability verdict (``linearizability.check_key``), and the zxids reads
   reveal for unknown writes (``key_states.reveal``);
2. per multi (and per revealed unknown write): the zxid it took effect at, if any
   (``multi_checks.consolidate``);
3. per key: the states in zxid order and every read's judgement (``key_states.annotate``);
4. per session: FIFO order and no going back in time (``session_guarantees.check_session``).

Rows must already be checked (``history_rows``); ``check_rows`` checks how they fit together.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from zabray.pipeline import history_rows
from zabray.pipeline.history_report import HistoryReport
from zabray.pipeline.key_states import Violation, annotate, reveal
from zabray.pipeline.linearizability import DEFAULT_BUDGET, KeyVerdict, check_key, ops_of
from zabray.pipeline.multi_checks import consolidate
from zabray.pipeline.session_guarantees import check_session, mark_sync_reads


def lin_row(run: Any, v: KeyVerdict) -> dict[str, Any]:
    return {"run": run, "key": v.key, "verdict": v.verdict, "ops": v.ops, "steps": v.steps,
            "culprits": [op.label for op in v.culprits], "sources": [op.source for op in v.culprits],
            "relaxed": v.relaxed, "timeline": v.timeline}


def violation_row(run: Any, v: Violation) -> dict[str, Any]:
    return {"run": run, "process": v.process, "property": v.prop, "ops": list(v.labels), "detail": v.detail,
            "timeline": v.timeline}


def unit_of(r: Mapping[str, Any]) -> tuple[Any, ...]:
    """What shares one zxid: a multi's rows, else one row."""
    m = r.get("multi")
    return (r.get("client"), r.get("session"), "m", int(m)) if m is not None else \
        (r.get("client"), r.get("session"), "o", int(r["op"]))


def with_eff_zxids(rows: Sequence[Mapping[str, Any]], reveals: Iterable[Mapping[str, Any]]
                   ) -> tuple[list[dict[str, Any]], list[Violation]]:
    """Step 2 over a whole history."""
    by_op: dict[tuple[Any, Any, int], list[Mapping[str, Any]]] = defaultdict(list)
    for v in reveals:
        by_op[(v["client"], v["session"], int(v["op"]))].append(v)
    units: dict[tuple[Any, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        units[unit_of(r)].append(r)
    out: list[dict[str, Any]] = []
    problems: list[Violation] = []
    for u in units.values():
        rv = [v for r in u for v in by_op.get((r.get("client"), r.get("session"), int(r["op"])), [])]
        rows_u, p = consolidate(u, rv)
        out += rows_u
        problems += p
    return out, problems


def check_rows(rows: Sequence[Mapping[str, Any]], *, reads: str = "after-sync", budget: int = DEFAULT_BUDGET,
               run: str = "run") -> HistoryReport:
    """Every check over ``rows`` (one run's history); HistoryInputError if they do not fit
    together or there are none."""
    history_rows.check_rows(rows)
    ops_of([], reads)  # validate ``reads``
    rep = HistoryReport(reads=reads)
    for r in rows:
        rep.outcomes[str(r["outcome"])] = rep.outcomes.get(str(r["outcome"]), 0) + 1
    rep.ops = len(rows)
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in mark_sync_reads(rows):
        by_key[str(r["key"])].append(r)
    reveals: list[dict[str, Any]] = []
    problems: list[Violation] = []
    for k in sorted(by_key):
        krows = by_key[k]
        if any(r["kind"] != "sync" for r in krows):
            v = check_key(k, ops_of(krows, reads=reads), budget=budget)
            rep.keys[v.verdict] = rep.keys.get(v.verdict, 0) + 1
            if v.verdict == "violation":
                rep.violations.append(lin_row(run, v))
            elif v.verdict == "unknown":
                rep.unknown.append(lin_row(run, v))
        reveals += reveal(krows)
    eff_rows, p = with_eff_zxids([r for k in sorted(by_key) for r in by_key[k]], reveals)
    problems += p
    by_key2: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in eff_rows:
        by_key2[str(r["key"])].append(r)
    annotated: list[dict[str, Any]] = []
    for k in sorted(by_key2):
        a, kp = annotate(by_key2[k])
        annotated += a
        problems += [v for _, v in kp]
    by_session: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in annotated:
        by_session[(str(r["client"]), str(r["session"]))].append(r)
    for s in sorted(by_session):
        problems += check_session(by_session[s])
    rep.session = [violation_row(run, v) for v in problems]
    return rep
