"""Hand-made histories with known verdicts: the pure per-key search and the session checks."""

from __future__ import annotations

import random

from tests.histories.cases import H
from zabray.pipeline.linearizability import check_key, ops_of, search
from zabray.pipeline.session_guarantees import check_sessions, mark_sync_reads


def verdict(h: H, reads: str = "after-sync", budget: int = 200_000):  # type: ignore[no-untyped-def]
    return check_key(h.key, ops_of(mark_sync_reads(h.rows), reads=reads), budget=budget)


def labels(v) -> set[str]:  # type: ignore[no-untyped-def]
    return {op.label for op in v.culprits}


def test_concurrent_writes_and_synced_reads_are_linearizable() -> None:
    h = H()
    h.op("s0", "create", 0, 1, value="x", rv=0)
    h.op("s1", "write", 2, 6, value="a", rv=2)
    h.op("s2", "write", 3, 5, value="b", rv=1)
    h.op("s3", "sync", 4, 4.5)
    h.op("s3", "read", 4.6, 4.8, result="b", rv=1)  # b happened first, inside both intervals
    h.op("s4", "cas", 7, 8, version=2, value="c", rv=3)
    h.op("s2", "cas", 9, 10, outcome="fail", error="BAD_VERSION", version=2, value="d")
    h.op("s3", "sync", 11, 12)
    h.op("s3", "read", 12, 13, result="c", rv=3)
    assert verdict(h).verdict == "ok"


def test_unknown_write_may_take_effect_late_or_never() -> None:
    h = H()
    h.op("s0", "create", 0, 1, value="x", rv=0)
    h.op("s1", "write", 2, None, outcome="unknown", value="a", error="CONNECTION_LOSS")
    h.op("s2", "write", 3, 4, value="b")
    h.op("s3", "sync", 5, 6)
    h.op("s3", "read", 6, 7, result="a")  # the lost-connection write landed after b
    h.op("s3", "sync", 8, 9)
    h.op("s3", "read", 9, 10, result="a")
    assert verdict(h).verdict == "ok"
    h2 = H()
    h2.op("s0", "create", 0, 1, value="x", rv=0)
    h2.op("s1", "write", 2, None, outcome="unknown", value="a")
    h2.op("s3", "sync", 5, 6)
    h2.op("s3", "read", 6, 7, result="x", rv=0)  # ... or never
    assert verdict(h2).verdict == "ok"


def test_stale_read_after_a_newer_completed_write() -> None:
    h = H()
    h.op("s0", "create", 0, 1, value="x", rv=0)
    wa = h.op("s1", "write", 2, 3, value="a", rv=1)
    wb = h.op("s2", "write", 4, 5, value="b", rv=2)
    h.op("s3", "sync", 6, 7)
    r = h.op("s3", "read", 7, 8, result="a", rv=1)
    v = verdict(h)
    assert v.verdict == "violation"
    assert {wb, r} <= labels(v) and labels(v) <= {wa, wb, r, "c#0"}
    assert wb in v.timeline and r in v.timeline and "read -> 'a'" in v.timeline
    # Without the sync that read is allowed to be stale (ZooKeeper reads are local).
    h.rows[3]["kind"] = "read"
    h.rows[3]["outcome"] = "fail"
    assert verdict(h).verdict == "ok"
    assert verdict(h, reads="all").verdict == "violation"


def test_lost_update_is_caught() -> None:
    h = H()
    h.op("s0", "create", 0, 1, value="x", rv=0)
    w = h.op("s1", "write", 2, 3, value="a", rv=1)
    h.op("s2", "sync", 4, 5)
    r = h.op("s2", "read", 5, 6, result="x", rv=0)  # the acknowledged write is gone
    v = verdict(h)
    assert v.verdict == "violation" and {w, r} <= labels(v)


def test_two_successful_cas_from_one_version() -> None:
    h = H()
    h.op("s0", "create", 0, 1, value="x", rv=0)
    a = h.op("s1", "cas", 2, 5, version=0, value="a", rv=1)
    b = h.op("s2", "cas", 3, 6, version=0, value="b", rv=1)
    v = verdict(h)
    assert v.verdict == "violation" and {a, b} <= labels(v) and len(v.culprits) <= 3


def test_pipelined_session_writes_keep_issue_order() -> None:
    h = H()
    h.op("s0", "create", 0, 1, value="x", rv=0)
    h.op("s1", "write", 2, 10, value="a")
    h.op("s1", "write", 2.1, 10, value="b")  # issued after a by the same session, both in flight
    h.op("s2", "sync", 11, 12)
    h.op("s2", "read", 12, 13, result="a")
    assert verdict(h).verdict == "violation"
    h.rows[1]["session"] = "s9"  # two sessions: either order is fine
    assert verdict(h).verdict == "ok"


