"""A ZooKeeper znode as a versioned register: the model every history check judges against.

Pure (no IO, no clock). The state is (exists, data, version); ``ABSENT`` is no znode. ``write``
is setData with version -1, ``cas`` setData with an expected version (-1, or none: any version,
as ZooKeeper's setData means it), ``create`` starts at version 0, ``delete`` (optionally
versioned) removes the znode, ``check`` (inside a multi) asserts a version, ``read`` observes.
A ``fail`` with a definite ZooKeeper code (BAD_VERSION, NO_NODE, NODE_EXISTS, NOT_EMPTY) is an
outcome every replica agreed on: it is ordered like any write and its precondition was false
at its point. An ``unknown`` operation took effect at some point after its invocation, or
never. A ``multi`` on one key is its sub-operations on that key applied at one point (the
sub-operations on other keys are the multi checks' business).
"""

from __future__ import annotations

from dataclasses import dataclass

INF = float("inf")
DEFINITE_FAILS = frozenset({"BAD_VERSION", "NO_NODE", "NODE_EXISTS", "NOT_EMPTY"})
WRITES = frozenset({"write", "cas", "create", "delete"})
UNSEEN = "\x00unseen"  # the data of a write whose value no read returns (no read can match it)

State = tuple[bool, "str | None", int]
ABSENT: State = (False, None, -1)
GONE = "\x00gone"  # the token of ABSENT: what a read of no znode needs


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a key's history, ready for the search. ``complete`` is INF if unknown.

    ``invoke`` is where the search may place it from: for a read right after its session's sync,
    the sync's invocation (``own_invoke`` keeps the read's own). ``source`` is FILE:LINE of its
    history row; a multi's ``parts`` are its sub-operations on this key, in order.
    """

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
    source: str = ""
    own_invoke: float | None = None
    parts: tuple[Op, ...] = ()
    zxid: int | None = None

    @property
    def definite(self) -> bool:
        return self.outcome != "unknown"

    def describe(self) -> str:
        """A short human rendering: ``cas v2 -> 'x'  ok v3``, ``read -> 'x' v3  ok``."""
        if self.kind == "multi":
            what = "multi[" + "; ".join(p.describe().split("  ")[0] for p in self.parts) + "]"
        elif self.kind == "read":
            what = "read -> " + ("(no znode)" if self.result is None and self.outcome == "ok" else repr(self.result))
            if self.result_version is not None:
                what += f" v{self.result_version}"
        elif self.kind in ("write", "create"):
            what = f"{self.kind} {self.value!r}"
        elif self.kind == "cas":
            what = f"cas v{self.version if self.version is not None else -1} -> {self.value!r}"
        else:
            what = self.kind + ("" if self.version is None or self.version < 0 else f" v{self.version}")
        out = self.outcome if self.outcome != "fail" else f"fail {self.error}"
        if self.outcome == "ok" and self.kind not in ("read", "multi") and self.result_version is not None:
            out += f" v{self.result_version}"
        return f"{what}  {out}"


def any_version(v: int | None) -> bool:
    return v is None or v < 0


def applies(state: State, op: Op) -> bool:
    """Whether ``op`` would take effect in ``state`` (its precondition holds)."""
    exists, _, ver = state
    kind = op.kind
    if kind == "write":
        return exists
    if kind in ("cas", "check"):
        return exists and (any_version(op.version) or ver == op.version)
    if kind == "create":
        return not exists
    if kind == "delete":
        return exists and (any_version(op.version) or ver == op.version)
    if kind == "multi":
        s: State | None = state
        for p in op.parts:
            assert s is not None
            if not applies(s, p):
                return False
            s = effect(s, p)
        return True
    return True


def effect(state: State, op: Op) -> State:
    """The state after ``op`` took effect in ``state`` (its precondition holding)."""
    kind = op.kind
    if kind in ("write", "cas"):
        return (True, op.value, state[2] + 1)
    if kind == "create":
        return (True, op.value, 0)
    if kind == "delete":
        return ABSENT
    if kind == "multi":
        for p in op.parts:
            state = effect(state, p)
    return state


def step(state: State, op: Op) -> State | None:
    """The state after ``op`` at this point, or None if its recorded outcome is impossible here."""
    exists, data, ver = state
    if op.outcome == "unknown":
        return effect(state, op) if applies(state, op) else state
    if op.outcome == "fail":
        code = op.error
        if code == "NO_NODE":
            return state if not exists else None
        if code in ("NODE_EXISTS", "NOT_EMPTY"):  # children are not modelled: it says the znode existed
            return state if exists else None
        if code == "BAD_VERSION":  # a version of -1 never fails with BAD_VERSION
            return state if exists and not any_version(op.version) and ver != op.version else None
        return state
    if op.kind == "read":
        if op.result is None:
            return state if not exists else None
        if not exists or data != op.result or (op.result_version is not None and op.result_version != ver):
            return None
        return state
    if op.kind == "multi":
        s: State = state
        for p in op.parts:
            n = step(s, p)
            if n is None:
                return None
            s = n
        return s
    if not applies(state, op):
        return None
    new = effect(state, op)
    if op.result_version is not None and op.kind != "delete" and new[2] != op.result_version:
        return None
    return new


def token(state: State) -> str | None:
    """What a read of ``state`` returns (GONE for no znode): reads match states by it."""
    return state[1] if state[0] else GONE


def produces(op: Op) -> tuple[bool, str | None]:
    """(changes the data, the token it leaves) for an operation that takes effect."""
    if op.kind in ("write", "cas", "create"):
        return True, op.value
    if op.kind == "delete":
        return True, GONE
    if op.kind == "multi":
        changed, tok = False, None
        for p in op.parts:
            c, t = produces(p)
            if c:
                changed, tok = True, t
        return changed, tok
    return False, None


def bumps(op: Op) -> int:
    """How many times ``op`` raises the version if it takes effect (a create resets it)."""
    if op.kind in ("write", "cas"):
        return 1
    return sum(bumps(p) for p in op.parts)


def needs(op: Op) -> tuple[str | None, int | None] | None:
    """For a definite operation: (the token it needs current, or None for any; the exact version
    it needs current before it, or None for any), or None if it needs nothing pinned."""
    if not op.definite or op.kind == "multi":
        return None
    if op.outcome == "fail":
        return (GONE, None) if op.error == "NO_NODE" else None
    if op.kind == "read":
        if op.result is None:
            return (GONE, None)
        return (op.result, op.result_version)
    pre: int | None = None
    if op.kind in ("cas", "delete") and not any_version(op.version):
        pre = op.version
    elif op.kind in ("write", "cas") and op.result_version is not None:
        pre = op.result_version - 1
    return None if pre is None else (None, pre)


def identity(op: Op) -> bool:
    """A definite operation that never changes the state (a read, a definite failure, a multi of
    checks): placing it as soon as it is possible is never worse than placing it later."""
    if not op.definite:
        return False
    if op.outcome == "fail" or op.kind in ("read", "check"):
        return True
    return op.kind == "multi" and all(p.kind == "check" for p in op.parts)


def state_text(s: State) -> str:
    return "(no znode)" if not s[0] else f"{s[1]!r} v{s[2]}"
