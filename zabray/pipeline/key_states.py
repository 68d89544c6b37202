"""One key's states in zxid order, and what each read of it may have returned. Pure.

ZooKeeper orders every change by zxid. From every client's rows of one key:

- ``reveal``: an ``unknown`` write whose value (written by no other operation) some read returned
  did take effect, at the zxid that read carries (its znode's mzxid): Elle's way of learning
  what an indeterminate write did from what was read.
- ``annotate``: the key's changes (``ok`` writes, cas, creates, deletes and multi sub-operations
  with a zxid, and revealed ones) in zxid order. When every change has a zxid, they are replayed
  on the register model: each must be possible where its zxid puts it (``zxid-order``). Every
  ``ok`` read must return a state the key really had (``read-state``): the state of the change
  at its zxid, or the value of a write that did not fail, was not invoked after the read
  completed, and (if both zxids are known) took effect at the read's zxid. A value only a failed
  operation wrote is an aborted read; a value a multi overwrote within itself, an intermediate
  one (``multi-atomic``, ``multi-isolated``). Each read also gets what the session checks need:
  the key's next change after the state it returned (``next_zxid``), and for a read of no znode,
  the zxid ranges in which the key did not exist (``absent_from``/``absent_to``, -1: for ever),
  when every delete of the key has a known zxid.

Assumes, as the linearizability check does, that the history holds every change of the key
(the register workload writes fresh znodes); a key holding only blind writes (the broadcast
log) is not judged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zabray.pipeline.register_model import ABSENT, INF, Op, State, state_text, step

CHANGES = frozenset({"write", "cas", "create", "delete"})


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken promise: ``prop`` (read-state, zxid-order, fifo, stale-read, multi-atomic,
    multi-isolated), where (``process``: a key, a session or a multi), the operations (labels
    ``client#op``), a one-line ``detail`` naming FILE:LINE of each, and a time line."""

    process: str
    prop: str
    labels: tuple[str, ...]
    detail: str
    timeline: str


def z(v: Any) -> int | None:
    if v is None or (isinstance(v, float) and v != v):
        return None
    return int(v)


def num(v: Any) -> float | None:
    if v is None or (isinstance(v, float) and v != v):
        return None
    return float(v)


def s(v: Any) -> str | None:
    if v is None or (isinstance(v, float) and v != v):
        return None
    return str(v)


def label(r: Mapping[str, Any]) -> str:
    return f"{r.get('client')}#{int(r['op'])}"


def ref(r: Mapping[str, Any]) -> str:
    """``client#op (FILE:LINE)``: duplicate labels stay apart."""
    f, line = s(r.get("file")), z(r.get("line"))
    return label(r) + (f" ({f}:{line})" if f is not None and line is not None else "")


def display(r: Mapping[str, Any]) -> Op:
    """One row as an Op for a time line (a multi's sub-operation keeps its own label)."""
    outcome = str(r["outcome"])
    done = num(r.get("complete_t"))
    kind = str(r["kind"])
    result = s(r.get("result"))
    if kind == "read" and outcome == "fail" and r.get("error") == "NO_NODE":
        outcome, result = "ok", None
    f, line = s(r.get("file")), z(r.get("line"))
    m = z(r.get("multi"))
    return Op(label=label(r) + (f" in multi {r.get('client')}#{m}" if m is not None else ""),
              process=f"{r.get('client')}/{r.get('session')}", seq=int(r["op"]), kind=kind, outcome=outcome,
              invoke=float(r["invoke_t"]), complete=INF if outcome == "unknown" or done is None else done,
              value=s(r.get("value")), version=z(r.get("version")), result=result,
              result_version=z(r.get("result_version")), error=s(r.get("error")),
              source=f"{f}:{line}" if f is not None and line is not None else "", zxid=z(r.get("zxid")))


def is_read(r: Mapping[str, Any]) -> bool:
    """An observation: an ok read, or a read that failed with NO_NODE (it found no znode)."""
    return r["kind"] == "read" and (r["outcome"] == "ok" or (r["outcome"] == "fail" and r.get("error") == "NO_NODE"))


