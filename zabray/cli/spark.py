"""What ``zabray check`` and ``zabray check --histories`` share: exit codes, where reports go,
options checked before a JVM starts, and starting Spark with a one-line error."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from zabray.pipeline.errors import TraceError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXIT_OK, EXIT_VIOLATION, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3
"""EXIT_UNKNOWN: a history search that did not finish (never a pass)."""


def out_dir(args: argparse.Namespace, run_dir: Path) -> Path:
    if not args.out:
        return run_dir / "analysis"
    return Path(args.out) if len(args.run_dirs) == 1 else Path(args.out) / run_dir.resolve().name


def bad_options(args: argparse.Namespace) -> str | None:
    """What is wrong with the options that no run directory decides (None if nothing), found
    before a JVM starts: a bucket that is not a positive time, an output directory that cannot
    be made."""
    bucket = getattr(args, "bucket", None)
    if bucket is not None and not bucket > 0:
        return f"--bucket must be a positive number of seconds, got {bucket:g}"
    for d in args.run_dirs:
        out = out_dir(args, Path(d))
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return f"cannot create the output directory {out}: {e.strerror or e}"
    return None


def say(error: object) -> None:
    print(f"zabray check: {error}", file=sys.stderr)


def preflight(args: argparse.Namespace, count: Callable[[Path], int], extra: str | None = None) -> dict[Path, int] | None:
    """The number of input files in each run directory (``count`` raises ``TraceError`` for a
    directory it cannot read), or None when the input or an option is bad (``extra`` is a
    caller's own complaint): said in one line, before a JVM starts."""
    try:
        nfiles = {Path(d): count(Path(d)) for d in args.run_dirs}
    except TraceError as e:
        say(e)
        return None
    bad = bad_options(args) or extra
    if bad is not None:
        say(bad)
        return None
    return nfiles


def with_spark(args: argparse.Namespace, body: Callable[[SparkSession], int]) -> int:
    """``body``'s exit code, run on a Spark session started for it and stopped after it (one
    already active, a notebook's or a test's, is used and left running); exit 2 in one line if
    Spark cannot start."""
    from pyspark.sql import SparkSession

    ours = SparkSession.getActiveSession() is None
    try:
        spark = start_spark(args.master)
    except TraceError as e:
        say(e)
        return EXIT_BAD_INPUT
    try:
        return body(spark)
    finally:
        if ours:
            spark.stop()


def start_spark(master: str | None) -> SparkSession:
    """The Spark session, or ``TraceError`` in one line when Spark cannot start (a bad
    ``--master``, no Java): PySpark's own error is a page of Java gateway traceback."""
    from zabray.pipeline.spark_session import get_session

    try:
        return get_session(master)
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise TraceError(f"cannot start Spark (master {master or 'default'}): {first}") from None
