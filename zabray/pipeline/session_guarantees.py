"""ZooKeeper's per-session promises, checked on one session's history (pure: no Spark, no IO).

A session's operations in issue order (``op``) carry the zxid of what they saw or did: a read
the mzxid of the znode state it returned, a write or cas its own txn, a sync its txn. The
*floor* before an operation is the largest such zxid among the session's earlier ``ok``
operations: the session has seen the replicated state at least up to there.

- FIFO client order: an ``ok`` write, cas or sync is ordered after everything the session did
  or saw before it, so its zxid is above the floor (a write issued after a read of zxid z
  cannot commit at or before z; a session's pipelined writes commit in issue order).
- No going back in time (across moves between replicas too): a read that returned the state of
  key k at zxid m is stale when the key had a later state n (known from any client's history)
  with m < n <= floor: the session had already seen a state that includes n.
- A read right after the session's ``sync`` must be linearizable: that one is checked with the
  key's writes by ``zabray.pipeline.linearizability`` (its interval starts at the sync).

``annotate`` computes, from every session's rows, each read's ``next_zxid`` (the key's next
known state); the Spark job does the same with a join and a window.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zabray.pipeline.linearizability import INF, Op, ops_of, render

ORDERED = frozenset({"write", "cas", "sync"})
STATE_KINDS = frozenset({"read", "write", "cas"})


@dataclass(frozen=True, slots=True)
class SessionViolation:
    process: str
    prop: str  # fifo | stale-read
    labels: tuple[str, ...]
    detail: str
    timeline: str


def _z(v: Any) -> int | None:
    if v is None or (isinstance(v, float) and v != v):
        return None
    return int(v)


def annotate(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copy of ``rows`` with ``next_zxid``/``next_label`` on ok reads: the smallest known state
    zxid of the read's key above the one it returned, and an op that wrote or saw that state."""
    rows = [dict(r) for r in rows]
    states: dict[str, dict[int, str]] = defaultdict(dict)
    for r in sorted(rows, key=lambda r: (r["kind"] == "read", str(r.get("client")), int(r["op"]))):
        z = _z(r.get("zxid"))
        if r["outcome"] == "ok" and r["kind"] in STATE_KINDS and z is not None:
            states[r["key"]].setdefault(z, f"{r.get('client')}#{int(r['op'])}")
    ordered = {k: sorted(v) for k, v in states.items()}
    for r in rows:
        z = _z(r.get("zxid"))
        r["next_zxid"] = r["next_label"] = None
        if r["kind"] == "read" and r["outcome"] == "ok" and z is not None:
            later = [s for s in ordered.get(r["key"], []) if s > z]
            if later:
                r["next_zxid"], r["next_label"] = later[0], states[r["key"]][later[0]]
    return rows


def mark_sync_reads(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
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


def _op(r: Mapping[str, Any]) -> Op:
    ops = ops_of([{**r, "lin_invoke": r.get("invoke_t")}], reads="all") if r["kind"] == "read" else ops_of([r])
    if ops:
        return ops[0]
    done = r.get("complete_t")
    return Op(label=f"{r.get('client')}#{int(r['op'])}", process=f"{r.get('client')}/{r.get('session')}",
              seq=int(r["op"]), kind=str(r["kind"]), outcome=str(r["outcome"]), invoke=float(r["invoke_t"]),
              complete=INF if done is None or done != done else float(done))


def check_session(rows: Sequence[Mapping[str, Any]]) -> list[SessionViolation]:
    """Violations in one session's rows (annotated by ``annotate``), in issue order."""
    ordered = sorted(rows, key=lambda r: int(r["op"]))
    out: list[SessionViolation] = []
    floor, floor_row = -1, None
    for r in ordered:
        if r["outcome"] != "ok":
            continue
        z = _z(r.get("zxid"))
        kind = r["kind"]
        if kind in ORDERED and z is not None and floor_row is not None and z <= floor:
            ops = [_op(floor_row), _op(r)]
            out.append(SessionViolation(
                ops[1].process, "fifo", (ops[0].label, ops[1].label),
                f"{kind} {ops[1].label} committed at zxid 0x{z:x}, not after zxid 0x{floor:x} that the session "
                f"had already seen ({ops[0].label})",
                render(str(r["key"]), ops, title=f"session {ops[1].process}: a {kind} ordered before what the "
                       "session saw earlier")))
        if kind == "read" and z is not None and floor_row is not None:
            n = _z(r.get("next_zxid"))
            if n is not None and n <= floor:
                ops = [_op(floor_row), _op(r)]
                out.append(SessionViolation(
                    ops[1].process, "stale-read", (ops[0].label, ops[1].label, str(r.get("next_label"))),
                    f"read {ops[1].label} of {r['key']} returned the state of zxid 0x{z:x}, but the session had "
                    f"already seen zxid 0x{floor:x} ({ops[0].label}) and {r['key']} changed at 0x{n:x} "
                    f"({r.get('next_label')})",
                    render(str(r["key"]), ops, title=f"session {ops[1].process}: a read that goes back in time")))
        if z is not None and z > floor:
            floor, floor_row = z, r
    return out


def check_sessions(rows: Iterable[dict[str, Any]]) -> list[SessionViolation]:
    """Every session of a whole history (all rows, any order): local use and tests."""
    by: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for r in annotate(rows):
        by[(r.get("client"), r.get("session"))].append(r)
    out: list[SessionViolation] = []
    for key in sorted(by, key=str):
        out.extend(check_session(by[key]))
    return out
