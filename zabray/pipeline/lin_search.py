"""The linearizability search for one key's history: complete, pure (no Spark, no IO).

The model is ``zabray.pipeline.register_model``: a znode as a versioned register. A history
splits by key (P-compositionality: a history is linearizable iff each key's is, for operations
on one key), and each key's history splits at quiescent points: an invocation before which every
definite operation of the key has completed. The search goes segment by segment; the
configurations it can be in at a cut are a state and the unknown operations not yet placed
(they may still take effect later), and a cut's configuration that led nowhere is never tried
again, so the work adds up over segments instead of multiplying.

Within a segment the search is Wing & Gong's, refined by Lowe, with Knossos' and Porcupine's
cache: operations are call/return entries in a doubly linked list in time order; it places a
call whose transition the model accepts, backtracks at a return whose operation is not placed,
and never enters a (placed set as a bitset, state) configuration twice. What keeps it small:

- A definite operation that cannot change the state (a read, a definite failure) is placed as
  soon as it is possible, without branching: placing it later never helps.
- Writes that nothing can tell apart are tried in one canonical order only: unknown blind writes
  whose value no later read returns, earliest invoked first; definite blind writes whose value no
  read returns and whose version is unrecorded, earliest deadline first.
- A configuration is dropped as soon as some definite operation still to place can no longer
  happen: a read of a value that is gone for good (its every writer placed), an operation
  pinned to a version the register has left for good (no create can reset it).
- Before searching, value zones (Gibbons & Korach) catch the common violations at once: while
  a value is certainly current (from the first completion to the last invocation among its
  write and reads), no operation needing another value fits.

Within one session, a definite operation is ordered after the session's earlier definite ones
(FIFO client order), even when several were in flight. Every search has a step budget: past it
the verdict is ``unknown``, never a guess.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from zabray.pipeline.register_model import (
    ABSENT,
    INF,
    UNSEEN,
    Op,
    State,
    applies,
    bumps,
    effect,
    identity,
    needs,
    produces,
    step,
    token,
)

DEFAULT_BUDGET = 2_000_000
READ_MODES = ("after-sync", "all", "none")

__all__ = ["ABSENT", "DEFAULT_BUDGET", "INF", "Op", "READ_MODES", "Search", "State", "search", "segments",
           "frontiers"]


@dataclass(frozen=True, slots=True)
class Search:
    """A search's answer: ``ok`` True/False, or None when the budget ran out."""

    ok: bool | None
    steps: int


class OutOfBudget(Exception):
    """The step budget ran out (caught inside this package; the verdict becomes unknown)."""


class Budget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0

    def take(self) -> None:
        self.spent += 1
        if self.spent > self.limit:
            raise OutOfBudget


Config = tuple[State, frozenset[int]]  # at a cut: the state and the unknown ops still unplaced


# -- the key: segments and what later segments still need ------------------------------------

def _canonical(ops: Sequence[Op]) -> list[Op]:
    """The ops, where the data of writes whose value no definite read returns becomes
    UNSEEN (nothing can tell such data apart, so the cache should not either)."""
    read = {op.result for op in ops if op.kind == "read" and op.definite and op.result is not None}
    out = []
    for op in ops:
        if op.kind in ("write", "cas", "create") and op.value not in read and op.value != UNSEEN:
            op = replace(op, value=UNSEEN)
        out.append(op)
    return out


def segments(ops: Sequence[Op]) -> list[list[int]]:
    """Indices of ``ops`` (sorted by invocation) cut at quiescent points: a new segment starts at
    an invocation after every earlier definite op completed. Unknown ops never block a cut."""
    out: list[list[int]] = []
    horizon = -INF
    for i, op in enumerate(ops):
        if not out or (op.invoke > horizon and op.invoke != ops[i - 1].invoke):
            out.append([])
        out[-1].append(i)
        if op.definite:
            horizon = max(horizon, op.complete)
    return out


