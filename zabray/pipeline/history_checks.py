"""Check client histories on Spark: per-key linearizability and per-session guarantees.

In a notebook::

    from zabray import pipeline
    spark = pipeline.get_session()
    h = pipeline.load_histories(spark, "runs/r1")        # histories/*.jsonl -> DataFrame
    pipeline.linearizability(h).show()                   # one row per key: verdict, culprits
    pipeline.session_violations(h).show()                # one row per violated session promise
    report = pipeline.check_histories(h)                 # both, only counterexamples collected
    print(pipeline.format_history_report(report))

A history splits by key into independent registers (Jepsen's independent checker): rows are
grouped by (run, key) and each group is searched on an executor by the pure
``zabray.pipeline.linearizability``; only each key's verdict row comes back, and the driver
collects just the rows that are not ``ok``. Session checks group by session the same way,
after a join gives every read the next known state of its key. Nothing here assumes the
driver's disk or memory holds the history: inputs are read by Spark, so the job runs unchanged
on a cluster (with zabray installed on the executors).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zabray.client.histories import HISTORY_DIR, SCHEMA, SCHEMA_VERSION
from zabray.pipeline.errors import TraceError
from zabray.pipeline.linearizability import DEFAULT_BUDGET

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

LIN_COLUMNS = "run string, key string, verdict string, ops long, steps long, culprits array<string>, " \
              "relaxed long, timeline string"
SESSION_COLUMNS = "run string, process string, property string, ops array<string>, detail string, timeline string"


def history_files(run_dir: str | PathLike[str]) -> list[Path]:
    """The history files of a run directory (``histories/*.jsonl`` and ``*.parquet``)."""
    run = Path(run_dir)
    if not run.is_dir():
        raise TraceError(f"run directory {run} does not exist" if not run.exists() else f"{run} is not a directory")
    d = run / HISTORY_DIR
    files = sorted(p for pat in ("*.jsonl", "*.jsonl.gz", "*.parquet") for p in d.glob(pat) if p.is_file())
    if not files:
        raise TraceError(f"no client histories in {d} (record them with `zabray faults run --histories` "
                         "or zabray.client.histories.HistoryRecorder)")
    return files


def spark_schema() -> Any:
    from pyspark.sql import types as T

    types = {"int": T.IntegerType(), "long": T.LongType(), "double": T.DoubleType(), "string": T.StringType()}
    return T.StructType([T.StructField(n, types[k], True) for n, k, _ in SCHEMA])


def load_histories(spark: SparkSession, *run_dirs: str | PathLike[str]) -> DataFrame:
    """Every history row of the run directories, with ``run`` (the directory's name). Lazy."""
    from functools import reduce

    from pyspark.sql import functions as F

    if not run_dirs:
        raise TraceError("no run directory given")
    frames = []
    for d in run_dirs:
        files = history_files(d)
        js = [str(f) for f in files if not f.name.endswith(".parquet")]
        pq = [str(f) for f in files if f.name.endswith(".parquet")]
        name = Path(d).resolve().name
        if js:
            frames.append(spark.read.schema(spark_schema()).json(js).withColumn("run", F.lit(name)))
        if pq:
            frames.append(spark.read.schema(spark_schema()).parquet(*pq).withColumn("run", F.lit(name)))
    return reduce(lambda a, b: a.unionByName(b), frames)


def from_rows(spark: SparkSession, rows: list[dict[str, Any]], run: str = "run") -> DataFrame:
    """A history DataFrame from row dicts (tests, notebooks)."""
    from pyspark.sql import functions as F

    cols = [c for c, _, _ in SCHEMA]
    return spark.createDataFrame([tuple(r.get(c) for c in cols) for r in rows], spark_schema()) \
        .withColumn("run", F.lit(run))


def _validated(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    bad = df.filter((F.col("v") != SCHEMA_VERSION) | F.col("key").isNull() | F.col("kind").isNull()
                    | F.col("invoke_t").isNull() | F.col("outcome").isNull() | F.col("op").isNull()).limit(1).collect()
    if bad:
        r = bad[0].asDict()
        raise TraceError(f"history row of client {r.get('client')!r} op {r.get('op')!r} is not schema version "
                         f"{SCHEMA_VERSION} or lacks key/kind/op/invoke_t/outcome: {r}")
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
    """One row per (run, key): ``verdict`` ok | violation | unknown (budget exceeded), with a
    violation's shrunk ``culprits`` (labels ``client#op``) and its ``timeline``. Lazy."""
    from zabray.pipeline.linearizability import check_key, ops_of

    ops_of([], reads)  # validate ``reads`` on the driver, before any job

    def per_key(pdf: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        rows = pdf.to_dict("records")
        v = check_key(str(rows[0]["key"]), ops_of(rows, reads=reads), budget=budget)
        return pd.DataFrame([{"run": rows[0]["run"], "key": v.key, "verdict": v.verdict, "ops": v.ops,
                              "steps": v.steps, "culprits": [op.label for op in v.culprits],
                              "relaxed": v.relaxed, "timeline": v.timeline}])

    cols = ["run", "client", "session", "op", "key", "kind", "value", "version", "invoke_t", "complete_t",
            "outcome", "result", "result_version", "error", "lin_invoke"]
    prepared = with_sync_invoke(_validated(df)).filter("kind != 'sync'").select(*cols)
    return prepared.groupBy("run", "key").applyInPandas(per_key, LIN_COLUMNS)


def session_violations(df: DataFrame) -> DataFrame:
    """One row per violated session promise (fifo, stale-read): the ops and a time line. Lazy."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from zabray.pipeline.session_guarantees import check_session

    df = _validated(df)
    label = F.concat_ws("#", F.col("client"), F.col("op").cast("string"))
    states = (df.filter((F.col("outcome") == "ok") & F.col("kind").isin("read", "write", "cas")
                        & F.col("zxid").isNotNull())
              .groupBy("run", "key", "zxid")
              .agg(F.min(F.struct((F.col("kind") == "read").alias("r"), label.alias("l"))).getField("l")
                   .alias("label")))
    w = Window.partitionBy("run", "key").orderBy("zxid")
    nxt = states.select("run", "key", "zxid", F.lead("zxid").over(w).alias("next_zxid"),
                        F.lead("label").over(w).alias("next_label"))
    reads = df.filter((F.col("kind") == "read") & (F.col("outcome") == "ok") & F.col("zxid").isNotNull()) \
        .select("run", "client", "op", "key", "zxid").join(nxt, ["run", "key", "zxid"], "left") \
        .select("run", "client", "op", "next_zxid", "next_label")
    cols = ["run", "client", "session", "op", "key", "kind", "value", "version", "invoke_t", "complete_t",
            "outcome", "result", "result_version", "zxid", "error"]
    annotated = df.select(*cols).join(reads, ["run", "client", "op"], "left")

    def per_session(pdf: pd.DataFrame) -> pd.DataFrame:
        import pandas as pd

        rows = pdf.to_dict("records")
        found = check_session(rows)
        return pd.DataFrame([{"run": rows[0]["run"], "process": v.process, "property": v.prop,
                              "ops": list(v.labels), "detail": v.detail, "timeline": v.timeline} for v in found],
                            columns=["run", "process", "property", "ops", "detail", "timeline"])

    return annotated.groupBy("run", "client", "session").applyInPandas(per_session, SESSION_COLUMNS)


@dataclass
class HistoryReport:
    """What ``check_histories`` found; only counterexamples, never the history itself."""

    ops: int = 0
    keys: dict[str, int] = field(default_factory=dict)  # verdict -> number of keys
    violations: list[dict[str, Any]] = field(default_factory=list)  # linearizability, per key
    unknown: list[dict[str, Any]] = field(default_factory=list)  # keys past the budget
    session: list[dict[str, Any]] = field(default_factory=list)  # fifo / stale-read
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations and not self.session

    def to_dict(self) -> dict[str, Any]:
        return {"history_schema_version": SCHEMA_VERSION, "ok": self.ok, "ops": self.ops, "keys": self.keys,
                "outcomes": self.outcomes, "violations": self.violations, "unknown": self.unknown,
                "session_violations": self.session}


def check_histories(df: DataFrame, *, budget: int = DEFAULT_BUDGET, reads: str = "after-sync",
                    max_collect: int = 1000) -> HistoryReport:
    """Run both checks; collect the counts and at most ``max_collect`` counterexamples of each."""
    from pyspark.sql import functions as F

    lin = linearizability(df, budget=budget, reads=reads).cache()
    try:
        rep = HistoryReport()
        rep.outcomes = {r["outcome"]: int(r["count"]) for r in df.groupBy("outcome").count().collect()}
        rep.ops = sum(rep.outcomes.values())
        rep.keys = {r["verdict"]: int(r["count"]) for r in lin.groupBy("verdict").count().collect()}
        bad = lin.filter(F.col("verdict") != "ok").orderBy("run", "key").limit(2 * max_collect).collect()
        rep.violations = [r.asDict() for r in bad if r["verdict"] == "violation"][:max_collect]
        rep.unknown = [r.asDict() for r in bad if r["verdict"] == "unknown"][:max_collect]
        rep.session = [r.asDict() for r in session_violations(df).orderBy("run", "process").limit(max_collect)
                       .collect()]
        return rep
    finally:
        lin.unpersist()


def format_history_report(rep: HistoryReport, show: int = 5) -> str:
    """A summary table, then the time line of the first ``show`` counterexamples of each kind."""
    keys = sum(rep.keys.values())
    n_fifo = sum(1 for v in rep.session if v["property"] == "fifo")
    n_stale = sum(1 for v in rep.session if v["property"] == "stale-read")
    lines = [f"{rep.ops:,} operations ({', '.join(f'{k} {v:,}' for k, v in sorted(rep.outcomes.items()))}) "
             f"on {keys:,} keys",
             f"{'property':<26}  verdict  violations",
             f"{'linearizable (per key)':<26}  {'FAIL' if rep.violations else 'PASS':<7}  {len(rep.violations):>10}"
             + (f"  ({len(rep.unknown)} keys unknown: budget exceeded)" if rep.unknown else ""),
             f"{'session FIFO order':<26}  {'FAIL' if n_fifo else 'PASS':<7}  {n_fifo:>10}",
             f"{'no read back in time':<26}  {'FAIL' if n_stale else 'PASS':<7}  {n_stale:>10}"]
    for v in rep.violations[:show]:
        lines += ["", v["timeline"]]
    for v in rep.session[:show]:
        lines += ["", v["detail"], v["timeline"]]
    for v in rep.unknown[:show]:
        lines += ["", v["timeline"]]
    return "\n".join(lines)
