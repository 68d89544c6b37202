"""Pieces of the pipeline that need no JVM: schema, files, settings, report, generator."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np
import pytest
from pipeline_cases import valid

from zabray.cli.check import register
from zabray.errors import ZabError
from zabray.pipeline import CheckReport, PropertyResult, TraceError, format_table, report_dict, trace_files
from zabray.pipeline.metrics import nice_bucket
from zabray.pipeline.spark_session import external_settings
from zabray.pipeline.synth import SynthSpec, generate, write_jsonl
from zabray.trace.records import SCHEMA


def test_spark_schema_mirrors_the_trace_schema():
    pytest.importorskip("pyspark")
    from zabray.pipeline import spark_schema

    schema = spark_schema()
    assert [f.name for f in schema.fields] == [c for c, _, _ in SCHEMA]
    types = {"int": "int", "long": "bigint", "double": "double", "string": "string"}
    assert [f.dataType.simpleString() for f in schema.fields] == [types[k] for _, k, _ in SCHEMA]


def test_trace_files_finds_jsonl_gz_and_parquet_and_explains_absence(tmp_path):
    with pytest.raises(TraceError, match="does not exist"):
        trace_files(tmp_path / "missing")
    (tmp_path / "r" / "trace").mkdir(parents=True)
    with pytest.raises(TraceError, match="no trace files"):
        trace_files(tmp_path / "r")
    for name in ("a.jsonl", "b.jsonl.gz", "c.parquet", "notes.txt"):
        (tmp_path / "r" / "trace" / name).write_bytes(b"")
    assert [p.name for p in trace_files(tmp_path / "r")] == ["a.jsonl", "b.jsonl.gz", "c.parquet"]
    assert issubclass(TraceError, ZabError)


@pytest.mark.parametrize(("span", "bucket"), [(0.0, 1.0), (8.1, 0.1), (120.0, 1.0), (121.0, 2.0), (3600, 50.0),
                                              (0.05, 0.0005)])
def test_nice_bucket(span, bucket):
    assert nice_bucket(span) == pytest.approx(bucket)


def test_external_settings_precedence(tmp_path, monkeypatch):
    (tmp_path / "spark-defaults.conf").write_text("# comment\nspark.master  yarn\nspark.driver.memory=1g\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    monkeypatch.delenv("SPARK_DRIVER_MEMORY", raising=False)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    assert external_settings() == {"spark.master": "yarn", "spark.driver.memory": "1g"}
    monkeypatch.setenv("SPARK_MASTER", "local[3]")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS",
                       "--driver-memory 5g --conf spark.sql.shuffle.partitions=7 pyspark-shell")
    assert external_settings() == {"spark.master": "local[3]", "spark.driver.memory": "5g",
                                   "spark.sql.shuffle.partitions": "7"}


def _report() -> CheckReport:
    bad = PropertyResult("agreement", "no skips", 2, {"zxid": "2:1", "text": "replica 3 skipped 1:24 " * 5})
    good = PropertyResult("integrity", "proposed", 0)
    return CheckReport((good, PropertyResult("agreement", "no skips", 2, bad.counterexample, {"r": bad})),
                       {"runs": {"r": 10}})


def test_table_and_json():
    report = _report()
    table = format_table(report)
    lines = table.splitlines()
    assert lines[0].split() == ["property", "verdict", "violations", "first", "counterexample"]
    assert lines[2].split()[:3] == ["integrity", "PASS", "0"]
    assert lines[3].split()[:4] == ["agreement", "FAIL", "2", "replica"]
    assert lines[-1] == "1 of 2 properties hold; 1 FAIL"
    doc = json.loads(json.dumps(report_dict(report, run_dir="x")))
    assert doc["ok"] is False and doc["run_dir"] == "x" and doc["trace_schema_version"] == 2
    assert [p["verdict"] for p in doc["properties"]] == ["PASS", "FAIL"]
    assert report.for_run("r")["agreement"].violations == 2
    assert report.for_run("r")["integrity"].holds
    with pytest.raises(KeyError):
        report.for_run("other")


def test_register_adds_the_check_subcommand():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["check", "a", "b", "--master", "local[4]", "--out", "o", "--no-figures"])
    assert (args.run_dirs, args.master, args.out, args.no_figures, args.bucket) == (["a", "b"], "local[4]", "o",
                                                                                    True, None)
    assert callable(args.func)


def test_importing_the_cli_does_not_import_pyspark():
    code = "import sys, zabray.cli.check, zabray.pipeline; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_synthetic_trace_shape():
    trace = valid()
    frames = trace.frames()
    meta = trace.meta
    assert meta["leaders"] == {1: 1, 2: 2, 3: 3} and meta["follower"] == 3
    assert sorted(frames) == ["client-1", "client-2", "client-3", "faults", "replica-1-inc0", "replica-1-inc1",
                              "replica-2-inc0", "replica-2-inc1", "replica-3-inc0", "replica-3-inc1"]
    for name, df in frames.items():
        if name.startswith("replica-"):
            d = df[df["kind"] == "deliver"]["zxid"].to_numpy(dtype=np.int64)
            assert (np.diff(d) > 0).all(), name  # each incarnation delivers in order
            assert df["t"].is_monotonic_increasing, name
    # Each epoch's leader proposes its n txns plus, except the last epoch, one nobody delivers.
    proposed = frames["replica-2-inc0"].query("kind == 'propose'")["zxid"]
    assert len(proposed) == 25 and int(proposed.iloc[-1]) == meta["lost"][2]
    assert [s["replica"] for s in meta["snapshots"]] == [2, 3]
    assert len(meta["zxids"]) == 72 and len(meta["commit_t"]) == 72


def test_generator_is_deterministic_and_writes_compact_json(tmp_path):
    spec = SynthSpec(replicas=5, epochs=4, txns_per_epoch=30, client_every=3, seed=3)
    a, b = generate(spec), generate(spec)
    assert a.rows() == b.rows()
    write_jsonl(a, tmp_path / "run", chunk_rows=7)
    first = json.loads((tmp_path / "run" / "trace" / "replica-2-inc0.jsonl").read_text().splitlines()[5])
    assert None not in first.values() and first["run"] == "synth"
    lines = sum(len(p.read_text().splitlines()) for p in (tmp_path / "run" / "trace").iterdir())
    assert lines == a.rows()
