"""A brute-force linearizability oracle for small histories, written apart from the checker.

It shares nothing with ``zabray.pipeline`` but the row format: its own register model, and an
exhaustive enumeration of orders (every definite operation, any subset of the unknown ones),
with no cache, no pruning, no symmetry. Slow on purpose, and simple enough to check by eye; the
differential tests hold the real search to its answers.
"""

from __future__ import annotations

from typing import Any

DEFINITE = {"BAD_VERSION", "NO_NODE", "NODE_EXISTS", "NOT_EMPTY"}
NOTHING = (False, None, -1)


def _next(state: tuple[Any, ...], r: dict[str, Any], taking_effect: bool) -> tuple[Any, ...] | None:
    """The register after row ``r``, or None if its recorded outcome cannot happen here."""
    exists, data, ver = state
    kind, outcome, v = r["kind"], r["outcome"], r.get("version")
    anyv = v is None or v < 0
    if kind == "read" and outcome == "fail" and r.get("error") == "NO_NODE":
        return state if not exists else None  # a read that found no znode
    if outcome == "fail":
        code = r.get("error")
        if code == "NO_NODE":
            return state if not exists else None
        if code in ("NODE_EXISTS", "NOT_EMPTY"):
            return state if exists else None
        if code == "BAD_VERSION":
            return state if exists and not anyv and ver != v else None
        return state
    if kind == "read":
        if r.get("result") is None:
            return state if not exists else None
        rv = r.get("result_version")
        ok = exists and data == r["result"] and (rv is None or rv == ver)
        return state if ok else None
    if kind == "write":
        can = exists
    elif kind == "cas":
        can = exists and (anyv or ver == v)
    elif kind == "create":
        can = not exists
    else:  # delete
        can = exists and (anyv or ver == v)
    if outcome == "unknown":
        if not taking_effect or not can:
            return state
    elif not can:
        return None
    if kind in ("write", "cas"):
        new = (True, r.get("value"), ver + 1)
    elif kind == "create":
        new = (True, r.get("value"), 0)
    else:
        new = NOTHING
    rv = r.get("result_version")
    if outcome == "ok" and kind != "delete" and rv is not None and rv != new[2]:
        return None
    return new


def linearizable(rows: list[dict[str, Any]], reads: str = "all") -> bool:
    """Rows of one key (no syncs, no multis). ``reads``: "all" or "none" (reads left out)."""
    ops = []
    for r in rows:
        if r["kind"] == "read" and (reads == "none" or r["outcome"] == "unknown" or
                                    r["outcome"] == "fail" and r.get("error") != "NO_NODE"):
            continue
        if r["outcome"] == "fail" and r.get("error") not in DEFINITE:
            continue
        end = float("inf") if r["outcome"] == "unknown" else r["complete_t"]
        ops.append((r, r["invoke_t"], end))
    n = len(ops)
    definite = [i for i in range(n) if ops[i][0]["outcome"] != "unknown"]

    def fifo_ok(order: list[int], i: int) -> bool:
        r = ops[i][0]
        if r["outcome"] == "unknown":
            return True
        for j in definite:
            q = ops[j][0]
            if j not in order and q is not r and (q["client"], q["session"]) == (r["client"], r["session"]) \
                    and q["op"] < r["op"]:
                return False
        return True

    def go(order: list[int], state: tuple[Any, ...]) -> bool:
        if all(i in order for i in definite):
            return True
        for i in range(n):
            if i in order:
                continue
            # real time: nothing left out may have completed before i was invoked
            if any(ops[j][2] < ops[i][1] for j in range(n) if j not in order and j != i
                   and ops[j][0]["outcome"] != "unknown"):
                continue
            if not fifo_ok(order, i):
                continue
            new = _next(state, ops[i][0], True)
            if new is not None and go(order + [i], new):
                return True
        return False

    return go([], NOTHING)
