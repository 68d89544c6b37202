"""Client histories (schema version 2): what every client invoked and what it saw come back.

A run directory holds ``histories/*.jsonl``: one JSON object per line, one file per recorder
(a workload process, a broadcast client), one line per operation written when the operation
completes (or, for one never completed, when the recorder closes, as ``unknown``). The checker
(``zabray.pipeline.history_checks``) reads them with ``SCHEMA``.

Columns (absent = null):

- ``v``: schema version (2; the checker reads 1 too)
- ``client``: the recorder's name; ``client`` + ``session`` name one sequential process
- ``session``: the session within the client (a ZooKeeper session id in hex, ``w3``...)
- ``op``: a counter within the recorder: issue order (within a session, the order the session
  issued its operations, even when several were in flight)
- ``key``: the register: a znode path, or ``log`` for the broadcast client
- ``kind``: read | write | cas | create | delete | sync, and check (a multi's version check)
- ``value``: the data written (write, cas, create), as text
- ``version``: the expected version of a cas or delete (-1: any)
- ``invoke_t``: wall-clock seconds when the client invoked the operation
- ``complete_t``: wall-clock seconds when the client saw its outcome (for ``unknown``: when it gave
  up; the checker treats an unknown operation as pending for ever)
- ``outcome``: ok | fail | unknown
- ``result``: a read's data as text; an ``ok`` read with a null ``result`` found no znode
- ``result_version``: the version a read saw, or the version a write/cas/create produced
- ``zxid``: the zxid of the state a read saw (its znode's mzxid), of a write's, cas's, create's,
  delete's or multi's own txn, of a sync, or of a broadcast submit
- ``error``: for ``fail`` and ``unknown``: the error's code (BAD_VERSION, NO_NODE, NODE_EXISTS,
  CONNECTION_LOSS, NO_QUORUM...)
- ``replica``: the replica the session was connected to when the operation completed
- ``multi``: (version 2) for a sub-operation of a multi: the ``op`` of the multi's first row. A
  multi is one row per sub-operation (write, cas, create, delete, check), with consecutive ``op``s
  and the same invocation, completion, outcome, zxid and error: it commits or fails as a whole

Version 2 added ``multi`` and ``check``, and records the zxid of creates and deletes; version 1
files stay readable (``zabray.pipeline.history_rows`` reads both).

Outcomes. ``ok``: it took effect and the client saw what ``result`` says. ``fail``: it did not
take effect; with a ZooKeeper code (BAD_VERSION, NO_NODE, NODE_EXISTS) the replicas agreed on
that failure (it is ordered like any write), without one nothing was sent. ``unknown``: it may
or may not have taken effect, at any time after its invocation (a connection loss, an expired
session, a timeout). ``outcome_of`` is the single place an exception becomes an outcome.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, TextIO

from zabray.errors import NoQuorumError, UncertainOutcomeError, ZabError

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
HISTORY_DIR = "histories"
KINDS = ("read", "write", "cas", "create", "delete", "sync")
MULTI_KINDS = ("write", "cas", "create", "delete", "check")
OUTCOMES = ("ok", "fail", "unknown")
# ZooKeeper failures every replica agrees on (an error txn, or a read's answer): definite.
DEFINITE_CODES = frozenset({"BAD_VERSION", "NO_NODE", "NODE_EXISTS", "NOT_EMPTY"})

SCHEMA: tuple[tuple[str, str, str], ...] = (
    ("v", "int", "schema version"),
    ("client", "string", "recorder name"),
    ("session", "string", "session within the client"),
    ("op", "long", "issue counter within the recorder"),
    ("key", "string", "register: znode path or 'log'"),
    ("kind", "string", "read | write | cas | create | delete | sync"),
    ("value", "string", "data written"),
    ("version", "long", "expected version of cas/delete (-1 any)"),
    ("invoke_t", "double", "invocation, wall-clock seconds"),
    ("complete_t", "double", "completion (or giving up), wall-clock seconds"),
    ("outcome", "string", "ok | fail | unknown"),
    ("result", "string", "data read (null: no znode)"),
    ("result_version", "long", "version read or produced"),
    ("zxid", "long", "zxid of the state read or the txn written"),
    ("error", "string", "error code of fail/unknown"),
    ("replica", "int", "replica the session was on"),
    ("multi", "long", "op of the multi's first row, on each of its rows"),
)
COLUMNS = tuple(c for c, _, _ in SCHEMA)


def text(data: bytes | str | None) -> str | None:
    """Data as the schema's text: UTF-8, undecodable bytes escaped (distinct bytes stay distinct)."""
    if data is None or isinstance(data, str):
        return data
    return bytes(data).decode("utf-8", errors="backslashreplace")


