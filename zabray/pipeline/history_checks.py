"""Check client histories on Spark: per-key linearizability, reads, sessions and multis.

In a notebook::

    from zabray import pipeline
    spark = pipeline.get_session()
    h = pipeline.load_histories(spark, "runs/r1")        # histories/* -> DataFrame, every line
    pipeline.linearizability(h).show()                   # one row per key: verdict, culprits
    report = pipeline.check_histories(h)                 # every check, only counterexamples collected
    print(pipeline.format_history_report(report))

The steps are those of ``zabray.pipeline.history_local`` (which runs them in memory), each a
pure function applied with ``applyInPandas`` to one group: a key for the search, the reveals
of unknown writes and each read's judgement; a multi (or a revealed write) for its zxid; a
session for FIFO order and reads back in time. Only rows that are not ``ok`` reach the driver.
Files are read by Spark tasks (``history_io``), every line of every file, so the job runs
unchanged on a cluster whose executors see the run directory (with zabray installed there).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zabray.client.histories import SCHEMA
from zabray.pipeline.errors import TraceError
from zabray.pipeline.history_io import history_files
from zabray.pipeline.history_report import HistoryReport, format_history_report
from zabray.pipeline.history_rows import MAX_ERRORS, HistoryInputError, RowIndex, format_problems
from zabray.pipeline.linearizability import DEFAULT_BUDGET

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

__all__ = ["HistoryReport", "check_histories", "format_history_report", "from_rows", "history_files",
           "linearizability", "load_histories", "session_violations"]

LIN_COLUMNS = ("run string, key string, verdict string, ops long, steps long, ms double, culprits array<string>, "
               "sources array<string>, relaxed long, timeline string")
VIOLATION_COLUMNS = "run string, process string, property string, ops array<string>, detail string, timeline string"
PROBLEM = ("p_process string, p_property string, p_ops array<string>, p_detail string, p_timeline string")


def spark_schema() -> Any:
    from pyspark.sql import types as T

    types = {"int": T.IntegerType(), "long": T.LongType(), "double": T.DoubleType(), "string": T.StringType()}
    return T.StructType([T.StructField(n, types[k], True) for n, k, _ in SCHEMA]
                        + [T.StructField("run", T.StringType(), True), T.StructField("file", T.StringType(), True),
                           T.StructField("line", T.LongType(), True), T.StructField("bad", T.StringType(), True)])


def load_histories(spark: SparkSession, *run_dirs: str | PathLike[str]) -> DataFrame:
    """Every history row of the run directories (schema version 2 columns; a version 1 row has
    no ``multi``), with ``run`` (the directory's name), ``file``, ``line`` and ``bad`` (why the
    line was refused, else null). Lazy: read by Spark tasks, a byte range of a file each."""
    from zabray.pipeline import history_io

    if not run_dirs:
        raise TraceError("no run directory given")
    tasks: list[history_io.Task] = []
    for d in run_dirs:
        tasks += history_io.tasks(Path(d).resolve().name, history_files(d))
    cols = [f.name for f in spark_schema().fields]

    def read(t: history_io.Task) -> Iterator[tuple[Any, ...]]:
        for r in history_io.read_task(t):
            yield tuple(r.get(c) for c in cols)

    rdd = spark.sparkContext.parallelize(tasks, max(1, len(tasks))).flatMap(read)
    return spark.createDataFrame(rdd, spark_schema(), verifySchema=False)


def from_rows(spark: SparkSession, rows: list[dict[str, Any]], run: str = "run") -> DataFrame:
    """A history DataFrame from row dicts (tests, notebooks): as ``load_histories`` returns."""
    cols = [f.name for f in spark_schema().fields]
    data = [tuple({**r, "run": run, "multi": r.get("multi")}.get(c) for c in cols) for r in rows]
    return spark.createDataFrame(data, spark_schema())


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    """A UDF's answer: object columns (pandas 3's own string columns, empty ones above all, do
    not convert to Arrow in PySpark 4)."""
    import pandas as pd

    return pd.DataFrame(rows, columns=columns, dtype=object)


def _records(pdf: pd.DataFrame) -> list[dict[str, Any]]:
    """pandas rows as plain Python: None for nulls (not NaN), lists for arrays, ints for ints."""
    import math

    out = []
    for rec in pdf.to_dict("records"):
        row: dict[str, Any] = {}
        for k, v in rec.items():
            if v is None or (isinstance(v, float) and math.isnan(v)):
                row[k] = None
            elif hasattr(v, "tolist"):
                row[k] = v.tolist()
            else:
                row[k] = v
        out.append(row)
    return out


def validated(df: DataFrame) -> DataFrame:
    """``df`` persisted, once every line is a good row and the rows fit together; else
    HistoryInputError naming FILE:LINE of the first problems (a history without a single
    operation is one too: checked nothing)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    bad = df.filter(F.col("bad").isNotNull())
    first = [r["bad"] for r in bad.select("bad", "file", "line").orderBy("file", "line").limit(MAX_ERRORS).collect()]
    if first:
        n = bad.count()
        df.unpersist()
        raise HistoryInputError(format_problems(first, n))

    def fit(pdf: pd.DataFrame) -> pd.DataFrame:
        idx = RowIndex()
        for r in _records(pdf):
            idx.add(r)
        idx.finish()
        return _frame([{"problem": p} for p in idx.problems], ["problem"])

    cols = ["run", "client", "session", "op", "multi", "invoke_t", "complete_t", "outcome", "zxid", "v", "file", "line"]
    problems = [r["problem"] for r in df.filter(F.col("bad").isNull()).select(*cols)
                .groupBy("run", "client", "session").applyInPandas(fit, "problem string").limit(MAX_ERRORS).collect()]
    if problems:
        df.unpersist()
        raise HistoryInputError(format_problems(sorted(problems)))
    if not df.limit(1).count():
        df.unpersist()
        raise HistoryInputError("the history files hold no operations: checked nothing")
    return df