class _Key:
    """What every segment search of one key shares: ops, segments, and the last segment where
    each value is written or needed, each version is needed, a create may happen."""

    def __init__(self, ops: Sequence[Op]) -> None:
        order = sorted(range(len(ops)), key=lambda i: (ops[i].invoke, ops[i].complete, ops[i].label))
        self.raw = [ops[i] for i in order]  # as given (culprits are shown as recorded)
        self.ops = _canonical(self.raw)
        self.segs = segments(self.ops)
        self.seg_of = [0] * len(self.ops)
        for s, idx in enumerate(self.segs):
            for i in idx:
                self.seg_of[i] = s
        self.last_writer: dict[str | None, int] = {}
        self.last_reader: dict[str | None, int] = {}
        self.last_pin: dict[int, int] = {}
        self.last_create = -1
        self.read_in: dict[str | None, int] = {}  # value -> last segment a definite read returns it
        self.last_exact: dict[int, dict[str | None, int]] = {}  # version -> token -> last segment needing both
        for i, op in enumerate(self.ops):
            s = self.seg_of[i]
            if op.outcome != "fail":
                changed, tok = produces(op)
                if changed:
                    self.last_writer[tok] = s
                if op.kind == "create" or any(p.kind == "create" for p in op.parts):
                    self.last_create = s
            nd = needs(op)
            if nd is not None:
                if nd[0] is not None:
                    self.last_reader[nd[0]] = s
                if nd[1] is not None:
                    self.last_pin[nd[1]] = s
                if nd[0] is not None and nd[1] is not None:
                    self.last_exact.setdefault(nd[1], {})[nd[0]] = s
            if op.kind == "read" and op.definite and op.result is not None:
                self.read_in[op.result] = s
        # Of segments s+1.. : the version bumps still possible, the highest version needed.
        nseg = len(self.segs)
        self.bumps_after = [0] * nseg
        self.pin_after = [-1] * nseg
        acc_b, acc_p = 0, -1
        for s in range(nseg - 1, -1, -1):
            self.bumps_after[s], self.pin_after[s] = acc_b, acc_p
            for i in self.segs[s]:
                op = self.ops[i]
                acc_b += bumps(op) if op.outcome != "fail" else 0
                nd = needs(op)
                if nd is not None and nd[1] is not None:
                    acc_p = max(acc_p, nd[1])
        # FIFO: a definite op waits for its session's previous definite op.
        self.pred = [-1] * len(self.ops)
        last: dict[str, int] = {}
        for i in sorted((i for i, op in enumerate(self.ops) if op.definite),
                        key=lambda i: (self.ops[i].process, self.ops[i].seq)):
            p = self.ops[i].process
            if p in last:
                self.pred[i] = last[p]
            last[p] = i
        # Definite blind writes nobody can tell apart (value unread, version unrecorded, no
        # session successor invoked before they complete): tried earliest deadline first.
        nxt_inv: dict[int, float] = {}
        for i in range(len(self.ops)):
            j = self.pred[i]
            if j >= 0:
                nxt_inv[j] = self.ops[i].invoke
        self.interchangeable = [op.definite and op.outcome == "ok" and op.kind == "write" and op.value == UNSEEN
                                and op.result_version is None and nxt_inv.get(i, INF) > op.complete
                                for i, op in enumerate(self.ops)]


# -- one segment ---------------------------------------------------------------------------------

