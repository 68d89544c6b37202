"""Is one key's history linearizable? A pure search (no Spark, no IO), checked per key.

The model is a ZooKeeper znode as a versioned register: the state is (exists, data, version).
``write`` is setData with version -1, ``cas`` is setData with an expected version, ``create``
starts at version 0, ``delete`` (optionally versioned) removes it, ``read`` observes it. A
``fail`` with a ZooKeeper code (BAD_VERSION, NO_NODE, NODE_EXISTS) is a definite outcome and is
ordered too (its precondition was false at its point); other failures changed nothing and are
dropped. An ``unknown`` operation may take effect at any time after its invocation, or never:
it has no completion, and the search succeeds once every definite operation is placed.

The search is Wing & Gong's, as refined by Lowe and used by Knossos and Porcupine: operations
are call/return entries in a doubly linked list ordered by time; the search repeatedly takes
the earliest entry, linearizes a call whose transition the model accepts, and backtracks on
a return whose operation is not yet placed. A cache of visited (placed set as a bitset, state)
pairs prunes every configuration already explored, which is what keeps it near-linear on the
histories a real system produces. Within one session, a definite operation is also ordered
after the session's earlier definite operations on the key (FIFO client order), even when the
session had several in flight. Every search has a step budget: past it the verdict is
``unknown`` (never a guess).

A violation is reported with a 1-minimal set of definite operations that cannot be ordered:
shrinking only ever weakens the history (a read or a failed operation left out, an ``ok``
write turned into ``unknown``), so each smaller set is proved non-linearizable by the same
search before it is accepted, and the report lists how many writes were so relaxed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

INF = float("inf")
DEFINITE_FAILS = frozenset({"BAD_VERSION", "NO_NODE", "NODE_EXISTS", "NOT_EMPTY"})
WRITES = frozenset({"write", "cas", "create", "delete"})
DEFAULT_BUDGET = 200_000
WINDOW = 8
UNSEEN = "\x00unseen"  # the data an unobserved unknown write leaves (no read can match it)

State = tuple[bool, "str | None", int]
ABSENT: State = (False, None, -1)


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a key's history, ready for the search. ``complete`` is INF if unknown."""

    label: str
    process: str
    seq: int
    kind: str
    outcome: str
    invoke: float
    complete: float
    value: str | None = None
    version: int | None = None
    result: str | None = None
    result_version: int | None = None
    error: str | None = None

    @property
    def definite(self) -> bool:
        return self.outcome != "unknown"

    def describe(self) -> str:
        """A short human rendering: ``cas v2->'x' ok v3``, ``read -> 'x' v3``."""
        v = "" if self.version is None or self.version < 0 else f" v{self.version}"
        if self.kind == "read":
            what = "read -> " + ("(no znode)" if self.result is None and self.outcome == "ok" else repr(self.result))
            if self.result_version is not None:
                what += f" v{self.result_version}"
        elif self.kind in ("write", "create"):
            what = f"{self.kind} {self.value!r}"
        elif self.kind == "cas":
            what = f"cas{v} -> {self.value!r}"
        else:
            what = f"{self.kind}{v}"
        out = self.outcome if self.outcome != "fail" else f"fail {self.error}"
        if self.outcome == "ok" and self.kind != "read" and self.result_version is not None:
            out += f" v{self.result_version}"
        return f"{what}  {out}"


@dataclass(frozen=True, slots=True)
class Search:
    """A search's answer: ``ok`` True/False, or None when the budget ran out."""

    ok: bool | None
    steps: int


@dataclass(frozen=True, slots=True)
class KeyVerdict:
    key: str
    verdict: str  # ok | violation | unknown
    ops: int
    steps: int
    culprits: tuple[Op, ...] = ()
    relaxed: int = 0
    timeline: str = ""


# -- the model --------------------------------------------------------------------------------