def outcome_of(exc: BaseException, kind: str) -> tuple[str, str]:
    """(outcome, error code) for an operation of ``kind`` that raised ``exc``.

    Definite only when nothing can have happened: a ZooKeeper failure the replicas agreed on
    (BAD_VERSION, NO_NODE, NODE_EXISTS, NOT_EMPTY), or a read (a read that did not answer changed
    nothing). Everything else may have been applied: a connection loss, an expired session (its
    in-flight requests fail with it), a timeout, ``UncertainOutcomeError``, and ``NoQuorumError``
    too (the broadcast client also raises it when a write it sent timed out).
    """
    code = str(getattr(exc, "code", "") or type(exc).__name__)
    if isinstance(exc, UncertainOutcomeError):
        code = "UNCERTAIN"
    elif isinstance(exc, NoQuorumError):
        code = "NO_QUORUM"
    elif isinstance(exc, TimeoutError):
        code = "TIMEOUT"
    if code in DEFINITE_CODES or kind in ("read", "sync"):
        return "fail", code
    if not isinstance(exc, (ZabError, OSError, TimeoutError)):
        log.debug("history: %s raised %r; recorded as unknown", kind, exc)
    return "unknown", code


@dataclass(slots=True)
class Pending:
    """An invoked operation awaiting its outcome (hand it back to ``HistoryRecorder.complete``).
    For a multi, ``rows`` holds one row per sub-operation (``row`` is the first)."""

    row: dict[str, Any]
    rows: tuple[dict[str, Any], ...] = ()