def test_budget_exceeded_is_unknown_not_a_guess() -> None:
    rng = random.Random(3)
    h = H()
    h.op("s0", "create", 0, 1, value="v", rv=0)
    for i in range(40):  # 40 overlapping blind writes, then a read of one of them
        h.op(f"s{i}", "write", 2 + rng.random(), 5 + rng.random(), value=f"w{i}")
    h.op("r", "sync", 7, 8)
    # (Once a read of a value nobody wrote, which the search now decides before it starts.)
    h.op("r", "read", 8, 9, result="w5")
    v = verdict(h, budget=20)  # placing 41 writes takes more than 20 steps
    assert v.verdict == "unknown" and "budget" in v.timeline


def test_shrunk_set_is_small_in_a_long_history() -> None:
    h = H()
    h.op("s0", "create", 0, 1, value="v0", rv=0)
    t = 2.0
    for i in range(1, 200):  # a long, sequential, correct prefix
        h.op(f"s{i % 5}", "write", t, t + 0.5, value=f"v{i}", rv=i)
        t += 1
    h.op("x", "cas", t, t + 1, version=150, value="bad", rv=151)  # from a version long gone
    v = verdict(h)
    assert v.verdict == "violation" and len(v.culprits) <= 3 and "c#200" in labels(v)


def test_search_steps_stay_small_on_a_sequential_history() -> None:
    h = H()
    h.op("s0", "create", 0, 1, value="v0", rv=0)
    for i in range(1, 500):
        h.op("s1", "cas", 2 * i, 2 * i + 1, version=i - 1, value=f"v{i}", rv=i)
    res = search(ops_of(h.rows))
    assert res.ok is True and res.steps < 5 * 500  # the cache keeps it linear


def test_read_going_back_in_time_after_a_move() -> None:
    h = H()
    h.op("w", "create", 0, 1, value="x", rv=0, zxid=10)
    h.op("w", "write", 2, 3, value="a", rv=1, zxid=20)
    seen = h.op("s", "read", 4, 5, result="a", rv=1, zxid=20)  # on replica 1
    back = h.op("s", "read", 6, 7, result="x", rv=0, zxid=10)  # moved to a lagging replica 2
    found = check_sessions(h.rows)
    assert [(f.prop, f.labels[:2]) for f in found] == [("stale-read", (seen, back))]
    assert "goes back in time" in found[0].timeline
    # Another session reading the old state is fine (it never saw the new one).
    h.rows[3]["session"] = "t"
    assert check_sessions(h.rows) == []


def test_stale_read_across_keys_and_fifo_of_writes() -> None:
    h = H()
    h.op("w", "create", 0, 1, value="x", rv=0, zxid=10, key="/b")
    h.op("w", "write", 2, 3, value="y", rv=1, zxid=30, key="/b")
    h.op("s", "read", 4, 5, result="a", zxid=40, key="/a")  # the session has seen zxid 40 ...
    r = h.op("s", "read", 6, 7, result="x", rv=0, zxid=10, key="/b")  # ... but /b changed at 30
    assert [f.prop for f in check_sessions(h.rows)] == ["stale-read"]
    h.rows[3]["zxid"] = 30
    h.rows[3]["result"] = "y"
    assert check_sessions(h.rows) == []
    w = h.op("s", "write", 8, 9, value="z", zxid=35, key="/b")  # committed below what it saw (40)
    fifo = [f for f in check_sessions(h.rows) if f.prop == "fifo"]
    assert len(fifo) == 1 and w in fifo[0].labels and r not in fifo[0].labels


def test_many_unobserved_unknown_writes_stay_cheap() -> None:
    h = H()
    h.op("s0", "create", 0, 1, value="v0", rv=0)
    for i in range(30):  # a long outage: 30 writes of unknown fate, none ever read back
        h.op(f"u{i}", "write", 2 + i * 0.01, None, outcome="unknown", value=f"lost{i}")
    t = 3.0
    for i in range(1, 40):
        h.op("s1", "sync", t, t + 0.1)
        h.op("s1", "read", t + 0.1, t + 0.2, result="v0" if i < 20 else "w", rv=None)
        t += 1
        if i == 19:
            h.op("s2", "write", t, t + 0.5, value="w")
            t += 1
    v = verdict(h, budget=20_000)
    assert v.verdict == "ok", v.timeline
    h.op("s1", "sync", t, t + 0.1)
    h.op("s1", "read", t + 0.1, t + 0.2, result="v0")  # back to a value overwritten for good
    assert verdict(h, budget=20_000).verdict == "violation"
