"""The frames every safety check shares, derived once from a loaded trace and persisted
(``TraceFrames``), and the column expressions the checks build on (zxid epoch and counter,
"before" and "behind" in a writer's order). The trace contract they rely on is
``zabray.trace.records``'s; the checks themselves are in ``zabray.pipeline.checks``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from zabray.pipeline.errors import TraceError
from zabray.pipeline.loader import CORRUPT, POSITION, with_position
from zabray.trace.records import READABLE_VERSIONS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

#: Client ops that read; every other op is a write.
READ_OPS = frozenset({"read", "get", "exists", "children", "sync"})
KINDS = ("state", "established", "propose", "deliver", "snapshot", "client", "fault", "message")
#: Columns a row of each kind must have (beyond ``v`` and ``kind``).
REQUIRED: Mapping[str, tuple[str, ...]] = {
    "state": ("replica", "inc", "t", "state"),
    "established": ("replica", "inc", "t", "zxid"),
    "propose": ("replica", "inc", "t", "zxid", "digest"),
    "deliver": ("replica", "inc", "t", "zxid", "digest"),
    "snapshot": ("replica", "inc", "t", "zxid"),
    "client": ("session", "op", "invoke_t", "outcome"),
    "fault": ("fault", "start"),
    "message": ("replica", "inc", "t", "dir", "msg", "peer"),
}
_COUNTER_MASK = 0xFFFFFFFF


# --------------------------------------------------------------------------- helpers


def _F():  # the conventional alias of pyspark.sql.functions
    from pyspark.sql import functions as F

    return F


def _epoch(col: str | Column) -> Column:
    F = _F()
    return F.shiftright(F.col(col) if isinstance(col, str) else col, 32)


def _counter(col: str | Column) -> Column:
    F = _F()
    return (F.col(col) if isinstance(col, str) else col).bitwiseAND(F.lit(_COUNTER_MASK))


def _before(prefix: str) -> Column:
    """This row comes before the one whose columns carry ``prefix``: by ``t``, then position in
    the writer's output (lexicographic, without building a struct per row)."""
    F = _F()
    cols = ("t", *POSITION)
    out = F.col(cols[-1]) < F.col(prefix + cols[-1])
    for c in reversed(cols[:-1]):
        out = (F.col(c) < F.col(prefix + c)) | ((F.col(c) == F.col(prefix + c)) & out)
    return out


def _behind() -> Column:
    """A stream row at or below (a delivery) or below (a snapshot) the highest zxid before it."""
    F = _F()
    return F.col("hwm").isNotNull() & F.when(F.col("snap"), F.col("zxid") < F.col("hwm")).otherwise(
        F.col("zxid") <= F.col("hwm"))


# --------------------------------------------------------------------------- shared frames