def read_result(r: Mapping[str, Any]) -> str | None:
    return None if r["outcome"] == "fail" else s(r.get("result"))


def _group(rows: Iterable[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """State-changing rows as units: a multi's sub-operations on this key together, in op order."""
    units: dict[tuple[Any, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["kind"] in CHANGES or (r["kind"] == "check" and z(r.get("multi")) is not None):
            m = z(r.get("multi"))
            units[(r.get("client"), r.get("session"), m) if m is not None else (id(r),)].append(r)
    return [sorted(u, key=lambda r: int(r["op"])) for u in units.values()]


def _leaves(unit: Sequence[Mapping[str, Any]]) -> tuple[bool, str | None, Mapping[str, Any] | None]:
    """(changes the data, the value it leaves (None: no znode), the row that left it)."""
    changed, value, who = False, None, None
    for r in unit:
        if r["kind"] in ("write", "cas", "create"):
            changed, value, who = True, s(r.get("value")), r
        elif r["kind"] == "delete":
            changed, value, who = True, None, r
    return changed, value, who


def _trivial(rows: Sequence[Mapping[str, Any]]) -> bool:
    return all(r["kind"] in ("write", "sync") and r["outcome"] != "fail" and z(r.get("result_version")) is None
               and z(r.get("multi")) is None for r in rows)


def reveal(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For an unknown write whose value no other operation of the key left: each distinct zxid
    at which some read returned that value, as ``{client, session, op, revealed, by, key}``
    (``by``: the first such read)."""
    units = _group(rows)
    leavers: dict[str | None, list[Mapping[str, Any]]] = defaultdict(list)
    for u in units:
        changed, value, who = _leaves(u)
        if changed and value is not None and who is not None and who["outcome"] != "fail":
            leavers[value].append(who)
    seen: dict[str | None, dict[int, str]] = defaultdict(dict)
    for r in rows:
        m = z(r.get("zxid"))
        if is_read(r) and m is not None and read_result(r) is not None:
            seen[read_result(r)].setdefault(m, ref(r))
    out = []
    for value, ws in leavers.items():
        if len(ws) == 1 and ws[0]["outcome"] == "unknown":
            w = ws[0]
            out += [{"client": w.get("client"), "session": w.get("session"), "op": int(w["op"]), "revealed": m,
                     "by": by, "key": w.get("key")} for m, by in sorted(seen.get(value, {}).items())]
    return out


@dataclass
class _Change:
    zxid: int
    rows: list[Mapping[str, Any]]
    exists: bool
    data: str | None
    version: int | None  # None: not known (no replay, no recorded version)


def annotate(rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[int, Violation]]]:
    """(the rows with ``next_zxid``, ``next_label``, ``absent_from``, ``absent_to`` on reads;
    the problems found, each with the index of the row it is about). Rows carry ``eff_zxid``
    (the recorded zxid, or the one revealed for an unknown write) when there is one."""
    out = [dict(r) for r in rows]
    for r in out:
        r.update(next_zxid=None, next_label=None, absent_from=None, absent_to=None)
    problems: list[tuple[int, Violation]] = []
    if not out or _trivial(out):
        return out, problems
    key = str(out[0]["key"])
    index = {id(r): i for i, r in enumerate(out)}

    def eff(r: Mapping[str, Any]) -> int | None:
        return z(r.get("eff_zxid")) if "eff_zxid" in r else (z(r.get("zxid")) if r["outcome"] == "ok" else None)

    units = [u for u in _group(out) if u[0]["outcome"] != "fail"]
    changing = [u for u in units if _leaves(u)[0]]
    exact = all(eff(u[0]) is not None for u in changing)
    by_zxid: dict[int, list[list[Mapping[str, Any]]]] = defaultdict(list)
    for u in units:
        e = eff(u[0])
        if e is not None:
            by_zxid[e].append(u)
    changes: list[_Change] = []
    state: State = ABSENT
    for zx in sorted(by_zxid):
        us = by_zxid[zx]
        flat = [r for u in us for r in u]
        if len(us) > 1:
            problems.append((index[id(flat[0])], _problem(key, "zxid-order", flat, (
                f"{' and '.join(ref(u[0]) for u in us)} each took effect on {key} at zxid 0x{zx:x}: "
                "one zxid, one transaction"))))
        if exact:  # replay: each change must be possible where its zxid puts it
            before = state
            for fr in flat:
                op = display(fr)
                if fr["outcome"] == "unknown":  # revealed: it took effect
                    op = Op(**{**_fields(op), "outcome": "ok", "complete": op.invoke, "result_version": None})
                nxt = step(state, op)
                if nxt is None:
                    prev = changes[-1] if changes else None
                    was = (f"{state_text(before)} after zxid 0x{prev.zxid:x} ({ref(prev.rows[0])})" if prev
                           else "no znode, before any change")
                    prop = "multi-isolated" if z(fr.get("multi")) is not None else "zxid-order"
                    problems.append((index[id(fr)], _problem(key, prop, [fr, *(prev.rows if prev else [])], (
                        f"{ref(fr)} took effect on {key} at zxid 0x{zx:x}, where the key was {was}: "
                        f"{op.describe()} is impossible there"))))
                    exact = False  # the rest cannot be replayed from a state that cannot be
                    break
                state = nxt
        changed, value, who = _leaves(flat)
        if not changed:
            continue
        ver = state[2] if exact else (z(who.get("result_version")) if who is not None else None)
        if value is None:
            ver = None
        changes.append(_Change(zx, flat, value is not None or (who is not None and who["kind"] != "delete"),
                               value, ver))
    at = {c.zxid: c for c in changes}
    observed = sorted({c.zxid for c in changes} | {m for r in out if is_read(r) and read_result(r) is not None
                                                   and (m := z(r.get("zxid"))) is not None})
    nxt_label = {c.zxid: label(c.rows[0]) for c in changes}
    for r in out:
        if is_read(r) and read_result(r) is not None and z(r.get("zxid")) is not None:
            nxt_label.setdefault(int(r["zxid"]), label(r))
    _read_checks(key, out, at, exact, problems, index, eff)
    # The ranges without a znode (from 0: the history holds every change of the key).
    deletes_known = all(eff(u[0]) is not None for u in changing if _leaves(u)[1] is None
                        and any(r["kind"] == "delete" for r in u))
    absent: list[tuple[int, int]] = []
    if deletes_known:
        start: int | None = 0
        for c in changes:
            if c.exists and start is not None:
                absent.append((start, c.zxid))
                start = None
            elif not c.exists and start is None:
                start = c.zxid
        if start is not None:
            absent.append((start, -1))
        for m in observed:  # a read of a znode at m: it existed at m (created at or before m)
            if m not in at:
                absent = [(a, m) if a < m and (b < 0 or m < b) else (a, b) for a, b in absent]
    for r in out:
        if not is_read(r):
            continue
        m = z(r.get("zxid"))
        if read_result(r) is not None and m is not None:
            i = _bisect_right(observed, m)
            if i < len(observed):
                r["next_zxid"], r["next_label"] = observed[i], nxt_label.get(observed[i])
        elif read_result(r) is None and deletes_known:
            r["absent_from"] = [a for a, _ in absent]
            r["absent_to"] = [b for _, b in absent]
    return out, problems


def _fields(op: Op) -> dict[str, Any]:
    return {f: getattr(op, f) for f in Op.__dataclass_fields__}


def _bisect_right(xs: list[int], x: int) -> int:
    import bisect

    return bisect.bisect_right(xs, x)


def _read_checks(key: str, out: list[dict[str, Any]], at: dict[int, _Change], exact: bool,
                 problems: list[tuple[int, Violation]], index: dict[int, int], eff: Any) -> None:
    """``read-state`` (and aborted / intermediate reads) for every read of a znode."""
    leavers: dict[str | None, list[Mapping[str, Any]]] = defaultdict(list)
    failed: dict[str | None, list[Mapping[str, Any]]] = defaultdict(list)
    inner: dict[str | None, list[Mapping[str, Any]]] = defaultdict(list)
    for u in _group(out):
        changed, value, who = _leaves(u)
        if changed and value is not None and who is not None:
            (failed if u[0]["outcome"] == "fail" else leavers)[value].append(who)
        for r in u:  # a value the multi itself overwrote on this key was never a state
            if r is not who and r["kind"] in ("write", "cas", "create"):
                inner[s(r.get("value"))].append(r)
    for r in out:
        if not is_read(r) or read_result(r) is None:
            continue
        data, m, rv = read_result(r), z(r.get("zxid")), z(r.get("result_version"))
        done = num(r.get("complete_t"))
        got = f"{data!r}" + (f" v{rv}" if rv is not None else "") + (f" at zxid 0x{m:x}" if m is not None else "")
        if m is not None and m in at:
            c = at[m]
            if not (c.exists and c.data == data and (rv is None or c.version is None or rv == c.version)):
                left = "no znode" if not c.exists else f"{c.data!r}" + (f" v{c.version}" if c.version is not None else "")
                mid = any(w in c.rows for w in inner.get(data, []))  # a value the multi overwrote itself
                problems.append((index[id(r)], _problem(key, "multi-isolated" if mid else "read-state", [r, *c.rows], (
                    f"read {ref(r)} of {key} returned {got}, but the change of {key} at 0x{m:x} "
                    f"({ref(c.rows[0])}) left {left}" + (": an intermediate state of that multi" if mid else "")))))
            continue
        nowhere = m is not None and exact  # every change has a known zxid, none at m
        cands = [] if nowhere else [
            w for w in leavers.get(data, []) if (done is None or float(w["invoke_t"]) <= done)
            and (m is None or eff(w) is None or eff(w) == m)
            and (rv is None or z(w.get("result_version")) is None or z(w.get("result_version")) == rv)]
        if cands:
            continue
        ws = [] if nowhere else leavers.get(data, [])
        prop = "read-state"
        if ws:
            w = ws[0]
            if done is not None and float(w["invoke_t"]) > done:
                why = f"{ref(w)} that wrote it was invoked after the read completed"
            elif m is not None and eff(w) is not None and eff(w) != m:
                why = f"{ref(w)} wrote it at zxid 0x{eff(w):x}"
            else:
                why = f"{ref(w)} wrote it with version {w.get('result_version')}"
            culprits = [r, w]
        elif failed.get(data):
            w = failed[data][0]
            multi = z(w.get("multi")) is not None
            prop = "multi-atomic" if multi else "read-state"
            why = (f"only {ref(w)}, which failed{' (its multi failed: none of it may be seen)' if multi else ''}, "
                   "wrote it")
            culprits = [r, w]
        elif inner.get(data):
            w = inner[data][0]
            prop = "multi-isolated"
            why = f"{ref(w)} wrote it inside a multi that overwrote it before committing: never a state"
            culprits = [r, w]
        else:
            why = "no operation of this key wrote it"
            culprits = [r]
        if nowhere and not failed.get(data) and not inner.get(data):
            why = f"no operation changed {key} at 0x{m:x} (every change of the key has a known zxid)"
        problems.append((index[id(r)], _problem(key, prop, culprits, (
            f"read {ref(r)} of {key} returned {got}, a state the key never had: {why}"))))


def _problem(key: str, prop: str, rows: Sequence[Mapping[str, Any]], detail: str) -> Violation:
    from zabray.pipeline.linearizability import render

    seen: dict[int, Mapping[str, Any]] = {}
    for r in rows:
        seen.setdefault(id(r), r)
    ops = [display(r) for r in seen.values()]
    return Violation(key, prop, tuple(label(r) for r in seen.values()), detail,
                     render(key, ops, title=f"key {key}: {detail}"))