def with_sync_invoke(df: DataFrame) -> DataFrame:
    """Add ``lin_invoke``: on a read right after its session's ``ok`` sync (issue order), the
    sync's invocation, from where that read must be linearizable."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("run", "client", "session").orderBy("op")
    after_sync = (F.col("kind") == "read") & (F.lag("kind").over(w) == "sync") & (F.lag("outcome").over(w) == "ok")
    return df.withColumn("lin_invoke", F.when(after_sync, F.lag("invoke_t").over(w)))


def linearizability(df: DataFrame, *, budget: int = DEFAULT_BUDGET, reads: str = "after-sync") -> DataFrame:
    """One row per (run, key): ``verdict`` ok | violation | unknown (budget exceeded, not
    decided), a violation's ``culprits`` (labels ``client#op``) with their ``sources``
    (FILE:LINE), its ``timeline``, and the search's ``steps`` and ``ms``. Lazy."""
    from zabray.pipeline.history_local import lin_row
    from zabray.pipeline.linearizability import check_key, ops_of

    ops_of([], reads)  # validate ``reads`` on the driver, before any job

    def per_key(pdf: pd.DataFrame) -> pd.DataFrame:
        rows = _records(pdf)
        started = time.perf_counter()
        v = check_key(str(rows[0]["key"]), ops_of(rows, reads=reads), budget=budget)
        out = lin_row(rows[0]["run"], v)
        out["ms"] = (time.perf_counter() - started) * 1000
        return _frame([out], [c.split(" ")[0] for c in LIN_COLUMNS.split(", ")])

    prepared = with_sync_invoke(df.filter("bad is null")).filter("kind != 'sync'").drop("bad", "replica")
    return prepared.groupBy("run", "key").applyInPandas(per_key, LIN_COLUMNS)


def _problem_cols(v: Any) -> dict[str, Any]:
    return {"p_process": v.process, "p_property": v.prop, "p_ops": list(v.labels), "p_detail": v.detail,
            "p_timeline": v.timeline}


