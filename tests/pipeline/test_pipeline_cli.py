"""``zabray check`` end to end: exit 0 on a good run, 1 on a bad one, 2 on bad input."""

from __future__ import annotations

import argparse
import json

import pytest
from pipeline_cases import MUTATIONS, valid

from zabray.cli.check import register
from zabray.cli.spark import EXIT_BAD_INPUT, EXIT_OK, EXIT_VIOLATION
from zabray.pipeline.synth import write_jsonl


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="zabray")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check", *argv])
    return args.func(args)


def test_missing_dir_exits_2_before_starting_spark(tmp_path, capsys):
    assert run(str(tmp_path / "nope")) == EXIT_BAD_INPUT
    assert "does not exist" in capsys.readouterr().err


def test_dir_without_trace_files_exits_2(tmp_path, capsys):
    (tmp_path / "run" / "trace").mkdir(parents=True)
    assert run(str(tmp_path / "run")) == EXIT_BAD_INPUT
    assert "no trace files" in capsys.readouterr().err
    (tmp_path / "other").mkdir()
    assert run(str(tmp_path / "other")) == EXIT_BAD_INPUT
    assert "no trace/ directory" in capsys.readouterr().err


def test_bad_options_exit_2_in_one_line_before_starting_spark(tmp_path, capsys):
    # A negative --bucket was a ValueError traceback after Spark had read the traces, and an
    # --out that cannot be made a FileNotFoundError.
    run_dir = write_jsonl(valid(), tmp_path / "run")
    (run_dir / "histories").mkdir()
    (run_dir / "histories" / "client.jsonl").write_text("{}\n")
    (tmp_path / "file").write_text("")
    for argv, message in [(["--bucket", "-1"], "--bucket must be a positive number of seconds, got -1"),
                          (["--out", str(tmp_path / "file" / "out")], "cannot create the output directory"),
                          (["--histories", "--out", str(tmp_path / "file" / "out")], "cannot create the output"),
                          (["--histories", "--budget", "0"], "--budget must be a positive number of search steps")]:
        assert run(str(run_dir), *argv) == EXIT_BAD_INPUT
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"zabray check: {message}") and "\n" not in err, (argv, err)


@pytest.mark.spark
def test_a_master_spark_cannot_start_is_one_line(tmp_path):
    # Its own process: in this one, another test's SparkSession may be active, and getOrCreate
    # would hand that back whatever the master asked for.
    import subprocess
    import sys

    run_dir = write_jsonl(valid(), tmp_path / "run")
    p = subprocess.run([sys.executable, "-m", "zabray.cli.main", "check", str(run_dir), "--master", "bogus://nowhere",
                        "--no-figures"], capture_output=True, text=True, timeout=120)
    err = p.stderr.strip().splitlines()
    assert p.returncode == EXIT_BAD_INPUT, p.stderr
    assert err[-1].startswith("zabray check: cannot start Spark (master bogus://nowhere): "), err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("cli")
    trace = valid()
    good = write_jsonl(trace, base / "good")
    case = MUTATIONS["swapped_deliveries"](trace.frames(), trace.meta)
    bad = write_jsonl(case.frames, base / "bad")
    return good, bad


@pytest.mark.spark
def test_good_run_exits_0_with_report_and_figures(spark, runs, capsys):
    good, _ = runs
    assert run(str(good)) == EXIT_OK
    out = capsys.readouterr().out
    assert "12 of 12 properties hold" in out and "delivery_order" in out
    report = json.loads((good / "analysis" / "check.json").read_text())
    assert report["ok"] is True and report["trace_files"] == 10
    assert {p["verdict"] for p in report["properties"]} == {"PASS"}
    for name in ("throughput.png", "latency.png", "lag.png", "throughput.parquet", "recovery.parquet"):
        assert (good / "analysis" / name).is_file(), name


@pytest.mark.spark
def test_good_and_bad_runs_exit_1_with_a_report_each(spark, runs, tmp_path, capsys):
    good, bad = runs
    assert run(str(good), str(bad), "--out", str(tmp_path), "--no-figures") == EXIT_VIOLATION
    assert "FAIL" in capsys.readouterr().out
    assert json.loads((tmp_path / "good" / "check.json").read_text())["ok"] is True
    report = json.loads((tmp_path / "bad" / "check.json").read_text())
    assert report["ok"] is False and report["figures"] == []
    failed = {p["name"]: p for p in report["properties"] if p["verdict"] == "FAIL"}
    assert list(failed) == ["delivery_order"]
    assert failed["delivery_order"]["counterexample"]["zxid"] == "1:5"
    assert not (tmp_path / "bad" / "throughput.png").exists()


@pytest.mark.spark
def test_other_schema_version_exits_2(spark, tmp_path, capsys):
    (tmp_path / "v3" / "trace").mkdir(parents=True)
    (tmp_path / "v3" / "trace" / "sim.jsonl").write_text(
        '{"v":3,"run":"x","kind":"deliver","replica":1,"inc":0,"t":1.0,"zxid":4294967297,"digest":"ab"}\n')
    assert run(str(tmp_path / "v3"), "--no-figures") == EXIT_BAD_INPUT
    assert "schema version 3" in capsys.readouterr().err
