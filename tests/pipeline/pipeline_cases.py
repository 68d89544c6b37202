"""A valid synthetic trace and mutations of it that each break one property (or a known few).

Each mutation takes the trace's files as DataFrames (``SynthTrace.frames()``) and its
``meta`` and returns mutated copies plus what a check must report. The trace (3 replicas,
3 epochs of 24 txns, every txn an acknowledged client write):

* epoch 1 led by replica 1 (crashes at its end; inc 1 redelivers from the start),
  epoch 2 by replica 2 (crashes at its end; inc 1 starts from a snapshot), epoch 3 by 3;
* replica 3 crashes in epoch 1 and comes back (inc 1) by a snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from zabray.pipeline.synth import SynthSpec, SynthTrace, digests, generate
from zabray.protocol.zxid import fmt

SPEC = SynthSpec(replicas=3, epochs=3, txns_per_epoch=24, sessions=3, reads_per_session=8, seed=7, run="valid")
Frames = dict[str, pd.DataFrame]


def z(epoch: int, counter: int) -> int:
    return (epoch << 32) | counter


def valid() -> SynthTrace:
    return generate(SPEC)


def _copy(frames: Frames) -> Frames:
    return {k: v.copy() for k, v in frames.items()}


def _at(df: pd.DataFrame, kind: str, zxid: int) -> int:
    """Index of the single ``kind`` row of ``zxid`` in a file."""
    hits = df.index[(df["kind"] == kind) & (df["zxid"] == zxid)]
    assert len(hits) == 1, (kind, fmt(zxid), len(hits))
    return int(hits[0])


def _insert(df: pd.DataFrame, after: int, row: dict[str, Any]) -> pd.DataFrame:
    """``df`` with ``row`` (same columns) placed right after position ``after``."""
    new = pd.DataFrame([row], columns=df.columns).astype(df.dtypes.to_dict())
    return pd.concat([df.iloc[: after + 1], new, df.iloc[after + 1:]], ignore_index=True)


def _forget_write(frames: Frames, zxid: int) -> None:
    """Make the client write of ``zxid`` one whose outcome the client never learned."""
    for name, df in frames.items():
        if name.startswith("client-"):
            hit = (df["zxid"] == zxid) & (df["digest"].notna())
            df.loc[hit, ["outcome"]] = "unknown"
            df.loc[hit, ["zxid", "digest"]] = None


@dataclass
class Case:
    """A mutated trace: the properties that must fail, and what each counterexample must say."""

    frames: Frames
    fails: set[str]
    expect: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Counterexample fields that name which replica did something first, by ``t``. In run rows
    # (``write_runs``) a run's txns share its first ``t``; a replica's run spans one loop turn,
    # but here it spans a whole epoch of the synthetic trace, which can reorder replicas.
    by_time: frozenset[str] = frozenset()


def swapped_deliveries(frames: Frames, meta: dict) -> Case:
    """Replica 2 delivers 1:6 before 1:5 (values swapped between two consecutive rows)."""
    f = _copy(frames)
    df = f["replica-2-inc0"]
    a, b = _at(df, "deliver", z(1, 5)), _at(df, "deliver", z(1, 6))
    df.loc[[a, b], ["zxid", "digest"]] = df.loc[[b, a], ["zxid", "digest"]].to_numpy()
    return Case(f, {"delivery_order"},
                {"delivery_order": {"replica": 2, "inc": 0, "zxid": "1:5", "hwm": "1:6"}})


def later_epoch_first(frames: Frames, meta: dict) -> Case:
    """Replica 3 (inc 1) delivers 2:1 before 1:24."""
    f = _copy(frames)
    df = f["replica-3-inc1"]
    a, b = _at(df, "deliver", z(1, 24)), _at(df, "deliver", z(2, 1))
    df.loc[[a, b], ["zxid", "epoch", "digest"]] = df.loc[[b, a], ["zxid", "epoch", "digest"]].to_numpy()
    expect = {"replica": 3, "inc": 1, "zxid": "1:24", "hwm": "2:1"}
    return Case(f, {"delivery_order", "global_primary_order"},
                {"delivery_order": expect, "global_primary_order": expect})


def lost_acked_write(frames: Frames, meta: dict) -> Case:
    """The client of epoch 1's unacknowledged last proposal (1:25) is told it succeeded."""
    f = _copy(frames)
    lost = meta["lost"][1]
    est2 = meta["established_t"][2]
    session = next(o["session"] for o in meta["lost_ops"] if o["epoch"] == 1)
    df = f[f"client-{session}"]
    hit = (df["path"] == f"/s{session}/lost") & (df["outcome"] == "unknown") & (df["invoke_t"] < est2)
    assert hit.sum() == 1
    df.loc[hit, ["outcome", "zxid", "digest"]] = ["ok", lost, digests(np.array([lost]))[0]]
    # Acknowledged after the new leader's first commit, so no read of the session looks older.
    df.loc[hit, "complete_t"] = est2 + 1.5 * SPEC.dt
    return Case(f, {"durability"}, {"durability": {"zxid": fmt(lost), "replica": None}})


