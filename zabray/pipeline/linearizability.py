"""Is one key's history linearizable? The verdict, its culprits and their time line. Pure.

``check_key`` runs the complete search of ``zabray.pipeline.lin_search`` on one key (value
zones first: most violations are found without a search) and answers ``ok``, ``violation`` or
``unknown`` (the step budget ran out: undecided, never passed).

A violation is reported with a 1-minimal set of definite operations that cannot be ordered:
shrinking only ever weakens the history (a read or a failed operation left out, an ``ok``
write turned into ``unknown``), so each smaller set is proved non-linearizable by the same
search before it is accepted. When the key's history splits at quiescent points, the culprits
are looked for in the first segment no path gets through, starting from every state the
earlier segments can leave.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from zabray.pipeline.key_ops import ops_of, trivial, zone_conflict
from zabray.pipeline.lin_search import (
    DEFAULT_BUDGET,
    READ_MODES,
    Budget,
    Config,
    OutOfBudget,
    Search,
    _Key,
    frontiers,
    search,
)
from zabray.pipeline.register_model import ABSENT, INF, WRITES, Op, State, produces, state_text, step

__all__ = ["ABSENT", "DEFAULT_BUDGET", "INF", "READ_MODES", "KeyVerdict", "Op", "Search", "State", "check_key",
           "ops_of", "render", "search", "shrink", "step"]


@dataclass(frozen=True, slots=True)
class KeyVerdict:
    key: str
    verdict: str  # ok | violation | unknown
    ops: int
    steps: int
    culprits: tuple[Op, ...] = ()
    relaxed: int = 0
    timeline: str = ""


def check_key(key: str, ops: Sequence[Op], budget: int = DEFAULT_BUDGET, shrink_budget: int | None = None,
              init: State = ABSENT) -> KeyVerdict:
    """The verdict on one key; a violation comes with its 1-minimal culprits and a time line."""
    if trivial(ops):
        return KeyVerdict(key, "ok", len(ops), 0)
    total = shrink_budget if shrink_budget is not None else 5 * budget
    zone = zone_conflict(ops)
    if zone is not None:
        sh = shrink(ops, budget, total, init, seed=zone[0])
        if sh is not None:
            return KeyVerdict(key, "violation", len(ops), sh.spent, tuple(sh.culprits), sh.relaxed,
                              render(key, sh.culprits, sh.relaxed, start=sh.start, why=zone[1]))
    res = search(ops, budget, init)
    if res.ok is None:
        return KeyVerdict(key, "unknown", len(ops), res.steps,
                          timeline=f"key {key}: UNKNOWN (not checked): the search ran out of its budget of "
                          f"{budget:,} steps on {len(ops)} operations; raise --budget to decide it")
    if res.ok:
        return KeyVerdict(key, "ok", len(ops), res.steps)
    sh = shrink(ops, budget, total, init)
    assert sh is not None
    return KeyVerdict(key, "violation", len(ops), res.steps + sh.spent, tuple(sh.culprits), sh.relaxed,
                      render(key, sh.culprits, sh.relaxed, start=sh.start))


@dataclass(frozen=True, slots=True)
class Shrunk:
    culprits: list[Op]
    relaxed: int
    spent: int
    start: str | None  # the states the key can be in when the culprits begin (None: the initial one)


def _relaxable(op: Op) -> bool:
    return op.outcome != "fail" and (op.kind in WRITES or produces(op)[0])


def _window(ops: Sequence[Op], keep: set[int]) -> list[Op]:
    """Only ``keep`` (indices) stays definite; other writes become unknown, reads and failures
    leave; an unknown op invoked after every kept op completed goes (it can always be placed
    last). Each step only allows more orders, so a window that cannot be ordered proves the
    history cannot either."""
    horizon = max((ops[i].complete for i in keep), default=-INF)
    out: list[Op] = []
    for i, op in enumerate(ops):
        if i in keep:
            out.append(op)
        elif _relaxable(op) and op.invoke <= horizon:
            out.append(op if op.outcome == "unknown" else replace(op, outcome="unknown", complete=INF,
                                                                  result_version=None))
    return out


def shrink(ops: Sequence[Op], budget: int, total: int, init: State = ABSENT,
           seed: Sequence[Op] | None = None) -> Shrunk | None:
    """A smallest-found set of definite ops that still cannot be ordered (see ``_window``), each
    candidate proved by a full search; past ``total`` steps shrinking stops with what it has.

    With ``seed`` (a set the zones found), start from it: None if it does not prove itself.
    Otherwise: find the first segment no path gets through (every configuration at every cut
    before it explored), then within it the shortest prefix of definite ops (by completion)
    that cannot be ordered from any configuration it can start in (adding definite ops only
    adds constraints: binary search), then leave out chunks, then single ops, while it still
    cannot be ordered.
    """
    spent = 0
    sub: list[Op] = list(ops)
    shown: list[Op] = sub
    starts: list[Config] = [(init, frozenset())]
    start_text: str | None = None
    key_ops: list[Op] = list(ops)

    def bad(keep: set[int]) -> bool:
        nonlocal spent
        for st, carried in starts:
            if spent >= total:
                return False
            window = _window([key_ops[g] for g in sorted(carried)] + sub,
                             {i + len(carried) for i in keep})
            r = search(window, min(budget, total - spent), st)
            spent += r.steps
            if r.ok is not False:
                return False
        return True

    if seed is not None:
        ids = {id(o) for o in seed}
        keep = {i for i, op in enumerate(sub) if id(op) in ids}
        if len(keep) != len(ids) or not bad(keep):
            return None
        order = sorted(keep, key=lambda i: (sub[i].complete, sub[i].invoke))
    else:
        key = _Key(ops)
        key_ops = key.ops
        sub, shown = key.ops, key.raw
        fr: list[set[Config]] | None
        try:
            fr = frontiers(key, init, Budget(max(1, total // 2)))
        except OutOfBudget:
            fr = None
        if fr is not None and not fr[-1] and len(fr) >= 2:
            k = len(fr) - 2
            sub = [key.ops[g] for g in key.segs[k]]
            shown = [key.raw[g] for g in key.segs[k]]
            starts = sorted(fr[k], key=repr)
            if k > 0:
                earlier = sum(len(key.segs[j]) for j in range(k))
                states = sorted({st for st, _ in starts}, key=repr)
                start_text = (f"starting from the state the {earlier} earlier operations leave: "
                              + " or ".join(state_text(s) for s in states[:4]) + (" ..." if len(states) > 4 else ""))
        definite = sorted((i for i, op in enumerate(sub) if op.definite), key=lambda i: (sub[i].complete, sub[i].invoke))
        lo, hi = 1, len(definite)
        while lo < hi:
            mid = (lo + hi) // 2
            if bad(set(definite[:mid])):
                hi = mid
            else:
                lo = mid + 1
        order = definite[:hi]
        if not bad(set(order)):  # out of budget: report every definite op of the segment
            order = definite
    chunk = max(1, len(order) // 2)
    while spent < total:
        i = 0
        while i < len(order) and spent < total:
            trial = order[:i] + order[i + chunk:]
            if trial and bad(set(trial)):
                order = trial
            else:
                i += chunk
        if chunk == 1:
            break
        chunk //= 2
    kept = set(order)
    culprits = sorted((shown[i] for i in kept), key=lambda op: (op.invoke, op.complete))
    relaxed = sum(1 for i, op in enumerate(sub) if i not in kept and _relaxable(op)
                  and op.invoke <= max(sub[j].complete for j in kept))
    return Shrunk(culprits, relaxed, spent, start_text)


# -- rendering --------------------------------------------------------------------------------

def _t(x: float) -> str:
    return f"{x:.6f}"


def render(key: str, ops: Sequence[Op], relaxed: int = 0, title: str | None = None, width: int = 40,
           start: str | None = None, why: str | None = None) -> str:
    """A text time line: one row per op with its session, label, FILE:LINE, what it did and its
    interval in the history's own (absolute) times, drawn to scale; an unknown op's bar runs off
    the right edge (``~>``). A read searched from its sync shows its own interval."""
    if not ops:
        return f"key {key}: (no operations)"

    def own(op: Op) -> float:
        return op.own_invoke if op.own_invoke is not None else op.invoke

    t0 = min(min(own(op), op.invoke) for op in ops)
    ends = [op.complete for op in ops if op.complete != INF] + [own(op) for op in ops]
    span = max(max(ends) - t0, 1e-9)
    head = title or (f"key {key}: these {len(ops)} operations cannot be put in any order consistent with their "
                     "times and the register")
    lines = [head + (f" (and {relaxed} other writes, each allowed to happen at any time after its invocation "
                     "or never)" if relaxed else "") + (f", {start}" if start else "") + ":"]
    if why:
        lines.append(f"  ({why})")
    wproc = max(len(op.process) for op in ops)
    wlab = max(len(op.label) + (len(op.source) + 3 if op.source else 0) for op in ops)
    wdesc = max(len(op.describe()) for op in ops)
    for op in sorted(ops, key=lambda o: (own(o), o.complete)):
        a = int((own(op) - t0) / span * width)
        lab = op.label + (f" ({op.source})" if op.source else "")
        if op.complete == INF:
            bar = " " * a + "|" + "-" * max(0, width - a - 1) + "~>"
            when = f"{_t(own(op))} .. ?"
        else:
            b = max(a, int((op.complete - t0) / span * width))
            bar = " " * a + ("|" + "-" * max(0, b - a - 1) + "|" if b > a else "|")
            when = f"{_t(own(op))} .. {_t(op.complete)}"
        note = f"  (after its sync, invoked {_t(op.invoke)})" if op.own_invoke is not None else ""
        lines.append(f"  {op.process:<{wproc}}  {lab:<{wlab}}  {op.describe():<{wdesc}}  {when:<35} {bar}{note}")
    return "\n".join(lines)