def _applies(state: State, op: Op) -> bool:
    exists, _, ver = state
    if op.kind in ("write",):
        return exists
    if op.kind == "cas":
        return exists and ver == op.version
    if op.kind == "create":
        return not exists
    if op.kind == "delete":
        return exists and (op.version is None or op.version < 0 or ver == op.version)
    return True


def _effect(state: State, op: Op) -> State:
    if op.kind in ("write", "cas"):
        return (True, op.value, state[2] + 1)
    if op.kind == "create":
        return (True, op.value, 0)
    if op.kind == "delete":
        return ABSENT
    return state


def step(state: State, op: Op) -> State | None:
    """The state after ``op`` at this point, or None if its recorded outcome is impossible here."""
    exists, data, ver = state
    if op.outcome == "unknown":
        return _effect(state, op) if _applies(state, op) else state
    if op.outcome == "fail":
        code = op.error
        if code == "NO_NODE":
            return state if not exists else None
        if code == "NODE_EXISTS":
            return state if exists else None
        if code == "BAD_VERSION":
            return state if exists and op.version is not None and ver != op.version else None
        if code == "NOT_EMPTY":  # children are not modelled: it only says the znode existed
            return state if exists else None
        return state
    if op.kind == "read":
        if op.result is None:
            return state if not exists else None
        if not exists or data != op.result or (op.result_version is not None and op.result_version != ver):
            return None
        return state
    if not _applies(state, op):
        return None
    new = _effect(state, op)
    if op.result_version is not None and op.kind != "delete" and new[2] != op.result_version:
        return None
    return new


# -- the search -------------------------------------------------------------------------------

def search(ops: Sequence[Op], budget: int = DEFAULT_BUDGET, init: State = ABSENT,
           finals: set[State] | None = None) -> Search:
    """Wing & Gong / Lowe with a visited-configuration cache (module doc). ``ops`` in any order.

    With ``finals``, the search does not stop at the first order found: it collects into
    ``finals`` every state some legal order (with any subset of the unknown ops) can end in.
    """
    # Unknown blind writes whose value no read returned are interchangeable: each, if it takes
    # effect, bumps the version and leaves data nobody saw. Only the earliest-invoked unplaced one
    # may be placed next (any order using k of them can use the k earliest instead), so the cache
    # sees k+1 configurations where it would see 2^k subsets.
    seen = {op.result for op in ops if op.kind == "read" and op.outcome == "ok"}
    pool = sorted((i for i, op in enumerate(ops) if op.outcome == "unknown" and op.kind == "write"
                   and op.value not in seen), key=lambda i: (ops[i].invoke, i))
    if pool:
        ops = [replace(op, value=UNSEEN) if op.outcome == "unknown" and op.kind == "write" and op.value not in seen
               else op for op in ops]
    in_pool = [False] * len(ops)
    for i in pool:
        in_pool[i] = True
    used = 0
    n = len(ops)
    # Entries: 1..2n (0 is the head sentinel, 2n+1 the tail). Calls before returns at equal times,
    # so operations that touch at an instant count as concurrent (never a false alarm).
    events: list[tuple[float, int, int]] = []
    for i, op in enumerate(ops):
        events.append((op.invoke, 0, i))
        if op.definite:
            events.append((op.complete, 1, i))
    events.sort()
    m = len(events)
    tail = m + 1
    nxt = list(range(1, m + 2)) + [tail]
    prv = [0, *range(0, m + 1)]
    entry_op = [0] * (m + 2)
    is_call = [False] * (m + 2)
    ret_of = [0] * n  # the return entry of an op's call (0 for unknown ops)
    call_of = [0] * n
    for pos, (_, kind, i) in enumerate(events, start=1):
        entry_op[pos] = i
        if kind == 0:
            is_call[pos] = True
            call_of[i] = pos
        else:
            ret_of[i] = pos
    # FIFO within a session: a definite op waits for the session's earlier definite ops.
    pred = [-1] * n
    last: dict[str, int] = {}
    for i in sorted((i for i, op in enumerate(ops) if op.definite), key=lambda i: (ops[i].process, ops[i].seq)):
        proc = ops[i].process
        if proc in last:
            pred[i] = last[proc]
        last[proc] = i

    def unlink(e: int) -> None:
        nxt[prv[e]] = nxt[e]
        prv[nxt[e]] = prv[e]

    def relink(e: int) -> None:
        nxt[prv[e]] = e
        prv[nxt[e]] = e

    remaining = sum(1 for op in ops if op.definite)
    placed = 0
    state = init
    cache: set[tuple[int, State]] = set()
    stack: list[tuple[int, State]] = []
    steps = 0
    e = nxt[0]
    found = False
    while True:
        if not remaining:
            if finals is None:
                return Search(True, steps)
            finals.add(state)
            found = True
        if e == tail or not is_call[e]:
            # A definite op reached its return unplaced (or nothing is left to try): backtrack.
            if not stack:
                return Search(found, steps)
            e, state = stack.pop()
            i = entry_op[e]
            placed &= ~(1 << i)
            if in_pool[i]:
                used -= 1
            if ret_of[i]:
                relink(ret_of[i])
                remaining += 1
            relink(e)
            e = nxt[e]
            continue
        i = entry_op[e]
        p = pred[i]
        if (p < 0 or placed >> p & 1) and (not in_pool[i] or pool[used] == i):
            steps += 1
            if steps > budget:
                return Search(None, steps)
            new = step(state, ops[i])
            if new is not None:
                key = (placed | 1 << i, new)
                if key not in cache:
                    cache.add(key)
                    stack.append((e, state))
                    state, placed = new, key[0]
                    if in_pool[i]:
                        used += 1
                    unlink(e)
                    if ret_of[i]:
                        unlink(ret_of[i])
                        remaining -= 1
                    e = nxt[0]
                    continue
        e = nxt[e]