def _annotated(df: DataFrame) -> DataFrame:
    """Steps 1 to 3 of ``history_local``: every row with ``eff_zxid``, the read annotations and
    the problems found (``p_*`` columns, on the row each is about). Lazy."""
    from pyspark.sql import functions as F

    from zabray.pipeline.key_states import annotate, reveal
    from zabray.pipeline.multi_checks import consolidate

    base = df.filter("bad is null").drop("bad")
    cols = base.columns
    rev_ddl = "run string, client string, session string, op long, revealed long, by string, key string"

    def per_key_reveal(pdf: pd.DataFrame) -> pd.DataFrame:
        rows = _records(pdf)
        out = [{"run": rows[0]["run"], **v} for v in reveal(rows)]
        return _frame(out, ["run", "client", "session", "op", "revealed", "by", "key"])

    reveals = base.groupBy("run", "key").applyInPandas(per_key_reveal, rev_ddl)
    rv = reveals.groupBy("run", "client", "session", "op").agg(
        F.collect_list(F.struct("revealed", "by", "key")).alias("reveals"))
    joined = base.join(rv, ["run", "client", "session", "op"], "left")
    needs = F.col("multi").isNotNull() | F.col("reveals").isNotNull()
    unit_ddl = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in base.schema.fields) \
        + ", eff_zxid long, " + PROBLEM

    def per_unit(pdf: pd.DataFrame) -> pd.DataFrame:
        rows = _records(pdf)
        rvs = [{"op": r["op"], **x} for r in rows for x in (r.pop("reveals") or [])]
        out, problems = consolidate(rows, rvs)
        for r in out:
            r.update(dict.fromkeys(("p_process", "p_property", "p_ops", "p_detail", "p_timeline")))
        if problems:
            out[0].update(_problem_cols(problems[0]))
        return _frame(out, [*cols, "eff_zxid", "p_process", "p_property", "p_ops", "p_detail", "p_timeline"])

    units = joined.filter(needs).withColumn("unit", F.coalesce("multi", "op")) \
        .groupBy("run", "client", "session", "unit").applyInPandas(per_unit, unit_ddl)
    plain = joined.filter(~needs).drop("reveals") \
        .withColumn("eff_zxid", F.when(F.col("outcome") == "ok", F.col("zxid"))) \
        .select(*cols, "eff_zxid", *[F.lit(None).cast(t).alias(n) for n, t in
                                     (x.strip().split(" ", 1) for x in PROBLEM.split(", "))])
    eff = units.unionByName(plain)
    ann_ddl = unit_ddl + ", next_zxid long, next_label string, absent_from array<long>, absent_to array<long>"
    ann_cols = [*cols, "eff_zxid", "p_process", "p_property", "p_ops", "p_detail", "p_timeline", "next_zxid",
                "next_label", "absent_from", "absent_to"]

    def per_key(pdf: pd.DataFrame) -> pd.DataFrame:
        rows = _records(pdf)
        out, problems = annotate(rows)
        for i, v in problems:
            if out[i].get("p_property") is None:
                out[i].update(_problem_cols(v))
            else:  # one problem per row is kept; the first found stands
                log.debug("also on %s: %s", out[i].get("op"), v.detail)
        return _frame(out, ann_cols)

    return eff.groupBy("run", "key").applyInPandas(per_key, ann_ddl)


def session_violations(df: DataFrame) -> DataFrame:
    """One row per broken session promise (fifo, stale-read) and per read, multi or zxid-order
    problem found on a key: ``property``, the ops, a one-line ``detail`` and a time line. Lazy."""
    from pyspark.sql import functions as F

    from zabray.pipeline.session_guarantees import check_session

    ann = _annotated(df).cache()

    def per_session(pdf: pd.DataFrame) -> pd.DataFrame:
        rows = _records(pdf)
        found = check_session(rows)
        return _frame([{"run": rows[0]["run"], "process": v.process, "property": v.prop, "ops": list(v.labels),
                        "detail": v.detail, "timeline": v.timeline} for v in found],
                      ["run", "process", "property", "ops", "detail", "timeline"])

    sess = ann.drop("p_process", "p_property", "p_ops", "p_detail", "p_timeline") \
        .groupBy("run", "client", "session").applyInPandas(per_session, VIOLATION_COLUMNS)
    found = ann.filter(F.col("p_property").isNotNull()).select(
        "run", F.col("p_process").alias("process"), F.col("p_property").alias("property"),
        F.col("p_ops").alias("ops"), F.col("p_detail").alias("detail"), F.col("p_timeline").alias("timeline"))
    return found.unionByName(sess)


def check_histories(df: DataFrame, *, budget: int = DEFAULT_BUDGET, reads: str = "after-sync",
                    max_collect: int = 1000) -> HistoryReport:
    """Every check (``df`` from ``load_histories``: refused lines, duplicated rows and an empty
    history raise HistoryInputError first); the counts and at most ``max_collect``
    counterexamples of each kind."""
    from pyspark.sql import functions as F

    df = validated(df)
    lin = linearizability(df, budget=budget, reads=reads).cache()
    try:
        rep = HistoryReport(reads=reads)
        rep.outcomes = {r["outcome"]: int(r["count"]) for r in df.groupBy("outcome").count().collect()}
        rep.ops = sum(rep.outcomes.values())
        rep.keys = {r["verdict"]: int(r["count"]) for r in lin.groupBy("verdict").count().collect()}
        st = lin.agg(F.mean("ms").alias("ms_mean"), F.percentile_approx("ms", 0.99).alias("ms_p99"),
                     F.max("ms").alias("ms_max"), F.max("steps").alias("steps_max")).first()
        if st is not None and st["ms_max"] is not None:
            rep.search = {k: float(st[k]) for k in ("ms_mean", "ms_p99", "ms_max", "steps_max")}
        bad = lin.filter(F.col("verdict") != "ok").orderBy("run", "key").limit(2 * max_collect).collect()
        rep.violations = [r.asDict() for r in bad if r["verdict"] == "violation"][:max_collect]
        rep.unknown = [r.asDict() for r in bad if r["verdict"] == "unknown"][:max_collect]
        rep.session = [r.asDict() for r in session_violations(df).orderBy("run", "property", "process", "detail")
                       .limit(max_collect).collect()]
        return rep
    finally:
        lin.unpersist()
        df.unpersist()