class HistoryRecorder:
    """Appends one history row per completed operation to ``RUN_DIR/histories/<client>.jsonl``.

    Thread-safe: many sessions (threads or coroutines) may share one recorder. Rows go to the
    file as operations complete; ``close()`` records what never completed as ``unknown``. With
    ``path=None`` rows are only kept in ``rows`` (tests, small scripts).
    """

    def __init__(self, path: str | PathLike[str] | None, client: str, *, keep: bool = False) -> None:
        self.client = client
        self.path = Path(path) if path is not None else None
        self.keep = keep or path is None
        self.rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._next = 0
        self._pending: dict[int, Pending] = {}
        self._fh: TextIO | None = None
        self.closed = False
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._next = _next_op(self.path)  # appending: (client, op) stays unique in the file
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())

    @classmethod
    def for_run(cls, run_dir: str | PathLike[str], client: str) -> HistoryRecorder:
        """A recorder writing ``run_dir/histories/<client>.jsonl``."""
        if not client or not all(c.isalnum() or c in "-_." for c in client):
            raise ValueError(f"client name {client!r}: use letters, digits, '-', '_' or '.'")
        return cls(Path(run_dir) / HISTORY_DIR / f"{client}.jsonl", client)

    def invoke(self, session: str, key: str, kind: str, *, value: bytes | str | None = None,
               version: int | None = None) -> Pending:
        if kind not in KINDS:
            raise ValueError(f"history kind must be one of {', '.join(KINDS)}, got {kind!r}")
        with self._lock:
            n = self._next
            self._next += 1
            p = Pending({"v": SCHEMA_VERSION, "client": self.client, "session": str(session), "op": n,
                         "key": key, "kind": kind, "value": text(value), "version": version,
                         "invoke_t": time.time(), "multi": None})
            self._pending[n] = p
        return p

    def invoke_multi(self, session: str, ops: Sequence[tuple[str, str, bytes | str | None, int | None]]) -> Pending:
        """A multi of ``ops`` ``(kind, key, value, version)`` (kind: write, cas, create, delete,
        check); complete it with ``complete_multi`` (or ``failed``)."""
        if not ops:
            raise ValueError("a multi needs at least one operation")
        for kind, _, _, _ in ops:
            if kind not in MULTI_KINDS:
                raise ValueError(f"a multi's kinds are {', '.join(MULTI_KINDS)}, got {kind!r}")
        with self._lock:
            first = self._next
            self._next += len(ops)
            now = time.time()
            rows = tuple({"v": SCHEMA_VERSION, "client": self.client, "session": str(session), "op": first + i,
                          "key": key, "kind": kind, "value": text(value), "version": version, "invoke_t": now,
                          "multi": first} for i, (kind, key, value, version) in enumerate(ops))
            p = Pending(rows[0], rows)
            self._pending[first] = p
        return p

    def complete_multi(self, p: Pending, outcome: str, *, results: list[int | None] | None = None,
                       zxid: int | None = None, error: str | None = None, replica: int | None = None) -> None:
        """Complete a multi: ``results`` the version each sub-operation produced (None where none)."""
        if outcome not in OUTCOMES:
            raise ValueError(f"history outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        now = time.time()
        for i, row in enumerate(p.rows):
            row.update(complete_t=now, outcome=outcome, result=None,
                       result_version=results[i] if results is not None and i < len(results) else None,
                       zxid=zxid, error=error, replica=replica)
        with self._lock:
            if self._pending.pop(p.row["op"], None) is None:
                return
            for row in p.rows:
                self._write(row)

    def complete(self, p: Pending, outcome: str, *, result: bytes | str | None = None,
                 result_version: int | None = None, zxid: int | None = None, error: str | None = None,
                 replica: int | None = None) -> None:
        if p.rows:
            self.complete_multi(p, outcome, zxid=zxid, error=error, replica=replica)
            return
        if outcome not in OUTCOMES:
            raise ValueError(f"history outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        row = p.row
        row.update(complete_t=time.time(), outcome=outcome, result=text(result), result_version=result_version,
                   zxid=zxid, error=error, replica=replica)
        with self._lock:
            if self._pending.pop(row["op"], None) is None:
                return  # completed twice, or after close: the first word stands
            self._write(row)

    def failed(self, p: Pending, exc: BaseException, *, replica: int | None = None) -> str:
        """Complete ``p`` from the exception its operation raised; returns the outcome."""
        outcome, code = outcome_of(exc, p.row["kind"])
        self.complete(p, outcome, error=code, replica=replica)
        return outcome

    def _write(self, row: dict[str, Any]) -> None:
        if self.keep:
            self.rows.append(row)
        if self._fh is not None:
            self._fh.write(json.dumps(row, separators=(",", ":")) + "\n")

    def flush(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.flush()

    def close(self) -> None:
        """Record every operation still pending as ``unknown`` and close the file."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            now = time.time()
            for p in sorted(self._pending.values(), key=lambda x: x.row["op"]):
                for row in p.rows or (p.row,):
                    row.update(complete_t=now, outcome="unknown", error="NEVER_COMPLETED")
                    for col in ("result", "result_version", "zxid", "replica"):
                        row.setdefault(col, None)
                    self._write(row)
            self._pending.clear()
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> HistoryRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _next_op(path: Path) -> int:
    """One past the largest ``op`` already in ``path`` (0 for a new file)."""
    if not path.exists():
        return 0
    top = -1
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                continue  # the checker will name this line; here it only must not stop recording
            if isinstance(row, dict) and isinstance(row.get("op"), int):
                top = max(top, row["op"])
    return top + 1