# -- preparing a key's rows -------------------------------------------------------------------

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


def ops_of(rows: Iterable[Mapping[str, Any]], reads: str = "after-sync") -> list[Op]:
    """The searchable ops of one key's history rows (``zabray.client.histories`` columns, plus
    ``lin_invoke``: for a read issued right after its session's ``ok`` sync, the sync's invocation).

    ``reads``: "after-sync" checks only reads that follow a sync (ZooKeeper's promise), "all"
    every read, "none" no read. Failed reads, unknown reads, syncs and failures without a
    definite code are dropped: none of them changed or constrained the register.
    """
    if reads not in ("after-sync", "all", "none"):
        raise ValueError(f"reads must be after-sync, all or none, got {reads!r}")
    out: list[Op] = []
    for r in rows:
        kind, outcome = r["kind"], r["outcome"]
        if kind == "sync" or kind not in WRITES and kind != "read":
            continue
        invoke = float(r["invoke_t"])
        error = _str(r.get("error"))
        if kind == "read":
            if outcome != "ok":
                continue
            lin = r.get("lin_invoke")
            if reads == "none" or (reads == "after-sync" and (lin is None or lin != lin)):
                continue
            if lin is not None and lin == lin:
                invoke = float(lin)
        if outcome == "fail" and error not in DEFINITE_FAILS:
            continue
        complete = r.get("complete_t")
        done = INF if outcome == "unknown" or complete is None or complete != complete else float(complete)
        client, session = _str(r.get("client")) or "", _str(r.get("session")) or ""
        out.append(Op(label=f"{client}#{_int(r['op'])}", process=f"{client}/{session}", seq=_int(r["op"]) or 0,
                      kind=kind, outcome=outcome, invoke=invoke, complete=max(done, invoke),
                      value=_str(r.get("value")), version=_int(r.get("version")), result=_str(r.get("result")),
                      result_version=None if outcome == "unknown" else _int(r.get("result_version")),
                      error=error))
    return out


