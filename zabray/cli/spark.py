"""What ``zabray check`` and ``zabray check --histories`` share: exit codes, where reports go,
options checked before a JVM starts, and starting Spark with a one-line error."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

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


def start_spark(master: str | None) -> SparkSession:
    """The Spark session, or ``TraceError`` in one line when Spark cannot start (a bad
    ``--master``, no Java): PySpark's own error is a page of Java gateway traceback."""
    from zabray.pipeline.errors import TraceError
    from zabray.pipeline.spark_session import get_session

    try:
        return get_session(master)
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise TraceError(f"cannot start Spark (master {master or 'default'}): {first}") from None