def _segment_ends(key: _Key, s: int, start: Config, budget: Budget, lookahead: bool = True) -> Iterator[Config]:
    """Every distinct configuration segment ``s`` can end in from ``start`` (lazily, no repeats):
    the search of the module doc over the segment's ops and the unknown ops carried into it.
    Without ``lookahead`` what later segments need does not prune (each configuration it can
    reach is an end, so the first segment without one is where the violation shows)."""
    state0, carried = start
    gl = sorted(carried) + key.segs[s]
    ops = [key.ops[g] for g in gl]
    n = len(ops)
    # Unknown blind writes whose value no read of this or a later segment returns: a pool, placed
    # earliest invoked first (any order using k of them can use the k earliest instead).
    pool = [i for i, op in enumerate(ops) if op.outcome == "unknown" and op.kind == "write"
            and key.read_in.get(op.value, -1) < s]
    in_pool = [False] * n
    for i in pool:
        in_pool[i] = True
        if ops[i].value != UNSEEN:
            ops[i] = replace(ops[i], value=UNSEEN)
    pool.sort(key=lambda i: (ops[i].invoke, i))
    local_of = {g: i for i, g in enumerate(gl)}
    # A predecessor in an earlier segment is placed; one in a later segment never will be here.
    pred = [-1 if key.pred[g] < 0 or key.seg_of[key.pred[g]] < s else local_of.get(key.pred[g], n)
            for g in gl]
    xd = [key.interchangeable[g] for g in gl]
    ident = [identity(op) for op in ops]

    # The linked list of entries (0 head, m+1 tail): calls before returns at equal times, so
    # operations that touch at an instant count as concurrent (never a false alarm).
    events: list[tuple[float, int, int]] = []
    for i, op in enumerate(ops):
        if in_pool[i]:
            continue
        events.append((op.invoke, 0, i))
        if op.definite:
            events.append((op.complete, 1, i))
    events.sort()
    m = len(events)
    tail = m + 1
    nxt = [*range(1, m + 2), tail]
    prv = [0, *range(0, m + 1)]
    ent_op = [0] * (m + 2)
    ent_call = [False] * (m + 2)
    ent_t = [INF] * (m + 2)
    call_of = [0] * n
    ret_of = [0] * n
    for pos, (t, kind, i) in enumerate(events, start=1):
        ent_op[pos], ent_t[pos] = i, t
        if kind == 0:
            ent_call[pos] = True
            call_of[i] = pos
        else:
            ret_of[i] = pos

    # Counters of what is still to place (for dropping dead configurations).
    wl: dict[str | None, int] = {}
    rl: dict[str | None, int] = {}
    pl: dict[int, int] = {}
    px: dict[int, dict[str | None, int]] = {}  # version -> token -> definite reads needing both
    prod: list[str | None] = [None] * n
    prod_ok = [False] * n
    need: list[tuple[str | None, int | None] | None] = [None] * n
    creates = [False] * n
    bump = [0] * n
    cl = 0
    bl = 0
    def_left = 0
    for i, op in enumerate(ops):
        if op.definite:
            def_left += 1
        if op.outcome != "fail":
            bump[i] = bumps(op)
            bl += bump[i]
        if op.outcome != "fail" and not in_pool[i]:
            changed, tok = produces(op)
            if changed:
                prod_ok[i], prod[i] = True, tok
                wl[tok] = wl.get(tok, 0) + 1
            if op.kind == "create" or any(p.kind == "create" for p in op.parts):
                creates[i] = True
                cl += 1
        nd = need[i] = needs(op)
        if nd is not None:
            if nd[0] is not None:
                rl[nd[0]] = rl.get(nd[0], 0) + 1
            if nd[1] is not None:
                pl[nd[1]] = pl.get(nd[1], 0) + 1
            if nd[0] is not None and nd[1] is not None:
                at = px.setdefault(nd[1], {})
                at[nd[0]] = at.get(nd[0], 0) + 1
    last_writer = key.last_writer
    last_reader: dict[str | None, int] = key.last_reader if lookahead else {}
    last_pin: dict[int, int] = key.last_pin if lookahead else {}
    last_exact: dict[int, dict[str | None, int]] = key.last_exact if lookahead else {}
    create_later = key.last_create > s
    bumps_later = key.bumps_after[s]
    pin_later = key.pin_after[s] if lookahead else -1
    top = [max((v for v, c in pl.items() if c), default=-1)]  # the highest version still needed here

    placed = 0
    state = state0
    used = 0
    memo: set[tuple[int, State]] = set()
    undo_log: list[tuple[int, State]] = []
    seen_ends: set[Config] = set()

    def dead(old: State, new: State) -> bool:
        t_old = token(old)
        if token(new) != t_old and not wl.get(t_old) and last_writer.get(t_old, -1) <= s \
                and (rl.get(t_old) or last_reader.get(t_old, -1) > s):
            return True
        if cl or create_later:
            return False
        u = old[2]
        if new[2] != u and (pl.get(u) or last_pin.get(u, -1) > s):
            return True
        # Reads needing this exact version with another value: the version will not come back.
        v, t_new = new[2], token(new)
        for t, c in px.get(v, {}).items():
            if c and t != t_new:
                return True
        for t, last in last_exact.get(v, {}).items():
            if last > s and t != t_new:
                return True
        return False

    def unreachable() -> bool:
        """Some definite op needs a version above anything the ops left can reach."""
        need_v = max(top[0], pin_later)
        if need_v < 0:
            return False
        v = state[2]
        if cl or create_later:
            v = max(v, 0)
        return need_v > v + bl + bumps_later

    def starved() -> bool:
        """A definite op here needs a value that is not current and that nothing left writes."""
        now = token(state)
        return any(c and t != now and not wl.get(t) and last_writer.get(t, -1) <= s for t, c in rl.items())

    def count(i: int, d: int) -> None:
        nonlocal def_left, cl, used, bl
        if ops[i].definite:
            def_left -= d
        bl -= d * bump[i]
        if prod_ok[i]:
            wl[prod[i]] -= d
        if creates[i]:
            cl -= d
        nd = need[i]
        if nd is not None:
            if nd[0] is not None:
                rl[nd[0]] -= d
            if nd[0] is not None and nd[1] is not None:
                px[nd[1]][nd[0]] -= d
            if nd[1] is not None:
                v = nd[1]
                pl[v] -= d
                if d < 0:
                    top[0] = max(top[0], v)
                elif v == top[0] and not pl[v]:
                    top[0] = max((w for w, c in pl.items() if c), default=-1)
        if in_pool[i]:
            used += d

    def place(i: int) -> bool:
        nonlocal placed, state
        op = ops[i]
        old = state
        if op.definite:
            new = step(old, op)
            if new is None:
                return False
        else:
            if not applies(old, op):
                return False  # an unknown op that would change nothing: as good as never placed
            new = effect(old, op)
        nb = placed | 1 << i
        k = (nb, new)
        if k in memo:
            return False
        memo.add(k)
        budget.take()
        undo_log.append((i, old))
        placed, state = nb, new
        if not in_pool[i]:
            e = call_of[i]
            nxt[prv[e]], prv[nxt[e]] = nxt[e], prv[e]
            r = ret_of[i]
            if r:
                nxt[prv[r]], prv[nxt[r]] = nxt[r], prv[r]
        count(i, 1)
        if (new != old and dead(old, new)) or unreachable():
            undo()
            return False
        return True

    def undo() -> None:
        nonlocal placed, state
        i, old = undo_log.pop()
        count(i, -1)
        if not in_pool[i]:
            r = ret_of[i]
            if r:
                nxt[prv[r]] = prv[nxt[r]] = r
            e = call_of[i]
            nxt[prv[e]] = prv[nxt[e]] = e
        placed &= ~(1 << i)
        state = old

    def expand() -> list[int]:
        cands: list[int] = []
        best = -1
        e = nxt[0]
        while e != tail and ent_call[e]:
            i = ent_op[e]
            p = pred[i]
            if p < 0 or placed >> p & 1:
                if ident[i]:
                    if step(state, ops[i]) is not None:
                        return [i]
                elif xd[i]:
                    if best < 0 or (ops[i].complete, i) < (ops[best].complete, best):
                        best = i
                else:
                    cands.append(i)
            e = nxt[e]
        if best >= 0:
            cands.append(best)
        if used < len(pool) and ops[pool[used]].invoke <= ent_t[e]:
            cands.append(pool[used])
        cands.sort(key=lambda i: ops[i].complete)
        return cands

    def end() -> Config:
        keep = []
        for i in range(n):
            if not placed >> i & 1 and not ops[i].definite:
                op = ops[i]
                v = op.version
                if op.kind in ("cas", "delete") and v is not None and v >= 0 and state[2] > v \
                        and not create_later and not cl:
                    continue  # can never apply again
                keep.append(gl[i])
        return state, frozenset(keep)

    if def_left == 0:
        yield end()
        return
    if unreachable() or starved():
        return
    frames: list[list[Any]] = [[expand(), 0]]
    while frames:
        fr = frames[-1]
        cands, pos = fr[0], fr[1]
        if pos == len(cands):
            frames.pop()
            if frames:
                undo()
            continue
        fr[1] = pos + 1
        if not place(cands[pos]):
            continue
        if def_left == 0:
            c = end()
            if c not in seen_ends:
                seen_ends.add(c)
                yield c
            undo()
            continue
        frames.append([expand(), 0])


