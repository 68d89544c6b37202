"""ZooKeeper's per-session promises, checked on one session's history (pure: no Spark, no IO).

A session's operations in issue order (``op``) carry the zxid of what they saw or did: a read
the mzxid of the znode state it returned, a write, cas, create, delete or multi its own txn, a
sync its txn. The *floor* before an operation is the largest zxid the session had seen through
its earlier ``ok`` operations: it has seen the replicated state at least up to there.

Every read is checked, plain ones too (sequential consistency per session against the global
zxid order): a read returns a state its key really had (``key_states``), at or after the
session's floor, and the session never goes back in time.

- FIFO client order (``fifo``): an ``ok`` write, cas, create, delete, multi or sync is ordered
  after everything the session did or saw before it, so its zxid is above the floor.
- No going back in time (``stale-read``, across moves between replicas and across keys): a read
  that returned the state of key k at zxid m is stale when k had a later change n (known from
  any client's history) with m < n <= floor. A read of no znode is stale when the key existed
  throughout from the floor on (every delete of it has a known zxid); otherwise the session has
  now seen at least the earliest point from the floor on at which the key did not exist.
- A read right after the session's ``sync`` must be linearizable: that one is also checked with
  the key's writes by ``zabray.pipeline.linearizability`` (its interval starts at the sync).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from zabray.pipeline.key_states import Violation, annotate, display, is_read, label, read_result, ref, z
from zabray.pipeline.linearizability import render

ORDERED = frozenset({"write", "cas", "create", "delete", "check", "sync"})
SessionViolation = Violation


def mark_sync_reads(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copy of ``rows`` with ``lin_invoke``: on a read whose session's previous op (issue order)
    is an ``ok`` sync, the sync's invocation time (that read must be linearizable from there)."""
    out = [dict(r) for r in rows]
    prev: dict[tuple[Any, Any], dict[str, Any]] = {}
    for r in sorted(out, key=lambda r: (str(r.get("client")), str(r.get("session")), int(r["op"]))):
        p = prev.get((r.get("client"), r.get("session")))
        r["lin_invoke"] = (p["invoke_t"] if r["kind"] == "read" and p is not None and p["kind"] == "sync"
                           and p["outcome"] == "ok" else None)
        prev[(r.get("client"), r.get("session"))] = r
    return out


def _first_absent(r: Mapping[str, Any], floor: int) -> int | None:
    """The smallest zxid >= floor at which the read's key had no znode, or None if none."""
    best: int | None = None
    for a, b in zip(r["absent_from"], r["absent_to"], strict=True):
        a, b = int(a), int(b)
        if b >= 0 and b <= floor:
            continue
        point = max(a, floor)
        if best is None or point < best:
            best = point
    return best


def check_session(rows: Sequence[Mapping[str, Any]]) -> list[Violation]:
    """Violations in one session's rows (annotated by ``key_states.annotate``), in issue order."""
    ordered = sorted(rows, key=lambda r: int(r["op"]))
    out: list[Violation] = []
    floor, floor_row = -1, None
    multi_done: set[int] = set()
    for r in ordered:
        reads = is_read(r)
        if r["outcome"] != "ok" and not reads:
            continue
        zx = z(r.get("zxid"))
        seen: int | None = None  # what this op shows the session has seen
        if reads:
            if read_result(r) is not None and zx is not None:
                n = z(r.get("next_zxid"))
                if floor_row is not None and n is not None and n <= floor:
                    out.append(_violation(r, floor_row, "stale-read", (
                        f"read {ref(r)} of {r['key']} returned the state of zxid 0x{zx:x}, but the session had "
                        f"already seen zxid 0x{floor:x} ({ref(floor_row)}) and {r['key']} changed at 0x{n:x} "
                        f"({r.get('next_label')})"), "a read that goes back in time", extra=r.get("next_label")))
                seen = zx
            elif read_result(r) is None and r.get("absent_from") is not None:
                seen = _first_absent(r, floor)
                if seen is None and floor_row is not None:
                    out.append(_violation(r, floor_row, "stale-read", (
                        f"read {ref(r)} of {r['key']} found no znode, but the session had already seen zxid "
                        f"0x{floor:x} ({ref(floor_row)}) and {r['key']} existed from then on"),
                        "a read that goes back in time (to before a create, or across a delete)"))
        else:
            m = z(r.get("multi"))
            if m is not None:
                if m in multi_done:
                    continue  # a multi's rows share one zxid: judged once, at its first row
                multi_done.add(m)
            kind = "multi" if m is not None else r["kind"]
            if r["kind"] in ORDERED and zx is not None and floor_row is not None and zx <= floor:
                out.append(_violation(r, floor_row, "fifo", (
                    f"{kind} {ref(r)} committed at zxid 0x{zx:x}, not after zxid 0x{floor:x} that the session had "
                    f"already seen ({ref(floor_row)})"), f"a {kind} ordered before what the session saw earlier"))
            seen = zx
        if seen is not None and seen > floor:
            floor, floor_row = seen, r
    return out


def _violation(r: Mapping[str, Any], floor_row: Mapping[str, Any], prop: str, detail: str, title: str,
               extra: Any = None) -> Violation:
    ops = [display(floor_row), display(r)]
    labels = (label(floor_row), label(r)) + ((str(extra),) if extra is not None else ())
    return Violation(ops[1].process, prop, labels, detail,
                     render(str(r["key"]), ops, title=f"session {ops[1].process}: {title}"))


def annotate_all(rows: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[Violation]]:
    """Every key of a whole history annotated (local use and tests); the keys' problems."""
    by_key: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        by_key[r["key"]].append(r)
    out: list[dict[str, Any]] = []
    problems: list[Violation] = []
    for k in sorted(by_key, key=str):
        a, p = annotate(by_key[k])
        out += a
        problems += [v for _, v in p]
    return out, problems


def check_sessions(rows: Iterable[Mapping[str, Any]]) -> list[Violation]:
    """The session promises over every session of a whole history (all rows, any order)."""
    annotated, _ = annotate_all(rows)
    by: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for r in annotated:
        by[(r.get("client"), r.get("session"))].append(r)
    out: list[Violation] = []
    for key in sorted(by, key=str):
        out.extend(check_session(by[key]))
    return out
