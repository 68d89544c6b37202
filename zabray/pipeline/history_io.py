"""Reading history files: every file of ``RUN_DIR/histories/``, every line, with where it came from.

Spark's file readers skip names starting with ``_`` or ``.`` without a word (Hadoop's "hidden
files"), and ``HistoryRecorder.for_run`` writes exactly such names for clients called so. So
history files are read here, in plain Python, by Spark tasks (``history_checks``) or locally:
each task reads one byte range of a JSON lines file (or one gzip file, or one Parquet row group)
and yields checked rows (``history_rows.check_row``) with ``file`` and ``line`` (the row number in
a Parquet file), or one ``bad`` row per refused line. Reading every file keeps runs recorded
before this change readable, which refusing such names when recording would not.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from os import PathLike
from pathlib import Path
from typing import Any

from zabray.client.histories import HISTORY_DIR
from zabray.pipeline.errors import TraceError
from zabray.pipeline.history_rows import COLUMNS, MAX_ERRORS, HistoryInputError, check_row, parse_line

SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
CHUNK = 32 << 20  # bytes of a JSON lines file per task
ROW_COLUMNS = (*COLUMNS[2], "file", "line", "bad")

Task = tuple[str, str, int, int]  # (run, path, start, end): a byte range, or (row group, -1) for Parquet


def history_files(run_dir: str | PathLike[str]) -> list[Path]:
    """Every history file of a run directory, hidden names included; anything else there is bad
    input (it is not skipped)."""
    run = Path(run_dir)
    if not run.is_dir():
        raise TraceError(f"run directory {run} does not exist" if not run.exists() else f"{run} is not a directory")
    d = run / HISTORY_DIR
    if not d.is_dir():
        raise TraceError(f"no client histories in {d} (record them with `zabray faults run --histories` "
                         "or zabray.client.histories.HistoryRecorder)")
    files: list[Path] = []
    other: list[Path] = []
    for p in sorted(d.iterdir()):
        (files if p.is_file() and p.name.endswith(SUFFIXES) else other).append(p)
    if other:
        raise TraceError(f"{other[0]}: not a history file (histories/ holds only *.jsonl, *.jsonl.gz and *.parquet "
                         "files; move it away)")
    if not files:
        raise TraceError(f"no client histories in {d} (record them with `zabray faults run --histories` "
                         "or zabray.client.histories.HistoryRecorder)")
    return files


def tasks(run: str, files: list[Path]) -> list[Task]:
    out: list[Task] = []
    for f in files:
        if f.name.endswith(".parquet"):
            import pyarrow.parquet as pq

            try:
                groups = pq.ParquetFile(f).num_row_groups
            except Exception as e:  # pyarrow raises its own ArrowInvalid for a file that is not Parquet
                raise HistoryInputError(f"{f}: not a Parquet file ({e})") from None
            out += [(run, str(f), g, -1) for g in range(groups)]
        elif f.name.endswith(".gz"):
            out.append((run, str(f), 0, -1))
        else:
            size = f.stat().st_size
            out += [(run, str(f), a, min(size, a + CHUNK)) for a in range(0, max(size, 1), CHUNK)]
    return out


def _row(run: str, r: dict[str, Any], path: str, line: int) -> dict[str, Any]:
    r = dict(r)
    for t in ("invoke_t", "complete_t"):
        if r[t] is not None:
            r[t] = float(r[t])
    r.update(run=run, file=path, line=line, bad=None)
    return r


def _bad(run: str, path: str, line: int, e: HistoryInputError) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(ROW_COLUMNS)
    out.update(run=run, file=path, line=line, bad=str(e))
    return out


def read_task(task: Task) -> Iterator[dict[str, Any]]:
    """The rows of one task (module doc); at most MAX_ERRORS bad rows, then it stops."""
    run, path, start, end = task
    try:
        yield from _checked(run, path, start, end)
    except (OSError, EOFError, ValueError) as e:  # a truncated gzip file, a damaged Parquet file
        yield _bad(run, path, 0, HistoryInputError(f"{path}: cannot be read to its end ({e})"))


def _checked(run: str, path: str, start: int, end: int) -> Iterator[dict[str, Any]]:
    errors = 0
    for line, item in _lines(path, start, end):
        try:
            where = f"{path}:{line}"
            r = parse_line(_text(item, where), where) if isinstance(item, bytes) else check_row(item, where)
        except HistoryInputError as e:
            yield _bad(run, path, line, e)
            errors += 1
            if errors >= MAX_ERRORS:
                return
            continue
        if r is not None:
            yield _row(run, r, path, line)


def _lines(path: str, start: int, end: int) -> Iterator[tuple[int, bytes | dict[str, Any]]]:
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        first = sum(pf.metadata.row_group(g).num_rows for g in range(start))
        for i, rec in enumerate(pf.read_row_group(start).to_pylist(), start=first + 1):
            yield i, rec
        return
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as g:
            for i, raw in enumerate(g, start=1):
                yield i, raw
        return
    with open(path, "rb") as f:
        if start == 0:
            pos, line = 0, 1
        else:
            nl = 0
            f.seek(0)
            left = start - 1
            while left > 0:
                block = f.read(min(left, 1 << 22))
                if not block:
                    break
                nl += block.count(b"\n")
                left -= len(block)
            prev = f.read(1)
            if prev == b"\n":
                pos = start
            else:
                pos = start + len(f.readline())  # that line began in the previous range
            line = nl + 2
        f.seek(pos)
        while pos < end:
            raw = f.readline()
            if not raw:
                break
            yield line, raw
            pos += len(raw)
            line += 1


def _text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HistoryInputError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_local(run_dir: str | PathLike[str]) -> list[dict[str, Any]]:
    """Every row of a run directory, read here (tests, small histories); HistoryInputError for
    bad input, naming the first problems."""
    from zabray.pipeline.history_rows import format_problems

    run = Path(run_dir).resolve().name
    rows: list[dict[str, Any]] = []
    bad: list[str] = []
    for t in tasks(run, history_files(run_dir)):
        try:
            for r in read_task(t):
                (bad.append(r["bad"]) if r["bad"] is not None else rows.append(r))
        except HistoryInputError as e:
            bad.append(str(e))
    if bad:
        raise HistoryInputError(format_problems(bad))
    return rows
