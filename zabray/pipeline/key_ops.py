"""A key's operations, read from its history rows, and the value zones that find the common
linearizability violations without a search (``lin_search`` does the rest). Pure."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from zabray.pipeline.lin_search import READ_MODES
from zabray.pipeline.register_model import (
    DEFINITE_FAILS,
    GONE,
    INF,
    UNSEEN,
    WRITES,
    Op,
    needs,
    produces,
)

# -- value zones: the common violations without a search -----------------------------------------

def zone_conflict(ops: Sequence[Op]) -> tuple[list[Op], str] | None:
    """A small set of definite ops that cannot be ordered, found from values' zones, or None.

    Applies to values with a single writer (ok or unknown; failed ones changed nothing). While
    such a value is certainly current — from the earliest completion to the latest invocation
    among its write and its reads — no definite op needing another value, or writing one, fits;
    two such stretches cannot overlap; no read of a value completes before its write begins; a
    definite read of a value no operation left cannot be placed at all."""
    writers: dict[str | None, list[Op]] = {}
    readers: dict[str | None, list[Op]] = {}
    for op in ops:
        if op.outcome != "fail":
            changed, tok = produces(op)
            if changed:
                writers.setdefault(tok, []).append(op)
        if op.kind == "read" and op.definite:
            readers.setdefault(GONE if op.result is None else op.result, []).append(op)
    for tok, rs in readers.items():
        if tok != GONE and tok not in writers:
            r = min(rs, key=lambda o: o.complete)
            return [r], f"no operation of this key left the value {tok!r} that {r.label} read"
    # Without a delete and with at most one create, each version is one state: two definite ops
    # that saw or made one version with different data cannot both be right.
    if not any(op.outcome != "fail" and (op.kind == "delete" or op.parts) for op in ops) \
            and sum(1 for op in ops if op.kind == "create" and op.outcome != "fail") <= 1:
        at: dict[int, Op] = {}
        for op in sorted(ops, key=lambda o: o.complete):
            if op.outcome != "ok" or op.result_version is None or op.kind not in ("read", "write", "cas", "create"):
                continue
            data = op.result if op.kind == "read" else op.value
            if op.kind == "read" and data is None:
                continue
            other = at.setdefault(op.result_version, op)
            if (other.result if other.kind == "read" else other.value) != data:
                return [other, op], (f"{other.label} and {op.label} each show version {op.result_version} "
                                     "with different data (no delete: a version is one state)")
    zones: list[tuple[float, float, str | None, list[Op]]] = []
    for tok, rs in readers.items():
        ws = writers.get(tok, [])
        if tok in (GONE, UNSEEN) or len(ws) != 1:
            continue
        w = ws[0]
        first = min(rs, key=lambda o: o.complete)
        if first.complete < w.invoke:
            return [w, first], f"{first.label} read {tok!r} before {w.label} that wrote it was invoked"
        cluster = [w, *rs] if w.definite else rs
        lo = min(cluster, key=lambda o: o.complete)
        hi = max([w, *rs], key=lambda o: o.invoke)
        if lo.complete < hi.invoke:
            zones.append((lo.complete, hi.invoke, tok, [w, lo, hi]))
    if not zones:
        return None
    zones.sort(key=lambda z: (z[0], z[1]))
    for a, b in zip(zones, zones[1:], strict=False):
        if b[0] < a[1]:
            return (_uniq(a[3] + b[3]), f"{a[2]!r} and {b[2]!r} were each certainly current at once "
                    f"(between {max(a[0], b[0])!r} and {min(a[1], b[1])!r})")
    by_inv = sorted((op for op in ops if op.definite), key=lambda o: o.invoke)
    invs = [op.invoke for op in by_inv]
    for lo_t, hi_t, tok, who in zones:
        for op in by_inv[bisect.bisect_right(invs, lo_t):bisect.bisect_left(invs, hi_t)]:
            if op.complete >= hi_t or op in who:
                continue
            nd = needs(op)
            changed, ptok = produces(op) if op.outcome != "fail" else (False, None)
            other_need = nd is not None and nd[0] is not None and nd[0] != tok
            if other_need or (changed and ptok != tok):
                extra = [op]
                if other_need and nd is not None and len(writers.get(nd[0], [])) == 1:
                    extra.append(writers[nd[0]][0])
                return (_uniq(who + extra), f"{op.label} happened entirely while {tok!r} was certainly current "
                        f"(between {lo_t!r} and {hi_t!r}) but needs or leaves another value")
    return None


def _uniq(ops: Iterable[Op]) -> list[Op]:
    seen: dict[str, Op] = {}
    for op in ops:
        seen.setdefault(op.label + "@" + op.source, op)
    return list(seen.values())


# -- preparing a key's rows ----------------------------------------------------------------------

def _int(v: Any) -> int | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f != f else int(f)  # NaN (pandas' null) -> None


def _str(v: Any) -> str | None:
    if v is None or (isinstance(v, float) and v != v):
        return None
    return str(v)


def _num(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if f != f else f


def source_of(r: Mapping[str, Any]) -> str:
    f, line = _str(r.get("file")), _int(r.get("line"))
    return f"{f}:{line}" if f is not None and line is not None else ""


def ops_of(rows: Iterable[Mapping[str, Any]], reads: str = "after-sync") -> list[Op]:
    """The searchable ops of one key's history rows (``zabray.client.histories`` columns, plus
    ``lin_invoke``: for a read issued right after its session's ``ok`` sync, the sync's
    invocation; and ``file``/``line`` where the row came from).

    ``reads``: "after-sync" searches only reads that follow a sync (ZooKeeper's promise), "all"
    every read, "none" no read. Failed and unknown reads, syncs, and failures without a definite
    code are left out: none of them changed or constrained the register. A multi's sub-ops on
    this key become one op; a failed multi changed nothing and is left out too.
    """
    if reads not in READ_MODES:
        raise ValueError(f"reads must be after-sync, all or none, got {reads!r}")
    out: list[Op] = []
    multis: dict[tuple[str, str, int], list[Op]] = {}
    for r in rows:
        kind, outcome = str(r["kind"]), str(r["outcome"])
        if kind == "sync" or kind not in WRITES and kind not in ("read", "check"):
            continue
        invoke = float(r["invoke_t"])
        own = None
        error = _str(r.get("error"))
        multi = _int(r.get("multi"))
        if kind == "read":
            if outcome == "fail" and error == "NO_NODE":  # the znode was not there: observed like a read
                outcome, r = "ok", {**r, "result": None, "result_version": None}
            if outcome != "ok":
                continue
            lin = _num(r.get("lin_invoke"))
            if reads == "none" or (reads == "after-sync" and lin is None):
                continue
            if lin is not None:
                own, invoke = invoke, lin
        if multi is None and outcome == "fail" and error not in DEFINITE_FAILS:
            continue
        done = _num(r.get("complete_t"))
        complete = INF if outcome == "unknown" or done is None else done
        client, session = _str(r.get("client")) or "", _str(r.get("session")) or ""
        seq = _int(r["op"]) or 0
        op = Op(label=f"{client}#{seq}", process=f"{client}/{session}", seq=seq, kind=kind, outcome=outcome,
                invoke=invoke, complete=complete, value=_str(r.get("value")), version=_int(r.get("version")),
                result=_str(r.get("result")),
                result_version=None if outcome == "unknown" else _int(r.get("result_version")),
                error=error, source=source_of(r), own_invoke=own, zxid=_int(r.get("zxid")))
        if multi is not None:
            multis.setdefault((client, session, multi), []).append(op)
        else:
            out.append(op)
    for (client, _, multi), parts in multis.items():
        parts.sort(key=lambda o: o.seq)
        first = parts[0]
        if first.outcome == "fail" or (first.outcome == "unknown" and all(p.kind == "check" for p in parts)):
            continue
        out.append(replace(first, label=f"{client}#{multi}", seq=multi, kind="multi", value=None, version=None,
                           result=None, result_version=None, parts=tuple(parts)))
    return out


def trivial(ops: Sequence[Op]) -> bool:
    """Blind writes only (no read, no version, no precondition seen): every order is legal."""
    return all(op.kind == "write" and op.outcome != "fail" and op.result_version is None for op in ops)
