"""Performance figures of a run, as small DataFrames (Parquet) and PNG plots.

Definitions (all per ``run``; times in the trace's unit, seconds or ticks):

* commit time of a zxid: its first delivery by any replica (redeliveries after a restart
  do not count again).
* ``throughput``: commits, and client ops completed ok (writes, reads), per time bucket
  ``[k*bucket, (k+1)*bucket)``, empty buckets included, plus commits per unit time.
* ``latency``: per client op type, ``complete_t - invoke_t`` of ok ops: count, mean, max and
  nearest-rank percentiles p50/p90/p99/p99.9 (``percentile_approx``, exact below 100k values).
* ``latency_over_time``: p50/p99 per bucket of completion time, writes and reads apart.
* ``recovery``: per fault (deduplicated on fault, target, start), the first ``established``
  at or after its start and before the next fault's start, and the first commit at or after
  that (or after the start if no leader was re-established), as delays from the start.
* ``replica_lag``: per replica, first delivery of each zxid minus its commit time (mean,
  p50, p99, max), the highest zxid delivered and how many committed txns lie above it.
* ``lag_over_time``: per replica and bucket, mean and max of that lag.
* ``leader_changes``: first ``established`` per epoch; ``faults``: the fault intervals.
* ``runs``: per run, its first and last trace time (``t0``: the run's start, the zero of every
  plot's time axis) and whether it was simulated (times in ticks, not seconds: a simulated
  run's clock starts at 0, a real one's is the wall clock).
* ``uptime``: per replica incarnation, its first and last trace row: a replica was down
  between one incarnation's last row and the next one's first (plots leave that gap empty).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, fields
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

from zabray.pipeline.frames import READ_OPS, TraceFrames
from zabray.pipeline.loader import with_position
from zabray.pipeline.plots import plot

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999))
ACCURACY = 100_000
TARGET_BUCKETS = 120


@dataclass(frozen=True)
class Figures:
    """The figure DataFrames of one trace; ``bucket`` is the time-bucket width used.

    The frames share two persisted intermediates (commit times, per-replica lag); call
    :meth:`unpersist` once they have been collected (``write_figures`` does).
    """

    bucket: float
    throughput: DataFrame
    latency: DataFrame
    latency_over_time: DataFrame
    recovery: DataFrame
    replica_lag: DataFrame
    lag_over_time: DataFrame
    leader_changes: DataFrame
    faults: DataFrame
    runs: DataFrame
    uptime: DataFrame
    _cached: tuple[DataFrame, ...] = field(default=(), repr=False, compare=False)

    def frames(self) -> dict[str, DataFrame]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("bucket", "_cached")}

    def unpersist(self) -> None:
        for df in self._cached:
            df.unpersist()


def nice_bucket(span: float, target: int = TARGET_BUCKETS) -> float:
    """The smallest 1/2/5 x 10^k width that cuts ``span`` into at most ``target`` buckets."""
    if not span or span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / target
    base = 10.0 ** math.floor(math.log10(raw))
    return next(m * base for m in (1, 2, 5, 10) if m * base >= raw * (1 - 1e-12))


_ALL_PERCENTILES = tuple(name for name, _ in PERCENTILES)


def _percentiles(col: str, names: tuple[str, ...] = _ALL_PERCENTILES) -> list[Column]:
    """Nearest-rank percentiles of ``col``, one column per name in ``PERCENTILES``."""
    from pyspark.sql import functions as F

    chosen = [(n, p) for n, p in PERCENTILES if n in names]
    q = F.percentile_approx(col, [p for _, p in chosen], ACCURACY)
    return [q[i].alias(n) for i, (n, _) in enumerate(chosen)]


def figures(trace: DataFrame | TraceFrames, bucket: float | None = None) -> Figures:
    """Figure DataFrames of a trace (lazy, except one small job to pick ``bucket`` if not given).

    Pass the ``TraceFrames`` a ``check`` used to read its persisted rows instead of the files.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = trace.events if isinstance(trace, TraceFrames) else with_position(trace)
    deliveries = df.where((F.col("kind") == "deliver") & F.col("zxid").isNotNull() & F.col("t").isNotNull())
    clients = (df.where((F.col("kind") == "client") & (F.col("outcome") == "ok")
                        & F.col("complete_t").isNotNull() & F.col("invoke_t").isNotNull())
               .select("run", "op", "invoke_t", "complete_t",
                       F.when(F.lower("op").isin(*READ_OPS), "read").otherwise("write").alias("cls"),
                       (F.col("complete_t") - F.col("invoke_t")).alias("latency")))
    if isinstance(trace, TraceFrames):  # one row per (zxid, digest) already: far fewer than deliveries
        commits = trace.delivered.groupBy("run", "zxid").agg(F.min("first_t").alias("commit_t"))
    else:
        commits = deliveries.groupBy("run", "zxid").agg(F.min("t").alias("commit_t"))
    commits = commits.persist()

    if bucket is None:
        span = (deliveries.select("t").unionByName(clients.select(F.col("complete_t").alias("t")))
                .agg(F.min("t"), F.max("t")).first())
        bucket = nice_bucket((span[1] - span[0]) if span is not None and span[0] is not None else 0.0)
    if bucket <= 0:
        raise ValueError(f"bucket must be positive, not {bucket}")
    b = float(bucket)

    def idx(col: str) -> Column:
        return F.floor(F.col(col) / F.lit(b)).cast("long")

    # throughput, with empty buckets
    c_b = commits.groupBy("run", idx("commit_t").alias("k")).agg(F.count(F.lit(1)).alias("commits"))
    o_b = clients.groupBy("run", idx("complete_t").alias("k")).agg(
        F.sum(F.when(F.col("cls") == "write", 1).otherwise(0)).alias("writes_ok"),
        F.sum(F.when(F.col("cls") == "read", 1).otherwise(0)).alias("reads_ok"))
    span_k = (c_b.select("run", "k").unionByName(o_b.select("run", "k")).groupBy("run")
              .agg(F.min("k").alias("lo"), F.max("k").alias("hi")))
    every_k = span_k.select("run", F.explode(F.sequence("lo", "hi")).alias("k"))
    throughput = (every_k.join(c_b, ["run", "k"], "left").join(o_b, ["run", "k"], "left")
                  .fillna(0, ["commits", "writes_ok", "reads_ok"])
                  .select("run", (F.col("k") * b).alias("bucket_start"), F.lit(b).alias("bucket"),
                          F.col("commits").cast("long"), F.col("writes_ok").cast("long"),
                          F.col("reads_ok").cast("long"), (F.col("commits") / b).alias("commits_per_t"))
                  .orderBy("run", "bucket_start"))

    latency = (clients.groupBy("run", "op", "cls")
               .agg(F.count(F.lit(1)).alias("count"), F.avg("latency").alias("mean"),
                    *_percentiles("latency"), F.max("latency").alias("max"))
               .orderBy("run", "op"))
    latency_over_time = (clients.groupBy("run", "cls", idx("complete_t").alias("k"))
                         .agg(F.count(F.lit(1)).alias("count"),
                              *_percentiles("latency", ("p50", "p99")),
                              F.max("latency").alias("max"))
                         .select("run", "cls", (F.col("k") * b).alias("bucket_start"), "count", "p50", "p99", "max")
                         .orderBy("run", "cls", "bucket_start"))

    # faults and recovery
    faults = (df.where((F.col("kind") == "fault") & F.col("start").isNotNull())
              .groupBy("run", "fault", "target", "start").agg(F.max("end").alias("end")))
    nxt = Window.partitionBy("run").orderBy("start", "fault", "target")
    faults = faults.select("*", F.lead("start").over(nxt).alias("next_start"))
    established = (df.where((F.col("kind") == "established") & F.col("t").isNotNull())
                   .select(F.col("run").alias("erun"), F.col("t").alias("et"), F.col("epoch").alias("eepoch"),
                           F.col("replica").alias("ereplica")))
    in_window = (F.col("next_start").isNull() | (F.col("et") < F.col("next_start")))
    est = (faults.join(established, (F.col("run") == F.col("erun")) & (F.col("et") >= F.col("start")) & in_window,
                       "left")
           .groupBy("run", "fault", "target", "start", "end", "next_start")
           .agg(F.min(F.struct("et", "eepoch", "ereplica")).alias("e"))
           .select("run", "fault", "target", "start", "end", "next_start", F.col("e.et").alias("established_t"),
                   F.col("e.eepoch").alias("epoch"), F.col("e.ereplica").alias("leader"))
           .withColumn("ref", F.coalesce("established_t", "start")))
    # The first commit after each fault: an inner join with the few faults broadcast (Spark
    # cannot broadcast the kept side of an outer join), then back onto every fault, those
    # followed by no commit included. (fault, target, start) names a fault within its run.
    cm = commits.select(F.col("run").alias("crun"), "commit_t")
    firsts = (F.broadcast(est).join(cm, (F.col("run") == F.col("crun")) & (F.col("commit_t") >= F.col("ref"))
                                    & (F.col("next_start").isNull() | (F.col("commit_t") < F.col("next_start"))))
              .groupBy("run", "fault", "target", "start").agg(F.min("commit_t").alias("first_commit_t")))
    recovery = (est.join(firsts, ["run", "fault", "target", "start"], "left")
                .select("run", "fault", "target", "start", "end", "established_t", "epoch", "leader",
                        "first_commit_t")
                .select("*", (F.col("established_t") - F.col("start")).alias("to_established"),
                        (F.col("first_commit_t") - F.col("start")).alias("to_first_commit"))
                .orderBy("run", "start"))

    # replica lag
    firsts = deliveries.groupBy("run", "replica", "zxid").agg(F.min("t").alias("t"))
    lagged = (firsts.join(commits, ["run", "zxid"])
              .select("run", "replica", "zxid", "t", (F.col("t") - F.col("commit_t")).alias("lag")).persist())
    per_replica = lagged.groupBy("run", "replica").agg(
        F.count(F.lit(1)).alias("deliveries"), F.avg("lag").alias("mean_lag"),
        *_percentiles("lag", ("p50", "p99")),
        F.max("lag").alias("max_lag"), F.max("zxid").alias("last_zxid"))
    tops = per_replica.select(F.col("run").alias("trun"), F.col("replica").alias("treplica"), "last_zxid")
    behind = (F.broadcast(tops).join(commits, (F.col("run") == F.col("trun")) & (F.col("zxid") > F.col("last_zxid")))
              .groupBy(F.col("trun").alias("run"), F.col("treplica").alias("replica"))
              .agg(F.count(F.lit(1)).alias("behind")))
    replica_lag = (per_replica.join(behind, ["run", "replica"], "left").fillna(0, ["behind"])
                   .orderBy("run", "replica"))
    lag_over_time = (lagged.groupBy("run", "replica", idx("t").alias("k"))
                     .agg(F.avg("lag").alias("mean_lag"), F.max("lag").alias("max_lag"))
                     .select("run", "replica", (F.col("k") * b).alias("bucket_start"), "mean_lag", "max_lag")
                     .orderBy("run", "replica", "bucket_start"))

    leader_changes = (df.where((F.col("kind") == "established") & F.col("t").isNotNull())
                      .groupBy("run", "epoch").agg(F.min(F.struct("t", "replica", "zxid")).alias("e"))
                      .select("run", "epoch", F.col("e.t").alias("t"), F.col("e.replica").alias("leader"),
                              F.col("e.zxid").alias("zxid"))
                      .orderBy("run", "t"))
    timed = df.where(F.col("t").isNotNull())
    # Real runs stamp wall-clock seconds (~1.7e9), the simulator its tick count from 0 and names
    # its runs sim-SEED; both must hold, so a hand-made trace with small times is not "ticks".
    runs = (timed.groupBy("run")
            .agg(F.min(F.least("t", "invoke_t", "start")).alias("t0"), F.max("t").alias("t1"))
            .select("*", ((F.col("t0") < F.lit(1e8)) & F.col("run").startswith("sim-")).alias("simulated"))
            .orderBy("run"))
    uptime = (timed.where((F.col("replica") >= 0) & F.col("inc").isNotNull())
              .groupBy("run", "replica", "inc").agg(F.min("t").alias("start"), F.max("t").alias("end"))
              .orderBy("run", "replica", "inc"))
    return Figures(b, throughput, latency, latency_over_time, recovery, replica_lag, lag_over_time,
                   leader_changes, faults.drop("next_start").orderBy("run", "start"), runs, uptime,
                   (commits, lagged))


def collect(figs: Figures) -> dict[str, pd.DataFrame]:
    """Every figure frame as pandas (they are aggregates: buckets, op types, faults, replicas)."""
    import warnings

    with warnings.catch_warnings():  # PySpark's notes on pandas versions are not ours to act on
        warnings.simplefilter("ignore", FutureWarning)
        warnings.filterwarnings("ignore", message=".*copy keyword is deprecated")
        return {name: frame.toPandas() for name, frame in figs.frames().items()}


def write_figures(figs: Figures, out_dir: str | PathLike[str], *, png: bool = True) -> list[Path]:
    """Write every figure frame as ``<name>.parquet`` (one file each) and, if ``png``, plots:
    ``throughput.png``, ``latency.png``, ``lag.png``, ``recovery.png`` (suffixed ``-<run>``
    when there are several runs; see ``zabray.pipeline.plots``). Returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        tables = collect(figs)
    finally:
        figs.unpersist()
    written = []
    for name, table in tables.items():
        written.append(out / f"{name}.parquet")
        table.to_parquet(written[-1], index=False)
    if png:
        written += plot(tables, figs.bucket, out)
    return written
