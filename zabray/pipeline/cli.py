"""``zabray check RUN_DIR [RUN_DIR...]``: check traces for Zab's properties, write figures.

Exit codes: 0 every property holds in every run, 1 some property fails, 2 bad input (a
missing directory, no trace files, an unreadable trace). Each RUN_DIR is checked on its own
and reports into ``RUN_DIR/analysis`` (or ``--out``; ``--out/<name>`` for several runs).
Importing this module does not import PySpark, so the main CLI stays light.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from zabray.pipeline.errors import TraceError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

EXIT_OK, EXIT_VIOLATION, EXIT_BAD_INPUT, EXIT_UNKNOWN = 0, 1, 2, 3


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``check`` subcommand; its ``func`` default is :func:`run_check`."""
    p = subparsers.add_parser(
        "check", help="check run traces for Zab's safety properties and compute figures",
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: 0 all properties hold, 1 a violation, 2 bad input, 3 (--histories only) no violation "
               "found but some key undecided (its search ran out of --budget): not a pass")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directory with trace/*.jsonl")
    p.add_argument("--master", help="Spark master URL (default: spark-submit/SPARK_* settings, else local[2])")
    p.add_argument("--out", metavar="DIR", help="output directory (default RUN_DIR/analysis)")
    p.add_argument("--no-figures", action="store_true", help="only check; skip Parquet figures and plots")
    p.add_argument("--bucket", type=float, metavar="T", help="time bucket of the figures (default: automatic)")
    p.add_argument("--histories", action="store_true",
                   help="check the clients' histories (RUN_DIR/histories/): per-key linearizability, every "
                        "read, session guarantees and multis, instead of the replicas' traces "
                        "(docs/checking-histories.md)")
    p.add_argument("--budget", type=int, default=None, metavar="STEPS",
                   help="with --histories: search steps per key (default 2,000,000) before its verdict is "
                        "UNKNOWN (exit 3)")
    p.add_argument("--reads", choices=("after-sync", "all", "none"), default="after-sync",
                   help="with --histories: which reads the linearizability search includes (ZooKeeper promises "
                        "it only after a sync); every read is checked against the zxid order regardless")
    p.set_defaults(func=run_check)
    return p


def _out_dir(args: argparse.Namespace, run_dir: Path) -> Path:
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
        out = _out_dir(args, Path(d))
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return f"cannot create the output directory {out}: {e.strerror or e}"
    return None


def start_spark(master: str | None) -> SparkSession:
    """The Spark session, or ``TraceError`` in one line when Spark cannot start (a bad
    ``--master``, no Java): PySpark's own error is a page of Java gateway traceback."""
    from zabray.pipeline.spark_session import get_session

    try:
        return get_session(master)
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise TraceError(f"cannot start Spark (master {master or 'default'}): {first}") from None


def run_check(args: argparse.Namespace) -> int:
    """Run the subcommand; returns the exit code (the worst over all run directories)."""
    if getattr(args, "histories", False):
        from zabray.pipeline.history_cli import run_history_check

        return run_history_check(args)
    from zabray.pipeline.loader import trace_files

    dirs = [Path(d) for d in args.run_dirs]
    try:
        nfiles = {d: len(trace_files(d)) for d in dirs}  # fail fast, before starting a JVM
    except TraceError as e:
        print(f"zabray check: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT

    bad = bad_options(args)
    if bad is not None:
        print(f"zabray check: {bad}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from pyspark.sql import SparkSession

    ours = SparkSession.getActiveSession() is None
    try:
        spark = start_spark(args.master)
    except TraceError as e:
        print(f"zabray check: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        code = max(_check_run(spark, d, args, nfiles[d]) for d in dirs)
    finally:
        if ours:
            spark.stop()
    if len(dirs) > 1 and not args.no_figures:
        from zabray.pipeline.plots import compare

        done = [d for d in dirs if (_out_dir(args, d) / "throughput.parquet").exists()]
        if len(done) > 1:
            where = Path(args.out) if args.out else Path(os.path.commonpath([d.resolve() for d in dirs]))
            png = compare([_out_dir(args, d) for d in done], where / "compare.png", [d.resolve().name for d in done])
            print(f"comparison of {len(done)} runs: {png}")
    return code


def _check_run(spark: SparkSession, run_dir: Path, args: argparse.Namespace, nfiles: int) -> int:
    """Check one run directory, print its table, write its report (and figures)."""
    from zabray.pipeline.checks import check
    from zabray.pipeline.frames import TraceFrames
    from zabray.pipeline.loader import load
    from zabray.pipeline.metrics import figures, write_figures
    from zabray.pipeline.report import format_table, write_json

    started = time.monotonic()
    print(f"== {run_dir} ({nfiles} trace files, Spark {spark.sparkContext.master})")
    frames = TraceFrames(load(spark, run_dir))  # parsed once, shared by the checks and the figures
    out = _out_dir(args, run_dir)
    try:
        report = check(frames)
        print(format_table(report))
        written = [] if args.no_figures else write_figures(figures(frames, bucket=args.bucket), out)
    except TraceError as e:
        print(f"zabray check: {run_dir}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        frames.unpersist()
    path = write_json(report, out / "check.json", run_dir=str(run_dir), trace_files=nfiles,
                      figures=[str(p) for p in written], elapsed_s=round(time.monotonic() - started, 3))
    print(f"report: {path}" + (f"; figures in {out}" if written else ""))
    return EXIT_OK if report.ok else EXIT_VIOLATION


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m zabray.pipeline check ...``)."""
    parser = argparse.ArgumentParser(prog="zabray")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
