"""Check a run's traces for Zab's safety properties and compute its performance figures.

In a notebook::

    from zabray import pipeline
    spark = pipeline.get_session()               # local[2] unless configured otherwise
    df = pipeline.load(spark, "runs/r1")         # trace/*.jsonl -> DataFrame (zabray.trace.SCHEMA)
    report = pipeline.check(df)                  # CheckReport: one PropertyResult per property
    print(pipeline.format_table(report))
    figs = pipeline.figures(df)                  # Figures: small DataFrames
    pipeline.write_figures(figs, "runs/r1/analysis")
    h = pipeline.load_histories(spark, "runs/r1")  # client histories (zabray.client.histories)
    print(pipeline.format_history_report(pipeline.check_histories(h)))

No module of this package imports PySpark at import time (only when a function runs), so
``zabray.cli.check`` can be wired into the main CLI without slowing it down.
"""

from zabray.pipeline.checks import PROPERTIES, CheckReport, PropertyResult, check
from zabray.pipeline.errors import TraceError
from zabray.pipeline.frames import READ_OPS, TraceFrames
from zabray.pipeline.history_checks import (
    HistoryReport,
    check_histories,
    format_history_report,
    linearizability,
    load_histories,
    session_violations,
)
from zabray.pipeline.loader import load, spark_schema, trace_files
from zabray.pipeline.metrics import Figures, figures, write_figures
from zabray.pipeline.plots import compare, plot
from zabray.pipeline.report import format_table, report_dict, write_json
from zabray.pipeline.spark_session import get_session

__all__ = [
    "PROPERTIES", "READ_OPS", "CheckReport", "Figures", "HistoryReport", "PropertyResult", "TraceError",
    "TraceFrames", "check", "check_histories", "compare", "figures", "format_history_report", "format_table",
    "get_session", "linearizability", "load", "load_histories", "plot", "report_dict", "session_violations",
    "spark_schema",
    "trace_files", "write_figures", "write_json",
]