class TraceFrames:
    """The frames the checks share, derived lazily from one trace DataFrame and persisted once.

    ``events``   every row, with position columns. Persisted packed: the columns of the bulk
                 kinds (deliver, propose) as they are, every other column in one struct that is
                 null on those rows, which halves the cost of caching (and a JSON trace is
                 parsed once).
    ``stream``   deliver and snapshot rows per (run, replica, inc), with ``hwm`` (the highest
                 zxid earlier in the writer's order) and ``sprev`` (the next lower zxid of the
                 same incarnation): the two windows every order check needs.
    ``delivered`` one row per delivered (run, zxid, digest) with the first delivery.
    ``history``  the distinct delivered zxids with ``gprev``, the previous one in zxid order.
    ``skips``    deliveries whose incarnation missed a txn someone delivered: ``gprev > prev``.
    Call :meth:`unpersist` when done.
    """

    _BULK = ("deliver", "propose")
    _COMMON = ("v", "run", "kind", "replica", "inc", "t", "epoch", "zxid", "digest", *POSITION)

    def __init__(self, df: DataFrame) -> None:
        F = _F()
        df = with_position(df)
        if CORRUPT not in df.columns:
            df = df.withColumn(CORRUPT, F.lit(None).cast("string"))
        rest = [c for c in df.columns if c not in self._COMMON]
        rare = F.col("kind").isNull() | ~F.col("kind").isin(*self._BULK)
        packed = df.select(*(F.coalesce("run", F.lit("")).alias("run") if c == "run" else c for c in self._COMMON),
                           F.when(rare, F.struct(*rest)).alias("_rest")).persist()
        self._persisted: list[DataFrame] = [packed]
        self.events: DataFrame = packed.select(*self._COMMON, "_rest.*")

    def _keep(self, df: DataFrame) -> DataFrame:
        df = df.persist()
        self._persisted.append(df)
        return df

    def unpersist(self) -> None:
        for df in self._persisted:
            df.unpersist()
        self._persisted.clear()

    def _kind(self, kind: str, *required: str) -> DataFrame:
        F = _F()
        cond = F.col("kind") == kind
        for c in required:
            cond = cond & F.col(c).isNotNull()
        return self.events.where(cond)

    def summary(self) -> dict[str, Any]:
        """Rows per kind and run, time span; raises ``TraceError`` if nothing can be judged."""
        F = _F()
        rows = (self.events.groupBy("run", "kind")
                .agg(F.count(F.lit(1)).alias("rows"),
                     F.count(CORRUPT).alias("corrupt"),
                     F.sum(F.when(F.col("v").isNotNull() & ~F.col("v").isin(*READABLE_VERSIONS), 1)
                           .otherwise(0)).alias("bad_version"),
                     F.max("v").alias("max_v"), F.min("t").alias("t_min"), F.max("t").alias("t_max"))
                .collect())
        total = sum(r["rows"] for r in rows)
        corrupt = sum(r["corrupt"] for r in rows)
        if total - corrupt == 0:
            raise TraceError("the trace has no rows" if total == 0
                             else f"none of the trace's {total} lines is valid JSON")
        bad = sum(r["bad_version"] for r in rows)
        if bad:
            v = max(r["max_v"] for r in rows if r["max_v"] is not None)
            raise TraceError(f"{bad} trace rows have schema version {v}; this checker reads "
                             f"versions {', '.join(map(str, READABLE_VERSIONS))}")
        by_kind: dict[str, int] = {}
        for r in rows:
            if r["kind"] is not None:
                by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + r["rows"]
        unknown = sorted(k for k in by_kind if k not in KINDS)
        if unknown:
            log.warning("ignoring rows of unknown kinds: %s", ", ".join(unknown))
        if corrupt:
            log.warning("%d trace lines are not valid JSON and were skipped", corrupt)
        ts = [x for r in rows for x in (r["t_min"], r["t_max"]) if x is not None]
        return {"rows": total, "rows_by_kind": dict(sorted(by_kind.items())),
                "corrupt_lines": corrupt, "unknown_kinds": unknown,
                "runs": {run: sum(r["rows"] for r in rows if r["run"] == run)
                         for run in sorted({r["run"] for r in rows})},
                "t_min": min(ts) if ts else None, "t_max": max(ts) if ts else None}

    @cached_property
    def stream(self) -> DataFrame:
        from pyspark.sql import Window

        F = _F()
        rows = (self.events.where(F.col("kind").isin("deliver", "snapshot")
                                  & F.col("zxid").isNotNull() & F.col("replica").isNotNull()
                                  & F.col("inc").isNotNull())
                .select("run", "replica", "inc", "t", *POSITION, "zxid", (F.col("kind") == "snapshot").alias("snap")))
        key = ("run", "replica", "inc")
        in_writer_order = Window.partitionBy(*key).orderBy(*POSITION)
        stream = self._keep(rows.select(
            "*",
            F.max("zxid").over(in_writer_order.rowsBetween(Window.unboundedPreceding, -1)).alias("hwm"),
            F.lag("zxid").over(in_writer_order).alias("sprev")))
        # In an incarnation that delivers in increasing order, the previous row in writer order
        # is also the next lower zxid. Only incarnations out of order (delivery_order fails) need
        # a second sort, by zxid, to get ``sprev`` right.
        disordered = stream.where(_behind()).select(*key).distinct()
        if not disordered.limit(1).count():
            return stream
        by_zxid = Window.partitionBy(*key).orderBy("zxid", "snap", *POSITION)
        fixed = (stream.join(F.broadcast(disordered), list(key)).drop("sprev")
                 .select("*", F.lag("zxid").over(by_zxid).alias("sprev")))
        merged = self._keep(stream.join(F.broadcast(disordered), list(key), "left_anti").unionByName(fixed))
        merged.count()  # materialize before dropping what it is computed from
        self._persisted.remove(stream)
        stream.unpersist()
        return merged

    @cached_property
    def delivered(self) -> DataFrame:
        F = _F()
        return self._keep(
            self._kind("deliver", "zxid", "digest", "replica", "inc")
            .groupBy("run", "zxid", "digest")
            .agg(F.count(F.lit(1)).alias("n"), F.min(F.struct("t", "replica", "inc")).alias("first"))
            .select("run", "zxid", "digest", "n", F.col("first.t").alias("first_t"),
                    F.col("first.replica").alias("first_replica"), F.col("first.inc").alias("first_inc")))

    @cached_property
    def history(self) -> DataFrame:
        from pyspark.sql import Window

        F = _F()
        g = self.delivered.select("run", "zxid").distinct()
        return self._keep(g.select("run", "zxid", F.lag("zxid").over(
            Window.partitionBy("run").orderBy("zxid")).alias("gprev")))

    @cached_property
    def skips(self) -> DataFrame:
        F = _F()
        # Only a delivery whose predecessor is not zxid - 1 can have a txn strictly in between:
        # the first of an incarnation, of an epoch, or after a snapshot. Few rows, so the join
        # with the history is small (and AQE broadcasts it).
        d = (self.stream.where(~F.col("snap") & (F.col("sprev").isNull() | (F.col("sprev") != F.col("zxid") - 1)))
             .select("run", "replica", "inc", "t", *POSITION, "zxid", F.coalesce("sprev", F.lit(0)).alias("prev")))
        return self._keep(d.join(self.history, ["run", "zxid"]).where(F.col("gprev") > F.col("prev")))

    @cached_property
    def proposals(self) -> DataFrame:
        return self._kind("propose", "zxid", "digest", "replica", "inc").select(
            "run", "replica", "inc", "t", *POSITION, "zxid", "digest")

    @cached_property
    def clients(self) -> DataFrame:
        F = _F()
        return self._kind("client", "session", "op", "outcome", "invoke_t").select(
            "run", "session", "op", "path", "invoke_t", "complete_t", "outcome", "zxid", "digest",
            *POSITION, (~F.lower("op").isin(*READ_OPS)).alias("is_write"))

    @cached_property
    def acked_writes(self) -> DataFrame:
        """Writes a client saw succeed, with the zxid they were given."""
        F = _F()
        return self.clients.where(F.col("is_write") & (F.col("outcome") == "ok") & F.col("zxid").isNotNull())