# -- the whole key ---------------------------------------------------------------------------

def _run(key: _Key, init: State, budget: Budget) -> bool:
    """Depth first over segments: a configuration at a cut that led nowhere is never retried."""
    nseg = len(key.segs)
    if nseg == 0:
        return True
    failed: set[tuple[int, Config]] = set()
    start: Config = (init, frozenset())
    stack: list[tuple[int, Config, Iterator[Config]]] = [(0, start, _segment_ends(key, 0, start, budget))]
    while stack:
        s, cfg, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            failed.add((s, cfg))
            stack.pop()
            continue
        if s + 1 == nseg:
            return True
        if (s + 1, nxt) not in failed:
            stack.append((s + 1, nxt, _segment_ends(key, s + 1, nxt, budget)))
    return False


def search(ops: Sequence[Op], budget: int = DEFAULT_BUDGET, init: State = ABSENT,
           finals: set[State] | None = None) -> Search:
    """Whether ``ops`` (any order) can be linearized from ``init``, within ``budget`` steps.

    With ``finals``, every state some legal order (with any subset of the unknown ops) can end in
    is added to it (every configuration of every cut is explored, not just one path)."""
    key = _Key(ops)
    b = Budget(budget)
    try:
        if finals is None:
            return Search(_run(key, init, b), b.spent)
        fr = frontiers(key, init, b)
        if len(fr) <= len(key.segs) or not fr[-1]:
            return Search(False, b.spent)
        finals.update(st for st, _ in fr[-1])
        return Search(True, b.spent)
    except OutOfBudget:
        return Search(None, b.spent)


def frontiers(key: _Key, init: State, budget: Budget) -> list[set[Config]]:
    """The configurations at each cut: F[0] = {init}, F[s+1] = every end of segment s from F[s]
    (with no lookahead: exactly what can be reached); stops after the first empty one (no path
    through that segment: the violation is there)."""
    out: list[set[Config]] = [{(init, frozenset())}]
    for s in range(len(key.segs)):
        nxt: set[Config] = set()
        for cfg in sorted(out[-1], key=repr):
            nxt.update(_segment_ends(key, s, cfg, budget, lookahead=False))
        out.append(nxt)
        if not nxt:
            break
    return out
