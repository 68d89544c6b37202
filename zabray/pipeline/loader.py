"""Read run directories into one DataFrame with the trace schema (``zabray.trace.SCHEMA``).

A run directory holds ``trace/*.jsonl`` (optionally gzipped) and/or ``trace/*.parquet`` — the
latter for traces too large to keep as JSON (the benchmark writes them); both carry the same
columns. Columns not in the schema are ignored, columns a row lacks are null, a line that is
not valid JSON becomes a row whose only non-null column is ``_corrupt``.

Run rows (``zabray.trace.records``: one propose or deliver row with ``digests`` for consecutive zxids)
are expanded here, so the DataFrame has one row per txn, as if the writer had written them.

Besides the schema columns the DataFrame has four position columns, ``_file`` (a 64-bit hash
of the file's path: cheaper to shuffle and sort than the path), ``_block`` (byte offset of the
file split), ``_row`` (a counter that grows within a split) and ``_sub`` (the index within an
expanded run row, else 0): ordered by them, a file's rows come back in the order they were
written. The checks need this because ``t``
cannot order rows on its own (simulated ticks tie; wall clocks step).
"""

from __future__ import annotations

import logging
from functools import reduce
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

from zabray.pipeline.errors import TraceError
from zabray.trace.records import RUN_DIGESTS, SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

TRACE_DIR = "trace"
JSON_PATTERNS = ("*.jsonl", "*.jsonl.gz")
PARQUET_PATTERNS = ("*.parquet",)
CORRUPT = "_corrupt"
POSITION = ("_file", "_block", "_row", "_sub")


def spark_schema() -> StructType:
    """``zabray.trace.SCHEMA`` as a Spark ``StructType`` (all columns nullable)."""
    from pyspark.sql import types as T

    types = {"int": T.IntegerType(), "long": T.LongType(), "double": T.DoubleType(),
             "string": T.StringType()}
    return T.StructType([T.StructField(name, types[kind], True) for name, kind, _ in SCHEMA])


def trace_files(run_dir: str | PathLike[str]) -> list[Path]:
    """The trace files of one run directory, sorted; ``TraceError`` if there are none."""
    run = Path(run_dir)
    if not run.is_dir():
        raise TraceError(f"run directory {run} does not exist" if not run.exists()
                         else f"{run} is not a directory")
    trace = run / TRACE_DIR
    if not trace.is_dir():
        raise TraceError(f"{run} has no {TRACE_DIR}/ directory (is it a run directory?)")
    files = sorted({p for pat in JSON_PATTERNS + PARQUET_PATTERNS for p in trace.glob(pat) if p.is_file()})
    if not files:
        raise TraceError(f"no trace files ({', '.join(JSON_PATTERNS + PARQUET_PATTERNS)}) in {trace}")
    return files


def _positioned(df: DataFrame) -> DataFrame:
    """Add the position columns, and name rows without ``run`` after their run directory. Must
    sit directly on a file scan: ``_row`` counts the rows of each split in read order, which only
    holds before any shuffle, and the file's path is only known there."""
    from pyspark.sql import functions as F

    path = F.col("_metadata.file_path")
    dir_name = F.regexp_extract(path, rf"([^/]+)/{TRACE_DIR}/[^/]+$", 1)
    run = F.when(F.col("run").isNull() | (F.col("run") == ""), dir_name).otherwise(F.col("run"))
    return df.select(*(run.alias("run") if c == "run" else F.col(c) for c in df.columns),
                     F.xxhash64(path).alias("_file"),
                     F.col("_metadata.file_block_start").alias("_block"),
                     F.monotonically_increasing_id().alias("_row"))


def _expanded(df: DataFrame) -> DataFrame:
    """One row per txn of each run row (``zabray.trace.expand``), ``_sub`` its index in the run;
    every other row once, with ``_sub`` 0. The run row's columns drop ``digests``."""
    from pyspark.sql import functions as F

    out = df.select("*", F.posexplode_outer(RUN_DIGESTS).alias("_sub", "_d"))
    in_run = F.col("_d").isNotNull()
    cols = []
    for c in df.columns:
        if c == "zxid":
            cols.append(F.when(in_run, F.col("zxid") + F.col("_sub")).otherwise(F.col("zxid")).alias("zxid"))
        elif c == "digest":
            cols.append(F.when(in_run, F.col("_d")).otherwise(F.col("digest")).alias("digest"))
        elif c != RUN_DIGESTS:
            cols.append(F.col(c))
    return out.select(*cols, F.coalesce(F.col("_sub"), F.lit(0)).alias("_sub"))


def load(spark: SparkSession, *run_dirs: str | PathLike[str]) -> DataFrame:
    """One DataFrame of every row of the given run directories (lazy: no Spark job runs).

    A row without ``run`` gets the name of its run directory, so rows of different runs are
    never mixed by the checks, which group by ``run``.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not run_dirs:
        raise TraceError("no run directory given")
    files = [f for d in run_dirs for f in trace_files(d)]
    json_files = [str(f) for f in files if not f.name.endswith(".parquet")]
    parquet_files = [str(f) for f in files if f.name.endswith(".parquet")]
    log.info("loading %d JSON and %d Parquet trace files", len(json_files), len(parquet_files))
    schema = spark_schema()
    frames = []
    if json_files:
        with_corrupt = T.StructType([*schema.fields, T.StructField(RUN_DIGESTS, T.ArrayType(T.StringType()), True),
                                     T.StructField(CORRUPT, T.StringType(), True)])
        frames.append(_expanded(_positioned(
            spark.read.schema(with_corrupt).option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT).json(json_files))))
    if parquet_files:
        frames.append(_positioned(spark.read.schema(schema).parquet(*parquet_files))
                      .withColumn("_sub", F.lit(0)).withColumn(CORRUPT, F.lit(None).cast("string")))
    return reduce(lambda a, b: a.unionByName(b), frames)


def with_position(df: DataFrame) -> DataFrame:
    """``df`` with the position columns, adding them if it lacks them (a DataFrame built by hand):
    then each writer's rows are taken in the DataFrame's current order."""
    from pyspark.sql import functions as F

    if all(c in df.columns for c in POSITION):
        return df
    return df.select("*", F.lit(0).cast("long").alias("_file"), F.lit(0).cast("long").alias("_block"),
                     F.monotonically_increasing_id().alias("_row"), F.lit(0).alias("_sub"))
