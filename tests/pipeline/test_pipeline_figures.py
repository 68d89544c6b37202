"""Figures of a small hand-made trace equal values computed by hand.

The run (bucket 1.0):
  commits (first delivery of each zxid): 1:1 at 0.5, 1:2 at 1.2, 1:3 at 1.7, 1:4 at 3.1 (replica 1,
  leader of epoch 1), 2:1 at 5.5 and 2:2 at 8.25 (replica 2, leader of epoch 2 from 5.0);
  replica 2 delivers epoch 1's txns 0.5 after replica 1; replica 3 only 1:1 and 1:2, 0.25 late.
  faults: replica 1 crashes at 4.0 (two rows: when it starts and when it ends at 6.0);
  replica 3 crashes at 8.0 and stays down.
  clients: ten writes completing at 0.15*i with latency 0.1*i (i = 1..10), four reads at
  2.2..2.8 with latencies 0.2, 0.4, 0.6, 0.8; a failed write and an unknown one (ignored).
"""

from __future__ import annotations

import pandas as pd
import pytest

from zabray.pipeline import TraceFrames, compare, figures, load, write_figures
from zabray.pipeline.metrics import collect
from zabray.pipeline.synth import normalize, write_jsonl

pytestmark = pytest.mark.spark


def z(e: int, c: int) -> int:
    return (e << 32) | c


def rows() -> dict[str, pd.DataFrame]:
    def rep(r: int, inc: int = 0, **kw) -> dict:
        return {"v": 1, "run": "hand", "src": f"replica-{r}", "replica": r, "inc": inc, **kw}

    def deliver(r: int, t: float, zx: int) -> dict:
        return rep(r, t=t, kind="deliver", epoch=zx >> 32, zxid=zx, digest=f"{zx:016x}")

    r1 = [rep(1, t=0.2, kind="established", epoch=1, zxid=0)]
    r1 += [deliver(1, t, zx) for t, zx in ((0.5, z(1, 1)), (1.2, z(1, 2)), (1.7, z(1, 3)), (3.1, z(1, 4)))]
    r2 = [deliver(2, t + 0.5, zx) for t, zx in ((0.5, z(1, 1)), (1.2, z(1, 2)), (1.7, z(1, 3)), (3.1, z(1, 4)))]
    r2 += [rep(2, t=5.0, kind="established", epoch=2, zxid=z(1, 4)), deliver(2, 5.5, z(2, 1)), deliver(2, 8.25, z(2, 2))]
    r3 = [deliver(3, 0.75, z(1, 1)), deliver(3, 1.45, z(1, 2))]
    env = {"v": 1, "run": "hand", "replica": -1, "inc": 0}
    faults = [
        {**env, "src": "faults", "t": 4.0, "kind": "fault", "fault": "crash", "target": "1", "start": 4.0},
        {**env, "src": "faults", "t": 6.0, "kind": "fault", "fault": "crash", "target": "1", "start": 4.0, "end": 6.0},
        {**env, "src": "faults", "t": 8.0, "kind": "fault", "fault": "crash", "target": "3", "start": 8.0},
    ]
    ops = [{**env, "src": "client-1", "kind": "client", "session": 1, "op": "set", "outcome": "ok",
            "invoke_t": 0.05 * i, "complete_t": 0.15 * i, "t": 0.15 * i, "zxid": z(1, 1)} for i in range(1, 11)]
    ops += [{**env, "src": "client-1", "kind": "client", "session": 1, "op": "get", "outcome": "ok",
             "invoke_t": 2.0, "complete_t": 2.0 + 0.2 * i, "t": 2.0 + 0.2 * i, "zxid": z(1, 3)} for i in range(1, 5)]
    ops += [{**env, "src": "client-1", "kind": "client", "session": 1, "op": "set", "outcome": "failed",
             "invoke_t": 3.0, "complete_t": 3.5, "t": 3.5},
            {**env, "src": "client-1", "kind": "client", "session": 1, "op": "set", "outcome": "unknown",
             "invoke_t": 3.9, "t": 9.0}]
    files = {"replica-1-inc0": r1, "replica-2-inc0": r2, "replica-3-inc0": r3, "faults": faults, "client-1": ops}
    return {k: normalize(pd.DataFrame(v)) for k, v in files.items()}


@pytest.fixture(scope="module")
def hand(spark, tmp_path_factory):
    """The figures computed from persisted frames (as the CLI does), collected once."""
    run = write_jsonl(rows(), tmp_path_factory.mktemp("fig") / "hand")
    df = load(spark, run)
    frames = TraceFrames(df)
    figs = figures(frames, bucket=1.0)
    yield df, figs, collect(figs)
    frames.unpersist()


