"""The hand-written histories of ``handwritten.py``, each read from a file as the CLI reads it
and checked by every check (``history_local``, the Spark job's steps in memory); the Spark job
itself runs them all at once in tests/pipeline/test_histories_cases_spark.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.histories.handwritten import CASES, Case, outcome, write_run
from zabray.pipeline.history_io import read_local
from zabray.pipeline.history_local import check_rows

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_case(c: Case, tmp_path: Path) -> None:
    rows = read_local(write_run(tmp_path, c.text))
    assert len(rows) == len(c.text.splitlines())  # every line is a row: nothing skipped
    rep = check_rows(rows, reads=c.reads)
    lin, props = outcome(rep)
    assert {k: lin.get(k, "ok") for k in c.lin} == c.lin, [v["timeline"] for v in rep.violations]
    assert props == set(c.props), [v["detail"] for v in rep.session]
    for key, labels in c.culprits.items():
        [v] = [v for v in rep.violations if v["key"] == key]
        assert labels <= set(v["culprits"]), v["timeline"]
        # each culprit is named with its file and line, the times are the file's own
        assert all(src.startswith(f"{tmp_path}/histories/c.jsonl:") for src in v["sources"]), v["sources"]
    expected = "PASS" if not props and set(c.lin.values()) == {"ok"} else "FAIL"
    assert rep.verdict == expected


def test_nine_and_nine_is_decided_in_a_few_steps(tmp_path: Path) -> None:
    """The issue's 9+9 history ran past 200,000 steps and passed; now the read of a value nobody
    wrote is found before any search, and without it the search is a straight line."""
    by = {c.name: c for c in CASES}
    for name in ("nine-and-nine-and-nobody", "nine-and-nine"):
        rep = check_rows(read_local(write_run(tmp_path / name, by[name].text)), reads="all")
        steps = [v["steps"] for v in rep.violations]
        assert all(s < 100 for s in steps), steps


def sixteen(extra: list[str]) -> str:
    """16 concurrent writes of v0..v15 and 16 concurrent reads, read i returning v(15-i), all
    overlapping (every order of the writes is possible), after a create; plus ``extra`` lines."""
    lines = ['{"v":2,"client":"c","session":"s","op":0,"key":"/k","kind":"create","value":"x",'
             '"invoke_t":0,"complete_t":1,"outcome":"ok","result_version":0}']
    for i in range(16):
        lines.append(json.dumps({"v": 2, "client": "c", "session": f"w{i}", "op": 1 + i, "key": "/k", "kind": "write",
                                 "value": f"v{i}", "invoke_t": 2 + i / 100, "complete_t": 10 + i / 100,
                                 "outcome": "ok"}))
        lines.append(json.dumps({"v": 2, "client": "c", "session": f"r{i}", "op": 17 + i, "key": "/k", "kind": "read",
                                 "result": f"v{15 - i}", "invoke_t": 2.005 + i / 100, "complete_t": 10.005 + i / 100,
                                 "outcome": "ok"}))
    return "\n".join(lines + extra) + "\n"


def test_sixteen_and_sixteen(tmp_path: Path) -> None:
    """Linearizable (any order of the writes, each read right after its write): a straight run.
    Made impossible by two reads pinned to the same version with different values (v3 and v4
    cannot both be the third write), or by a cas from a version 16 writes never reach: decided,
    in steps far below the default budget (benchmarks/histories.py times them)."""
    ok = check_rows(read_local(write_run(tmp_path / "ok", sixteen([]))), reads="all")
    assert ok.verdict == "PASS" and ok.keys == {"ok": 1}
    same = ['{"v":2,"client":"c","session":"x","op":40,"key":"/k","kind":"read","result":"v3","result_version":3,'
            '"invoke_t":2,"complete_t":11,"outcome":"ok"}',
            '{"v":2,"client":"c","session":"y","op":41,"key":"/k","kind":"read","result":"v4","result_version":3,'
            '"invoke_t":2,"complete_t":11,"outcome":"ok"}']
    bad = check_rows(read_local(write_run(tmp_path / "same", sixteen(same))), reads="all")
    [v] = bad.violations
    assert {"c#40", "c#41"} <= set(v["culprits"]) and v["steps"] < 100_000
    far = ['{"v":2,"client":"c","session":"x","op":40,"key":"/k","kind":"cas","version":20,"value":"z",'
           '"invoke_t":2,"complete_t":11,"outcome":"ok","result_version":21}']
    bad = check_rows(read_local(write_run(tmp_path / "far", sixteen(far))), reads="all")
    [v] = bad.violations
    assert v["culprits"] == ["c#40"] and v["steps"] < 1_000


def test_budget_exceeded_is_unknown_and_names_the_key(tmp_path: Path) -> None:
    """Past its budget a key is UNKNOWN, never PASS, and the report line names it."""
    c = next(c for c in CASES if c.name == "overlapping-writes")
    rep = check_rows(read_local(write_run(tmp_path, c.text)), reads="all", budget=2)
    assert rep.verdict == "UNKNOWN" and rep.ok  # no violation found, yet not a pass
    [u] = rep.unknown
    assert u["key"] == "/k" and "UNKNOWN" in u["timeline"] and "/k" in u["timeline"]


def test_duplicate_labels_are_told_apart(tmp_path: Path) -> None:
    """Two files whose client is called the same (the same labels c#1, c#2): each culprit is
    shown with its file and line."""
    c = next(c for c in CASES if c.name == "double-cas")
    run = write_run(tmp_path, c.text, "c.jsonl")
    (run / "histories" / "c-again.jsonl").write_text(c.text.replace('"/k"', '"/j"').replace('"session":"s', '"session":"t'))
    rep = check_rows(read_local(run))
    texts = "\n".join(v["timeline"] for v in rep.violations)
    assert "c#1 (" + str(run / "histories" / "c.jsonl") + ":2)" in texts
    assert "c#1 (" + str(run / "histories" / "c-again.jsonl") + ":2)" in texts


def test_a_read_after_sync_shows_its_own_interval(tmp_path: Path) -> None:
    c = next(c for c in CASES if c.name == "stale-read-after-sync")
    rep = check_rows(read_local(write_run(tmp_path, c.text)))
    [v] = rep.violations
    line = next(x for x in v["timeline"].splitlines() if "c#3" in x)
    assert "5.000000 .. 6.000000" in line and "after its sync, invoked 4.000000" in line