def _trivial(ops: Sequence[Op]) -> bool:
    """Blind writes only (no read, no version, no precondition seen): every order is legal."""
    return all(op.kind == "write" and op.outcome != "fail" and op.result_version is None for op in ops)


# -- verdicts and shrinking -------------------------------------------------------------------

def check_key(key: str, ops: Sequence[Op], budget: int = DEFAULT_BUDGET, shrink_budget: int | None = None,
              init: State = ABSENT) -> KeyVerdict:
    """The verdict on one key; a violation comes with its 1-minimal culprits and a time line."""
    if _trivial(ops):
        return KeyVerdict(key, "ok", len(ops), 0)
    res = search(ops, budget, init)
    if res.ok is None:
        return KeyVerdict(key, "unknown", len(ops), res.steps,
                          timeline=f"key {key}: unknown, budget of {budget:,} search steps exceeded "
                          f"({len(ops)} operations)")
    if res.ok:
        return KeyVerdict(key, "ok", len(ops), res.steps)
    sh = shrink(ops, budget, shrink_budget if shrink_budget is not None else 20 * budget, init)
    return KeyVerdict(key, "violation", len(ops), res.steps + sh.spent, tuple(sh.culprits), sh.relaxed,
                      render(key, sh.culprits, sh.relaxed, start=sh.start))


@dataclass(frozen=True, slots=True)
class Shrunk:
    culprits: list[Op]
    relaxed: int
    spent: int
    start: str | None  # the states the key can be in when the culprits begin (None: the initial one)


def _window(ops: Sequence[Op], keep: set[str], since: float) -> list[Op]:
    """Only ``keep`` stays definite; of the ops invoked from ``since`` on (and unknown ops still
    pending then), reads and failures leave and ``ok`` writes become unknown; an unknown op
    invoked after every kept op completed goes (it can always be placed last). Each step only
    allows more orders, so a window that cannot be ordered proves the history cannot either."""
    horizon = max((op.complete for op in ops if op.label in keep), default=-INF)
    out: list[Op] = []
    for op in ops:
        if op.label in keep:
            out.append(op)
        elif (op.invoke >= since or op.outcome == "unknown") and op.kind in WRITES and op.outcome != "fail" \
                and op.invoke <= horizon:
            out.append(op if op.outcome == "unknown" else replace(op, outcome="unknown", complete=INF,
                                                                  result_version=None))
    return out


def _state_text(s: State) -> str:
    return "(no znode)" if not s[0] else f"{s[1]!r} v{s[2]}"