def test_throughput_buckets(hand):
    tp = hand[2]["throughput"]
    assert tp["bucket_start"].tolist() == [float(k) for k in range(9)]
    assert tp["commits"].tolist() == [1, 2, 0, 1, 0, 1, 0, 0, 1]
    assert tp["writes_ok"].tolist() == [6, 4, 0, 0, 0, 0, 0, 0, 0]
    assert tp["reads_ok"].tolist() == [0, 0, 4, 0, 0, 0, 0, 0, 0]
    assert tp["commits_per_t"].tolist() == [1.0, 2.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0]


def test_latency_percentiles(hand):
    lat = hand[2]["latency"].set_index("op")
    s, g = lat.loc["set"], lat.loc["get"]
    assert (s["cls"], s["count"], g["cls"], g["count"]) == ("write", 10, "read", 4)
    # Nearest rank: p50 of ten values is the 5th, p90 the 9th, p99 and p99.9 the 10th.
    assert [s[p] for p in ("p50", "p90", "p99", "p999", "max")] == pytest.approx([0.5, 0.9, 1.0, 1.0, 1.0])
    assert s["mean"] == pytest.approx(0.55)
    assert [g[p] for p in ("p50", "p90", "p99", "p999")] == pytest.approx([0.4, 0.8, 0.8, 0.8])


def test_recovery_after_faults(hand):
    rec = hand[2]["recovery"]
    assert rec["target"].tolist() == ["1", "3"]
    leader_crash, follower_crash = rec.iloc[0], rec.iloc[1]
    assert (leader_crash["end"], leader_crash["epoch"], leader_crash["leader"]) == (6.0, 2, 2)
    assert leader_crash["to_established"] == pytest.approx(1.0)
    assert leader_crash["to_first_commit"] == pytest.approx(1.5)
    assert pd.isna(follower_crash["end"]) and pd.isna(follower_crash["to_established"])
    assert follower_crash["to_first_commit"] == pytest.approx(0.25)


def test_replica_lag(hand):
    lag = hand[2]["replica_lag"].set_index("replica")
    assert lag["deliveries"].tolist() == [4, 6, 2]
    assert lag["behind"].tolist() == [2, 0, 4]
    assert lag["last_zxid"].tolist() == [z(1, 4), z(2, 2), z(1, 2)]
    assert lag.loc[1, "max_lag"] == 0.0
    assert [lag.loc[2, c] for c in ("mean_lag", "p50", "p99", "max_lag")] == pytest.approx([1 / 3, 0.5, 0.5, 0.5])
    assert [lag.loc[3, c] for c in ("mean_lag", "max_lag")] == pytest.approx([0.25, 0.25])


def test_leader_changes_faults_and_auto_bucket(hand):
    df, _, tables = hand
    lc = tables["leader_changes"]
    assert list(zip(lc["epoch"], lc["t"], lc["leader"], strict=True)) == [(1, 0.2, 1), (2, 5.0, 2)]
    faults = tables["faults"]
    assert faults["start"].tolist() == [4.0, 8.0] and faults["end"].iloc[0] == 6.0
    # Span 0.15 .. 8.25 in at most 120 buckets: 0.0675 rounds up to 0.1.
    assert figures(df).bucket == pytest.approx(0.1)


def test_write_figures_parquet_and_png(hand, tmp_path):
    written = write_figures(hand[1], tmp_path / "analysis")
    names = {p.name for p in written}
    assert {"throughput.parquet", "latency.parquet", "recovery.parquet", "replica_lag.parquet",
            "runs.parquet", "uptime.parquet", "throughput.png", "latency.png", "lag.png", "recovery.png"} <= names
    assert pd.read_parquet(tmp_path / "analysis" / "throughput.parquet")["commits"].sum() == 6
    for png in ("throughput.png", "latency.png", "lag.png", "recovery.png"):
        assert (tmp_path / "analysis" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    runs = pd.read_parquet(tmp_path / "analysis" / "runs.parquet")
    assert runs[["t0", "t1"]].values.tolist() == [[0.05, 9.0]] and not runs["simulated"].any()
    # Two analyses compared in one figure.
    write_figures(hand[1], tmp_path / "again")
    png = compare([tmp_path / "analysis", tmp_path / "again"], tmp_path / "compare.png", ["a", "b"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
