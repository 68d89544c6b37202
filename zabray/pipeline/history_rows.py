"""Strict reading of client history rows (``zabray.client.histories``, schema versions 1 and 2). Pure.

Every row is checked field by field before any verdict: a row that is not JSON, not an object,
lacks a required field, has one of the wrong type, an unknown kind or outcome, an ``ok`` or
``fail`` without ``complete_t``, a ``complete_t`` before its ``invoke_t``, or a field the
schema does not have is bad input, reported as ``FILE:LINE: field 'x': what is wrong`` — never
dropped, clamped or guessed. Rows that are each fine but do not fit together (the same
operation twice, a multi whose rows disagree) are found by ``check_rows``/``RowIndex``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zabray.pipeline.errors import TraceError

VERSIONS = (1, 2)
KINDS = {1: ("read", "write", "cas", "create", "delete", "sync"),
         2: ("read", "write", "cas", "create", "delete", "sync", "check")}
OUTCOMES = ("ok", "fail", "unknown")
COLUMNS_V1 = ("v", "client", "session", "op", "key", "kind", "value", "version", "invoke_t", "complete_t",
              "outcome", "result", "result_version", "zxid", "error", "replica")
COLUMNS = {1: COLUMNS_V1, 2: (*COLUMNS_V1, "multi")}
REQUIRED = ("client", "session", "op", "key", "kind", "invoke_t", "outcome")
STRINGS = ("client", "session", "key", "kind", "value", "outcome", "result", "error")
INTS = ("op", "version", "result_version", "zxid", "replica", "multi")
MULTI_KINDS = ("write", "cas", "create", "delete", "check")
MAX_ERRORS = 20


class HistoryInputError(TraceError):
    """A history row (or rows) the checker refuses: the message starts with FILE:LINE."""


def _bad(where: str, name: str, what: str) -> HistoryInputError:
    return HistoryInputError(f"{where}: field {name!r}: {what}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x: Any) -> bool:
    return (isinstance(x, (int, float)) and not isinstance(x, bool)) and math.isfinite(x)


def parse_line(text: str, where: str) -> dict[str, Any] | None:
    """One JSON line -> a checked row (None for a blank line, which holds no row)."""
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise HistoryInputError(f"{where}: not JSON ({e})") from None
    return check_row(obj, where)


def check_row(obj: Any, where: str) -> dict[str, Any]:
    """``obj`` as a row with every schema column (absent: None), or HistoryInputError."""
    if not isinstance(obj, Mapping):
        raise HistoryInputError(f"{where}: not a JSON object but {type(obj).__name__}")
    if "v" not in obj or obj["v"] is None:
        raise _bad(where, "v", "missing (the history schema version, 1 or 2)")
    v = obj["v"]
    if not _is_int(v) or v not in VERSIONS:
        raise _bad(where, "v", f"{v!r} is not a schema version this checker reads (1 or 2)")
    cols = COLUMNS[v]
    extra = [k for k in obj if k not in cols]
    if extra:
        raise _bad(where, str(extra[0]), f"not in schema version {v} (its fields: {', '.join(cols)})")
    row: dict[str, Any] = {c: obj.get(c) for c in cols}
    if v == 1:
        row["multi"] = None
    for name in REQUIRED:
        if row[name] is None:
            raise _bad(where, name, "missing")
    for name in STRINGS:
        x = row[name]
        if x is not None and not isinstance(x, str):
            raise _bad(where, name, f"{x!r} is not a string")
    for name in INTS:
        x = row[name]
        if x is not None and not _is_int(x):
            raise _bad(where, name, f"{x!r} is not an integer")
    for name in ("client", "session", "key"):
        if not row[name]:
            raise _bad(where, name, "empty")
    if row["op"] < 0:
        raise _bad(where, "op", f"{row['op']} is negative")
    kind, outcome = row["kind"], row["outcome"]
    if kind not in KINDS[v]:
        raise _bad(where, "kind", f"{kind!r} is not one of {', '.join(KINDS[v])} (schema version {v})")
    if outcome not in OUTCOMES:
        raise _bad(where, "outcome", f"{outcome!r} is not one of ok, fail, unknown")
    t0, t1 = row["invoke_t"], row["complete_t"]
    if not _is_num(t0):
        raise _bad(where, "invoke_t", f"{t0!r} is not a finite number of seconds")
    if t1 is None:
        if outcome != "unknown":
            raise _bad(where, "complete_t", f"missing on an {outcome!r} row (only an unknown outcome may lack it)")
    else:
        if not _is_num(t1):
            raise _bad(where, "complete_t", f"{t1!r} is not a finite number of seconds")
        if t1 < t0:
            raise _bad(where, "complete_t", f"{t1!r} is before invoke_t {t0!r}")
    if kind == "cas" and row["version"] is None:
        raise _bad(where, "version", "missing on a cas (the expected version; -1 for any)")
    if kind == "check" and row["multi"] is None:
        raise _bad(where, "kind", "'check' is only a sub-operation of a multi (field 'multi' is missing)")
    if row["multi"] is not None:
        if kind not in MULTI_KINDS:
            raise _bad(where, "kind", f"{kind!r} cannot be part of a multi ({', '.join(MULTI_KINDS)})")
        if row["multi"] < 0 or row["multi"] > int(row["op"]):
            raise _bad(where, "multi", f"{row['multi']} is not the op of the multi's first row (<= op {row['op']})")
    if row["zxid"] is not None and row["zxid"] < 0:
        raise _bad(where, "zxid", f"{row['zxid']} is negative")
    return row


def where_of(r: Mapping[str, Any]) -> str:
    return f"{r.get('file')}:{r.get('line')}"


@dataclass
class RowIndex:
    """Cross-row checks, fed one row at a time (any order): the same operation (client,
    session, op) twice, and a multi whose rows disagree on what all its rows share."""

    seen: dict[tuple[str, str, int], str] = field(default_factory=dict)
    multis: dict[tuple[str, str, int], tuple[tuple[Any, ...], str, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def add(self, r: Mapping[str, Any]) -> None:
        if len(self.problems) >= MAX_ERRORS:
            return
        w = where_of(r)
        k = (str(r["client"]), str(r["session"]), int(r["op"]))
        first = self.seen.get(k)
        if first is not None:
            self.problems.append(f"{w}: the same operation as {first} (client {k[0]!r}, session {k[1]!r}, "
                                 f"op {k[2]}): a duplicated row")
            return
        self.seen[k] = w
        if r.get("multi") is not None:
            mk = (k[0], k[1], int(r["multi"]))
            shared = (r["invoke_t"], r["complete_t"], r["outcome"], r.get("zxid"), r.get("v"))
            had = self.multis.get(mk)
            if had is None:
                self.multis[mk] = (shared, w, int(r["op"]))
            elif had[0] != shared:
                names = ("invoke_t", "complete_t", "outcome", "zxid", "v")
                diff = next(n for n, a, b in zip(names, had[0], shared, strict=True) if a != b)
                self.problems.append(f"{w}: field {diff!r}: differs from {had[1]}, another row of multi "
                                     f"{mk[2]} of client {k[0]!r} session {k[1]!r} (a multi's rows share it)")
            else:
                self.multis[mk] = (had[0], had[1], min(had[2], int(r["op"])))

    def finish(self) -> None:
        for (client, session, multi), (_, w, first_op) in sorted(self.multis.items()):
            if first_op != multi and len(self.problems) < MAX_ERRORS:
                self.problems.append(f"{w}: field 'multi': {multi} is not the op of the multi's first row "
                                     f"({first_op}, client {client!r} session {session!r})")


def check_rows(rows: Iterable[Mapping[str, Any]]) -> None:
    """Raise HistoryInputError naming the first problems if rows do not fit together, or if
    there are none at all (a check of nothing must not pass)."""
    idx = RowIndex()
    n = 0
    for r in rows:
        n += 1
        idx.add(r)
    idx.finish()
    if idx.problems:
        raise HistoryInputError(format_problems(idx.problems))
    if n == 0:
        raise HistoryInputError("the history holds no operations: checked nothing")


def format_problems(problems: list[str], total: int | None = None) -> str:
    more = (total if total is not None else len(problems)) - 1
    return problems[0] + (f" (and {more} more problem{'s' if more > 1 else ''}: {'; '.join(problems[1:4])}"
                          + (" ..." if more > 3 else "") + ")" if more > 0 else "")