def shrink(ops: Sequence[Op], budget: int, total: int, init: State = ABSENT) -> Shrunk:
    """A smallest-found set of definite ops that still cannot be ordered (see ``_window``), each
    candidate proved by a full search; past ``total`` steps shrinking stops with what it has.

    1. The shortest prefix of definite ops (by completion) that cannot be ordered: adding
       definite ops only adds constraints, so this is monotone and found by binary search.
    2. The latest quiescent point before its end from which the rest still cannot be ordered,
       starting from any state the earlier operations can leave (collected by the search).
    3. Leave out chunks, then single ops, of what remains, while it still cannot be ordered.
    """
    definite = sorted((op for op in ops if op.definite), key=lambda op: (op.complete, op.invoke))
    spent = 0

    def bad(keep: set[str], since: float = -INF, inits: frozenset[State] = frozenset({init})) -> bool:
        nonlocal spent
        sub = _window(ops, keep, since)
        for s in sorted(inits, key=repr):
            if spent >= total:
                return False
            r = search(sub, min(budget, total - spent), s)
            spent += r.steps
            if r.ok is not False:
                return False
        return True

    lo, hi = 1, len(definite)
    while lo < hi:
        mid = (lo + hi) // 2
        if bad({op.label for op in definite[:mid]}):
            hi = mid
        else:
            lo = mid + 1
    prefix = definite[:hi]
    since, inits, start = -INF, frozenset({init}), None
    if not bad({op.label for op in prefix}):  # out of budget: report every definite op
        prefix = definite
    else:
        # Quiescent points: no definite op of the key is in flight at the invocation of prefix op j.
        by_invoke = sorted(prefix, key=lambda op: op.invoke)
        # Short prefixes are shrunk whole (the earlier writes make the better explanation); a long
        # one is cut, leaving a window of at least WINDOW ops to shrink.
        cuts = [j for j in range(1, len(by_invoke) - WINDOW + 1) if len(by_invoke) > 3 * WINDOW
                and not any(op.invoke < by_invoke[j].invoke < op.complete for op in definite)]
        tried, back = 0, 1
        while cuts and tried < 12 and spent < total:
            j = cuts[max(0, len(cuts) - back)]
            t = by_invoke[j].invoke
            before = [op for op in ops if op.invoke < t]
            finals: set[State] = set()
            r = search(before, min(budget, max(0, total - spent)), init, finals)
            spent += r.steps
            window = {op.label for op in by_invoke[j:]}
            if r.ok and finals and bad(window, t, frozenset(finals)):
                since, inits, prefix = t, frozenset(finals), by_invoke[j:]
                n_before = len(before)
                start = (f"starting from the state the {n_before} earlier operations leave: "
                         + " or ".join(_state_text(s) for s in sorted(finals, key=repr)[:4])
                         + (" ..." if len(finals) > 4 else ""))
                break
            tried += 1
            if back >= len(cuts):
                break
            back *= 2
    keep = [op.label for op in sorted(prefix, key=lambda op: (op.complete, op.invoke))]
    chunk = max(1, len(keep) // 2)
    while spent < total:
        i = 0
        while i < len(keep) and spent < total:
            trial = keep[:i] + keep[i + chunk:]
            if trial and bad(set(trial), since, inits):
                keep = trial
            else:
                i += chunk
        if chunk == 1:
            break
        chunk //= 2
    kept = set(keep)
    culprits = sorted((op for op in ops if op.label in kept), key=lambda op: op.invoke)
    relaxed = sum(1 for op in _window(ops, kept, since) if op.label not in kept)
    return Shrunk(culprits, relaxed, spent, start)


# -- rendering --------------------------------------------------------------------------------

def render(key: str, ops: Sequence[Op], relaxed: int = 0, title: str | None = None, width: int = 40,
           start: str | None = None) -> str:
    """A text time line: one row per op, its interval drawn to scale, times in ms from the first
    invocation; an unknown op's bar runs off the right edge (``~>``)."""
    if not ops:
        return f"key {key}: (no operations)"
    t0 = min(op.invoke for op in ops)
    ends = [op.complete for op in ops if op.complete != INF] + [op.invoke for op in ops]
    span = max(max(ends) - t0, 1e-9)
    head = title or f"key {key}: these {len(ops)} operations cannot be put in any order consistent with their times"
    lines = [head + (f" (and {relaxed} other writes, each allowed to happen at any time after its invocation "
                     "or never)" if relaxed else "") + (f", {start}" if start else "") + ":"]
    wlabel = max(len(op.process) for op in ops)
    wdesc = max(len(op.describe()) for op in ops)
    for op in sorted(ops, key=lambda o: (o.invoke, o.complete)):
        a = int((op.invoke - t0) / span * width)
        if op.complete == INF:
            bar = " " * a + "|" + "-" * max(0, width - a - 1) + "~>"
            when = f"{(op.invoke - t0) * 1000:9.1f} ..       ?"
        else:
            b = max(a, int((op.complete - t0) / span * width))
            bar = " " * a + ("|" + "-" * max(0, b - a - 1) + "|" if b > a else "|")
            when = f"{(op.invoke - t0) * 1000:9.1f} .. {(op.complete - t0) * 1000:7.1f}"
        lines.append(f"  {op.process:<{wlabel}}  {op.label:<12} {op.describe():<{wdesc}}  {when} ms  {bar}")
    return "\n".join(lines)
