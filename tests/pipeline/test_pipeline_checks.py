"""Each property on a valid trace (all hold) and on mutations that break it.

All variants are judged in one Spark pass: each is written as its own run directory, the
directories are loaded together, and ``CheckReport.for_run`` gives each run's verdicts.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from pipeline_cases import MUTATIONS, SPEC, Case, valid, write_runs, z

from zabray.pipeline import PROPERTIES, check, load
from zabray.pipeline.synth import generate, normalize, write_jsonl, write_parquet

pytestmark = pytest.mark.spark

VALID_RUNS = ("valid", "valid_parquet", "valid_frames", "valid_runs")
# Each mutation is judged twice: as rows, and packed into run rows as a loaded replica writes
# them. The loader expands run rows, so both must get the same verdicts.
JUDGED = [*MUTATIONS, *(f"{m}_runs" for m in MUTATIONS)]
TRUNCATED = '{"v":1,"run":null,"kind":"deliver","zxid":42949'


@pytest.fixture(scope="module")
def judged(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    trace = valid()
    frames = trace.frames()
    write_jsonl(trace, base / "valid")  # compact rows: only each kind's columns
    write_parquet(generate(replace(SPEC, run="valid_parquet")), base / "valid_parquet")
    # Every column on every row (nulls spelled out), no run id: the loader names it after its dir.
    write_jsonl({k: v.assign(run=None) for k, v in frames.items()}, base / "valid_frames")
    write_runs({k: v.assign(run=None) for k, v in frames.items()}, base / "valid_runs")
    cases: dict[str, Case] = {}
    for name, mutate in MUTATIONS.items():
        case = mutate(frames, trace.meta)
        write_jsonl({k: v.assign(run=None) for k, v in case.frames.items()}, base / name)
        write_runs({k: v.assign(run=None) for k, v in case.frames.items()}, base / f"{name}_runs")
        cases[name] = cases[f"{name}_runs"] = case
    for name in ("malformed_rows", "malformed_rows_runs"):
        with open(base / name / "trace" / "replica-2-inc0.jsonl", "a") as fh:
            fh.write(TRUNCATED)  # a writer that crashed mid-line
    report = check(load(spark, *sorted(base.iterdir())))
    return report, cases


@pytest.mark.parametrize("run", VALID_RUNS)
def test_valid_trace_holds_every_property(judged, run):
    report, _ = judged
    rep = report.for_run(run)
    assert [r.name for r in rep.results] == list(PROPERTIES)
    assert rep.ok, [(r.name, r.counterexample) for r in rep.failed]


def test_summary_counts_rows_and_skips_a_truncated_line(judged):
    report, _ = judged
    assert set(report.summary["runs"]) == {*VALID_RUNS, *JUDGED}
    assert report.summary["corrupt_lines"] == 2
    assert report.summary["unknown_kinds"] == []
    kinds = report.summary["rows_by_kind"]
    assert {"deliver", "propose", "snapshot", "client", "fault", "state", "established"} <= set(kinds)


@pytest.mark.parametrize("name", JUDGED)
def test_mutation_fails_its_property_with_the_right_counterexample(judged, name):
    report, cases = judged
    case = cases[name]
    rep = report.for_run(name)
    assert {r.name for r in rep.failed} == case.fails, [(r.name, r.counterexample) for r in rep.failed]
    for prop, expected in case.expect.items():
        ce = rep[prop].counterexample
        assert ce is not None and ce["text"], prop
        keep = [k for k in expected if not (name.endswith("_runs") and k in case.by_time)]
        assert {k: ce.get(k) for k in keep} == {k: expected[k] for k in keep}, ce["text"]


def test_counts_and_by_run(judged):
    report, cases = judged
    # Nobody delivers 2:5: each incarnation that delivers 2:6 has a gap: replica 2's first,
    # replica 3's second, and replica 1's second (its first crashed at the end of epoch 1).
    assert report.for_run("gap_in_epoch")["local_primary_order"].violations == 3
    assert report["delivery_order"].by_run.keys() == {"swapped_deliveries", "later_epoch_first",
                                                      "swapped_deliveries_runs", "later_epoch_first_runs"}
    assert report["delivery_order"].violations == 4
    assert report.for_run("swapped_deliveries")["delivery_order"].verdict == "FAIL"
    assert report.for_run("valid")["delivery_order"].verdict == "PASS"


def test_run_rows_load_as_the_rows_they_stand_for(spark, tmp_path):
    """The loader expands a run row in place: the same rows, in the same order in each file."""
    from zabray.pipeline.loader import POSITION

    frames = valid().frames()
    write_jsonl(frames, tmp_path / "rows")
    write_runs(frames, tmp_path / "runs")
    lines = (tmp_path / "runs" / "trace" / "replica-2-inc0.jsonl").read_text().splitlines()
    assert len(lines) < len(frames["replica-2-inc0"]) and any('"digests"' in x for x in lines)

    def rows(d):  # file by file (_file hashes the path, so its order differs between dirs)
        df = load(spark, d).drop("t", "run").orderBy("src", "inc", *POSITION).drop(*POSITION)
        return [r.asDict() for r in df.collect()]

    assert rows(tmp_path / "runs") == rows(tmp_path / "rows")


def test_single_check_on_a_hand_built_dataframe(spark):
    """A DataFrame made without ``load`` (no position columns): rows keep the DataFrame's order."""
    from zabray.pipeline import spark_schema
    from zabray.pipeline.checks import check_agreement, check_delivery_order

    rows = [
        {"v": 1, "run": "r", "replica": 1, "inc": 0, "t": 1.0, "kind": "deliver", "zxid": z(1, 1), "digest": "a"},
        {"v": 1, "run": "r", "replica": 1, "inc": 0, "t": 1.0, "kind": "deliver", "zxid": z(1, 3), "digest": "c"},
        {"v": 1, "run": "r", "replica": 1, "inc": 0, "t": 1.0, "kind": "deliver", "zxid": z(1, 2), "digest": "b"},
        {"v": 1, "run": "r", "replica": 2, "inc": 0, "t": 2.0, "kind": "snapshot", "zxid": z(1, 2)},
        {"v": 1, "run": "r", "replica": 2, "inc": 0, "t": 2.0, "kind": "deliver", "zxid": z(1, 3), "digest": "c"},
    ]
    pdf = normalize(__import__("pandas").DataFrame(rows))
    df = spark.createDataFrame([tuple(r) for r in pdf.astype(object).where(pdf.notna(), None).itertuples(index=False)],
                               schema=spark_schema()).coalesce(1)
    order = check_delivery_order(df)
    assert order.violations == 1
    assert order.counterexample["zxid"] == "1:2" and order.counterexample["hwm"] == "1:3"
    assert check_agreement(df).holds  # replica 2's snapshot covers 1:1 and 1:2
