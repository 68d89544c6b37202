"""The history checks on Spark (local mode): keys in parallel, only counterexamples collected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.histories.cases import H
from zabray.cli.main import main

pytestmark = pytest.mark.spark


def mixed_history() -> tuple[H, dict[str, str]]:
    """Key /ok is fine, /lin has a stale read after a sync, session s moves and reads back in time on /mv."""
    h = H()
    h.op("a", "create", 0, 1, value="x", rv=0, zxid=1, key="/ok")
    h.op("b", "write", 2, 4, value="y", rv=1, zxid=3, key="/ok")
    h.op("a", "sync", 3, 5, zxid=4, key="/")
    h.op("a", "read", 5, 6, result="y", rv=1, zxid=3, key="/ok")
    # (Its own session: creates are FIFO-checked since schema 2, and session a synced at 0x4 first.)
    h.op("a0", "create", 0, 1, value="x", rv=0, zxid=2, key="/lin")
    w = h.op("b", "write", 7, 8, value="new", rv=1, zxid=5, key="/lin")
    h.op("c", "sync", 9, 10, zxid=6, key="/")
    r = h.op("c", "read", 10, 11, result="x", rv=0, zxid=2, key="/lin")
    h.op("w", "create", 0, 1, value="m0", rv=0, zxid=7, key="/mv")
    h.op("w", "write", 12, 13, value="m1", rv=1, zxid=8, key="/mv")
    seen = h.op("s", "read", 14, 15, result="m1", rv=1, zxid=8, key="/mv")
    back = h.op("s", "read", 16, 17, result="m0", rv=0, zxid=7, key="/mv")
    return h, {"w": w, "r": r, "seen": seen, "back": back}


def test_check_histories_finds_each_anomaly_on_its_key(spark) -> None:  # type: ignore[no-untyped-def]
    from zabray.pipeline.history_checks import (
        check_histories,
        format_history_report,
        from_rows,
        linearizability,
    )

    h, ids = mixed_history()
    df = from_rows(spark, h.rows)
    rep = check_histories(df)
    assert rep.keys == {"ok": 2, "violation": 1} and not rep.ok  # /ok and /mv pass
    [v] = rep.violations
    assert v["key"] == "/lin" and {ids["w"], ids["r"]} <= set(v["culprits"])
    # The read after c's sync is also behind what the sync itself showed c (zxid 6 > 5).
    stale = {tuple(s["ops"][:2]) for s in rep.session if s["property"] == "stale-read"}
    assert (ids["seen"], ids["back"]) in stale and len(rep.session) == 2
    text = format_history_report(rep)
    assert "FAIL" in text and ids["r"] in text and "back in time" in text
    # Every read linearizable (not ZooKeeper's promise) also flags /mv's stale read.
    verdicts = {r["key"]: r["verdict"] for r in linearizability(df, reads="all").collect()}
    assert verdicts["/mv"] == "violation" and verdicts["/ok"] == "ok"


def test_cli_exit_codes_and_report(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    h, ids = mixed_history()
    bad = tmp_path / "bad"
    (bad / "histories").mkdir(parents=True)
    (bad / "histories" / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in h.rows))
    good = tmp_path / "good"
    (good / "histories").mkdir(parents=True)
    ok_rows = [r for r in h.rows if r["key"] in ("/ok", "/")]
    (good / "histories" / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ok_rows))
    assert main(["check", "--histories", str(good)]) == 0
    assert main(["check", "--histories", str(bad)]) == 1
    doc = json.loads((bad / "analysis" / "histories.json").read_text())
    assert doc["ok"] is False and doc["violations"][0]["key"] == "/lin"
    assert main(["check", "--histories", str(tmp_path / "missing")]) == 2
    assert main(["check", "--histories", str(tmp_path)]) == 2  # no histories/ there