def last_incarnation_misses_write(frames: Frames, meta: dict) -> Case:
    """Replica 1's last incarnation skips the acknowledged write 2:10 (others deliver it)."""
    f = _copy(frames)
    df = f["replica-1-inc1"]
    f["replica-1-inc1"] = df.drop(index=_at(df, "deliver", z(2, 10))).reset_index(drop=True)
    return Case(f, {"agreement", "local_primary_order", "durability"},
                {"durability": {"zxid": "2:10", "replica": 1, "inc": 1},
                 "agreement": {"replica": 1, "inc": 1, "zxid": "2:11", "gprev": "2:10"},
                 "local_primary_order": {"replica": 1, "inc": 1, "zxid": "2:11", "missing": "2:10"}})


def two_values(frames: Frames, meta: dict) -> Case:
    """Epoch 2's leader proposes 2:7 a second time with another value, which replica 3 delivers."""
    f = _copy(frames)
    other = "ffffffffffffffff"
    leader = f["replica-2-inc0"]
    i = _at(leader, "propose", z(2, 7))
    row = leader.loc[i].to_dict() | {"digest": other, "t": leader.loc[i, "t"] + 1e-4}
    f["replica-2-inc0"] = _insert(leader, i, row)
    r3 = f["replica-3-inc1"]
    r3.loc[_at(r3, "deliver", z(2, 7)), "digest"] = other
    return Case(f, {"uniqueness"}, {"uniqueness": {"zxid": "2:7"}})


def unproposed_delivery(frames: Frames, meta: dict) -> Case:
    """Replica 1 (inc 1) delivers 3:25, which nobody proposed, as its last txn."""
    f = _copy(frames)
    df = f["replica-1-inc1"]
    last = int(df.index[df["kind"] == "deliver"][-1])
    row = df.loc[last].to_dict() | {"zxid": z(3, 25), "t": df.loc[last, "t"] + 0.01, "digest": "0123456789abcdef"}
    f["replica-1-inc1"] = _insert(df, last, row)
    return Case(f, {"integrity"}, {"integrity": {"zxid": "3:25", "digest": "0123456789abcdef",
                                                 "first_replica": 1, "first_inc": 1}})


def gap_in_epoch(frames: Frames, meta: dict) -> Case:
    """Nobody delivers 2:5 (its proposal stays; its client never learns the outcome)."""
    f = _copy(frames)
    for name, df in f.items():
        if name.startswith("replica-"):
            f[name] = df[~((df["kind"] == "deliver") & (df["zxid"] == z(2, 5)))].reset_index(drop=True)
    _forget_write(f, z(2, 5))
    return Case(f, {"local_primary_order"},
                {"local_primary_order": {"replica": 2, "inc": 0, "zxid": "2:6", "missing": "2:5", "sprev": "2:4"}})


def skip_across_epochs(frames: Frames, meta: dict) -> Case:
    """Replica 1's redelivery (inc 1) leaves out 1:24, jumping from 1:23 to 2:1."""
    f = _copy(frames)
    df = f["replica-1-inc1"]
    f["replica-1-inc1"] = df.drop(index=_at(df, "deliver", z(1, 24))).reset_index(drop=True)
    _forget_write(f, z(1, 24))
    return Case(f, {"agreement"},
                {"agreement": {"replica": 1, "inc": 1, "zxid": "2:1", "prev": "1:23", "gprev": "1:24",
                               "skipped_by": 1}}, by_time=frozenset({"skipped_by"}))


def proposes_too_early(frames: Frames, meta: dict) -> Case:
    """Epoch 2's leader (replica 2) delivers 1:24 only after proposing 2:1."""
    f = _copy(frames)
    df = f["replica-2-inc0"]
    i = _at(df, "deliver", z(1, 24))
    row = df.loc[i].to_dict()
    df = df.drop(index=i).reset_index(drop=True)
    p = _at(df, "propose", z(2, 1))
    row["t"] = df.loc[p, "t"] + SPEC.dt / 4
    f["replica-2-inc0"] = _insert(df, p, row)
    return Case(f, {"primary_integrity"},
                {"primary_integrity": {"epoch": 2, "replica": 2, "inc": 0, "proposed": "2:1", "missing": "1:24",
                                       "covered": "1:23"}})


def two_leaders(frames: Frames, meta: dict) -> Case:
    """Replica 3 also proposes 2:3 (same value) in epoch 2."""
    f = _copy(frames)
    src = f["replica-2-inc0"]
    row = src.loc[_at(src, "propose", z(2, 3))].to_dict()
    df = f["replica-3-inc1"]
    at = int(df.index[(df["kind"] == "deliver") & (df["zxid"] == z(2, 2))][0])
    row |= {"src": "replica-3", "replica": 3, "inc": 1, "t": df.loc[at, "t"] + 1e-4}
    f["replica-3-inc1"] = _insert(df, at, row)
    return Case(f, {"primary_integrity"}, {"primary_integrity": {"epoch": 2, "leaders": 2, "missing": None}})


