"""``zabray check --histories RUN_DIR...``: check client histories, print and save the verdicts.

Exit codes: 0 every property checked holds (PASS), 1 a violation (FAIL), 2 bad input (a file or
line the checker refuses, an empty history: nothing is skipped or guessed), 3 no violation but
some key's search ran out of its budget (UNKNOWN: not checked, so not passed; each such key is
named). With several run directories, the worst: 2, then 1, then 3, then 0. The report goes to
``RUN_DIR/analysis/histories.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from zabray.cli.spark import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_UNKNOWN,
    EXIT_VIOLATION,
    out_dir,
    preflight,
    say,
    with_spark,
)
from zabray.pipeline.errors import TraceError
from zabray.pipeline.linearizability import DEFAULT_BUDGET

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SEVERITY = (EXIT_OK, EXIT_UNKNOWN, EXIT_VIOLATION, EXIT_BAD_INPUT)  # worst last


def worst(a: int, b: int) -> int:
    return max(a, b, key=SEVERITY.index)


def run_history_check(args: argparse.Namespace) -> int:
    from zabray.pipeline.history_io import history_files

    dirs = [Path(d) for d in args.run_dirs]
    budget = args.budget
    nfiles = preflight(args, lambda d: len(history_files(d)),
                       "--budget must be a positive number of search steps" if budget is not None and budget < 1 else None)
    if nfiles is None:
        return EXIT_BAD_INPUT

    def check(spark: SparkSession) -> int:
        code = EXIT_OK
        for d in dirs:
            code = worst(code, _check_run(spark, d, args, nfiles[d]))
        return code

    return with_spark(args, check)


def _check_run(spark: SparkSession, d: Path, args: argparse.Namespace, nfiles: int) -> int:
    """Check one run directory's histories, print the verdicts, save the report."""
    from zabray.pipeline.history_checks import check_histories, format_history_report, load_histories

    started = time.monotonic()
    print(f"== {d} ({nfiles} history files, Spark {spark.sparkContext.master})")
    try:
        rep = check_histories(load_histories(spark, d), budget=args.budget or DEFAULT_BUDGET, reads=args.reads)
    except TraceError as e:
        say(e)
        return EXIT_BAD_INPUT
    print(format_history_report(rep))
    out = out_dir(args, d) / "histories.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {**rep.to_dict(), "run_dir": str(d), "elapsed_s": round(time.monotonic() - started, 3)}
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    tmp.replace(out)
    print(f"report: {out}")
    return {"PASS": EXIT_OK, "FAIL": EXIT_VIOLATION, "UNKNOWN": EXIT_UNKNOWN}[rep.verdict]
