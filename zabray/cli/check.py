"""``zabray check RUN_DIR [RUN_DIR...]``: check traces for Zab's properties, write figures.

Exit codes: 0 every property holds in every run, 1 some property fails, 2 bad input (a
missing directory, no trace files, an unreadable trace). Each RUN_DIR is checked on its own
and reports into ``RUN_DIR/analysis`` (or ``--out``; ``--out/<name>`` for several runs).
Importing this module does not import PySpark, so the main CLI stays light.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from zabray.cli.check_histories import run_history_check
from zabray.cli.spark import EXIT_BAD_INPUT, EXIT_OK, EXIT_VIOLATION, out_dir, preflight, say, with_spark
from zabray.pipeline.errors import TraceError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


def run_check(args: argparse.Namespace) -> int:
    """Run the subcommand; returns the exit code (the worst over all run directories)."""
    if getattr(args, "histories", False):
        return run_history_check(args)
    from zabray.pipeline.loader import trace_files

    dirs = [Path(d) for d in args.run_dirs]
    nfiles = preflight(args, lambda d: len(trace_files(d)))
    if nfiles is None:
        return EXIT_BAD_INPUT
    code = with_spark(args, lambda spark: max(_check_run(spark, d, args, nfiles[d]) for d in dirs))
    if len(dirs) > 1 and not args.no_figures:
        from zabray.pipeline.plots import compare

        done = [d for d in dirs if (out_dir(args, d) / "throughput.parquet").exists()]
        if len(done) > 1:
            where = Path(args.out) if args.out else Path(os.path.commonpath([d.resolve() for d in dirs]))
            png = compare([out_dir(args, d) for d in done], where / "compare.png", [d.resolve().name for d in done])
            print(f"comparison of {len(done)} runs: {png}")
    return code


def _check_run(spark: SparkSession, run_dir: Path, args: argparse.Namespace, nfiles: int) -> int:
    """Check one run directory, print its table, write its report (and figures)."""
    from zabray.pipeline.rundir import check_run_dir

    print(f"== {run_dir} ({nfiles} trace files, Spark {spark.sparkContext.master})")
    try:
        done = check_run_dir(spark, run_dir, out_dir(args, run_dir), with_figures=not args.no_figures,
                             bucket=args.bucket)
    except TraceError as e:
        say(f"{run_dir}: {e}")
        return EXIT_BAD_INPUT
    print(done.table)
    print(f"report: {done.report_path}" + (f"; figures in {done.report_path.parent}" if done.figures else ""))
    return EXIT_OK if done.report.ok else EXIT_VIOLATION