def _client_writes(frames: Frames) -> pd.DataFrame:
    rows = pd.concat([df.assign(_file=name) for name, df in frames.items() if name.startswith("client-")])
    return rows[(rows["outcome"] == "ok") & rows["digest"].notna()]


def session_out_of_order(frames: Frames, meta: dict) -> Case:
    """Session 1 pipelines two writes; the one issued first takes effect second."""
    f = _copy(frames)
    df = f["client-1"]
    w = df[(df["outcome"] == "ok") & df["digest"].notna()].sort_values("invoke_t")
    a, b = w.index[4], w.index[5]
    za, zb = int(df.loc[a, "zxid"]), int(df.loc[b, "zxid"])
    da, db = df.loc[a, "digest"], df.loc[b, "digest"]
    ca, cb = df.loc[a, "complete_t"], df.loc[b, "complete_t"]
    df.loc[a, ["zxid", "digest", "complete_t"]] = [zb, db, cb]
    df.loc[b, ["zxid", "digest", "complete_t"]] = [za, da, ca]
    df.loc[b, "invoke_t"] = df.loc[a, "invoke_t"] + 1e-5
    return Case(f, {"session_order"},
                {"session_order": {"session": 1, "zxid": fmt(za), "prior_zxid": fmt(zb)}})


def not_linearizable(frames: Frames, meta: dict) -> Case:
    """The write of 2:8 is invoked only after the write of 2:9 completed."""
    f = _copy(frames)
    w = _client_writes(f)
    a = w[w["zxid"] == z(2, 9)].iloc[0]
    b = w[w["zxid"] == z(2, 8)].iloc[0]
    df = f[b["_file"]]
    i = df.index[df["zxid"].eq(z(2, 8)) & df["digest"].notna()][0]
    df.loc[i, "invoke_t"] = a["complete_t"] + 1e-5
    df.loc[i, "complete_t"] = a["complete_t"] + 2e-5
    return Case(f, {"linearizable_writes"},
                {"linearizable_writes": {"zxid": "2:8", "prior_zxid": "2:9", "session": int(b["session"]),
                                         "prior_session": int(a["session"])}})


def read_goes_back(frames: Frames, meta: dict) -> Case:
    """Session 2's last read returns 1:1, older than what the session saw before."""
    f = _copy(frames)
    df = f["client-2"]
    reads = df[(df["outcome"] == "ok") & df["digest"].isna() & df["zxid"].notna()]
    i = reads["invoke_t"].idxmax()
    seen = df[(df["outcome"] == "ok") & df["zxid"].notna() & (df["complete_t"] < df.loc[i, "invoke_t"])]
    df.loc[i, "zxid"] = z(1, 1)
    return Case(f, {"monotonic_reads"},
                {"monotonic_reads": {"session": 2, "zxid": "1:1", "prior_zxid": fmt(int(seen["zxid"].max()))}})


def malformed_rows(frames: Frames, meta: dict) -> Case:
    """A state row without its state, a column the schema does not know (ignored)."""
    f = _copy(frames)
    df = f["replica-1-inc0"]
    i = int(df.index[df["kind"] == "state"][1])
    df.loc[i, "state"] = None
    df["comment"] = "extra column"
    return Case(f, {"well_formed"}, {"well_formed": {"kind": "state", "replica": 1, "problem": "missing state"}})


def write_runs(frames: Frames, run_dir: Path) -> None:
    """Write ``frames`` as a replica writes them: consecutive propose (or deliver) rows of one
    epoch become one run row with ``digests`` and the first row's ``t`` (``zabray.trace.records``)."""
    trace = run_dir / "trace"
    trace.mkdir(parents=True, exist_ok=True)
    for name, df in frames.items():
        rows = [{k: v for k, v in r.items() if v is not None}
                for r in map(json.loads, df.to_json(orient="records", lines=True, double_precision=15).splitlines())]
        out: list[dict[str, Any]] = []
        for r in rows:
            last = out[-1] if out else None
            if (last is not None and r["kind"] in ("propose", "deliver") and last["kind"] == r["kind"]
                    and last.get("epoch") == r.get("epoch") and "digest" in r
                    and r["zxid"] == last["zxid"] + len(last.get("digests", [last.get("digest")]))):
                last["digests"] = [*last.get("digests", [last.pop("digest", None)]), r["digest"]]
            else:
                out.append(r)
        (trace / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))


MUTATIONS: dict[str, Callable[[Frames, dict], Case]] = {
    f.__name__: f for f in (
        swapped_deliveries, later_epoch_first, lost_acked_write, last_incarnation_misses_write, two_values,
        unproposed_delivery, gap_in_epoch, skip_across_epochs, proposes_too_early, two_leaders,
        session_out_of_order, not_linearizable, read_goes_back, malformed_rows)
}
