"""The hand-written histories (tests/histories/handwritten.py) on Spark, as ``zabray check
--histories`` runs them: every case at once in one run directory (a file and a client per case),
each case's verdicts the ones reasoned on paper; and the exit codes of the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.histories.handwritten import CASES, write_run
from zabray.cli.main import main

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]


def one_run(root: Path, reads: str) -> Path:
    """The cases checked with ``reads`` in one run directory: case NAME's file is NAME.jsonl, its
    client NAME, its keys under /NAME (so no two cases share a key, a session or a label)."""
    (root / "histories").mkdir(parents=True)
    for c in CASES:
        if c.reads != reads:
            continue
        rows = [json.loads(line) for line in c.text.splitlines()]
        for r in rows:
            r["client"] = c.name
            r["key"] = f"/{c.name}{r['key']}"
        (root / "histories" / f"{c.name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.mark.parametrize("reads", ["after-sync", "all"])
def test_every_case_on_spark(spark, tmp_path: Path, reads: str) -> None:  # type: ignore[no-untyped-def]
    from zabray.pipeline.history_checks import check_histories, load_histories

    rep = check_histories(load_histories(spark, one_run(tmp_path, reads)), reads=reads)
    lin: dict[str, str] = {}
    for v in rep.violations + rep.unknown:
        lin[v["key"]] = v["verdict"]
        assert all(s.endswith(tuple(f".jsonl:{n}" for n in range(1, 40))) for s in v["sources"]), v["sources"]
    props: dict[str, set[str]] = {}
    for v in rep.session:
        props.setdefault(v["ops"][0].split("#")[0], set()).add(v["property"])
    cases = [c for c in CASES if c.reads == reads]
    assert rep.keys.get("unknown", 0) == 0
    for c in cases:
        got = {k: lin.get(f"/{c.name}{k}", "ok") for k in c.lin}
        assert (got, props.get(c.name, set())) == (c.lin, set(c.props)), c.name
    assert rep.ops == sum(len(c.text.splitlines()) for c in cases)


GOOD = '{"v":2,"client":"c","session":"s","op":0,"key":"/k","kind":"create","value":"x","invoke_t":0,"complete_t":1,"outcome":"ok"}\n'


def test_cli_exit_codes(spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    by = {c.name: c for c in CASES}
    # A violation only in files whose names Spark's readers would skip: found, exit 1.
    hidden = write_run(tmp_path / "hidden", GOOD, "plain.jsonl")
    (hidden / "histories" / "_under.jsonl").write_text(
        by["double-cas"].text.replace('"client":"c"', '"client":"u"').replace('"/k"', '"/u"'))
    (hidden / "histories" / ".dot.jsonl").write_text(by["multi-fractured-read"].text.replace('"client":"c"',
                                                                                           '"client":"d"'))
    assert main(["check", "--histories", str(hidden)]) == 1
    out = capsys.readouterr().out
    assert "3 history files" in out and "_under.jsonl:2" in out and "u#1" in out and "no read back in time" in out
    doc = json.loads((hidden / "analysis" / "histories.json").read_text())
    assert doc["verdict"] == "FAIL" and doc["ops"] == 1 + 3 + 6

    # Bad input: exit 2, one line naming the file, the line and the field; no report written.
    bad = write_run(tmp_path / "bad", GOOD + GOOD.replace('"op":0', '"op":1').replace('"ok"', '"maybe"'))
    assert main(["check", "--histories", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}/histories/c.jsonl:2: field 'outcome': 'maybe'" in err and "Traceback" not in err
    assert not (bad / "analysis" / "histories.json").exists()
    truncated = write_run(tmp_path / "truncated", GOOD + GOOD[:40])
    assert main(["check", "--histories", str(truncated)]) == 2
    assert f"{truncated}/histories/c.jsonl:2: not JSON" in capsys.readouterr().err
    empty = write_run(tmp_path / "empty", "")
    assert main(["check", "--histories", str(empty)]) == 2
    assert "checked nothing" in capsys.readouterr().err

    # Past its budget a key is UNKNOWN: exit 3, and the key is named. Never PASS.
    undecided = write_run(tmp_path / "undecided", by["overlapping-writes"].text)
    assert main(["check", "--histories", str(undecided), "--reads", "all", "--budget", "2"]) == 3
    out = capsys.readouterr().out
    assert "verdict: UNKNOWN" in out and "key /k: UNKNOWN" in out
    assert json.loads((undecided / "analysis" / "histories.json").read_text())["verdict"] == "UNKNOWN"
    # Several runs: the worst counts, bad input above a violation above undecided.
    assert main(["check", "--histories", str(undecided), str(hidden), "--reads", "all", "--budget", "2"]) == 1
    assert main(["check", "--histories", str(undecided), str(bad), "--budget", "2", "--reads", "all"]) == 2
    capsys.readouterr()
