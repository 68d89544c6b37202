"""Synthetic traces of a valid multi-epoch Zab run, for the checker's tests and benchmark.

The run (``R`` replicas with sids 1..R, ``E`` epochs of ``n`` committed txns each, one commit
every ``dt``):

* Epoch e is led by replica ``(e-1) % R + 1``; it proposes each txn ``dt/2`` before it commits
  (delivers) it. Followers deliver ``lag_r`` (< dt/2) after the commit.
* Every epoch but the last ends with the leader proposing one more txn that nobody acks (the
  "skip" case, Fig. 4 of the Zab overview; its client sees an unknown outcome), then crashing.
  After ``gap`` the next leader is established; the old one restarts mid next epoch as a new
  incarnation and re-syncs: from the start (all committed txns redelivered) after odd epochs,
  by a snapshot at the commit point after even ones.
* In epoch 1 a follower that leads neither epoch 1 nor 2 crashes and comes back by snapshot.
* ``sessions`` clients: every ``client_every``-th txn is an acknowledged write of one of them
  (issued before its proposal, acknowledged after its commit); each session also reads the
  commit point at random times, and has one failed write.

Everything a check needs holds by construction (see the tests), so the trace passes every
property; tests mutate it to break one. The generator is vectorized (numpy) and the writers
stream in chunks, so the benchmark can produce ten million deliveries per replica.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from zabray.trace.records import SCHEMA, SCHEMA_VERSION

_DIGEST = object()  # sentinel column value: the digest of the segment's zxid column
_KINDS = np.array(["deliver", "propose"], dtype=object)
_NULLABLE = {"int": "Int32", "long": "Int64", "double": "Float64", "string": "object"}


@dataclass(frozen=True)
class SynthSpec:
    """Shape of the synthetic run; see the module docstring."""

    replicas: int = 3
    epochs: int = 3
    txns_per_epoch: int = 24
    sessions: int = 3
    reads_per_session: int = 8
    client_every: int = 1
    dt: float = 0.01
    run: str = "synth"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.replicas < 3 or self.epochs < 2 or self.txns_per_epoch < 6 or self.sessions < 1:
            raise ValueError(f"need >= 3 replicas, >= 2 epochs, >= 6 txns per epoch, >= 1 session: {self}")


@dataclass
class Segment:
    """Consecutive rows of one writer file: each column an array of length ``n`` or a scalar.
    ``kind_code`` columns index ``_KINDS``; a ``digest`` of ``_DIGEST`` derives from ``zxid``."""

    n: int
    cols: dict[str, Any]

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]]) -> Segment:
        names = [c for c, _, _ in SCHEMA if any(c in r for r in rows)]
        return cls(len(rows), {c: np.array([r.get(c) for r in rows], dtype=object) for c in names})

    def frame(self, lo: int = 0, hi: int | None = None) -> pd.DataFrame:
        hi = self.n if hi is None else min(hi, self.n)
        data: dict[str, Any] = {}
        for c, _, _ in SCHEMA:
            if c == "kind" and "kind_code" in self.cols:
                data[c] = _KINDS[self.cols["kind_code"][lo:hi]]
            elif c == "digest" and self.cols.get(c) is _DIGEST:
                data[c] = digests(np.asarray(self.cols["zxid"][lo:hi]))
            elif c in self.cols:
                v = self.cols[c]
                data[c] = v[lo:hi] if isinstance(v, np.ndarray) else np.full(hi - lo, v, dtype=object
                                                                              if isinstance(v, str) else None)
        return pd.DataFrame(data)


@dataclass
class SynthTrace:
    """A generated run: writer file name -> segments in file order, and facts tests use."""

    spec: SynthSpec
    files: dict[str, list[Segment]]
    meta: dict[str, Any] = field(default_factory=dict)

    def rows(self) -> int:
        return sum(s.n for segs in self.files.values() for s in segs)

    def frames(self) -> dict[str, pd.DataFrame]:
        """Each file as one DataFrame with every schema column (for small traces and mutations)."""
        return {name: normalize(pd.concat([s.frame() for s in segs], ignore_index=True))
                for name, segs in self.files.items()}


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Every schema column, in schema order, with nullable dtypes (ints stay ints in JSON)."""
    out = pd.DataFrame(index=df.index)
    for c, kind, _ in SCHEMA:
        col = df[c] if c in df.columns else pd.Series([None] * len(df), index=df.index, dtype=object)
        out[c] = col.astype(object).where(col.notna(), None) if kind == "string" else col.astype(_NULLABLE[kind])
    return out


def digests(zxids: np.ndarray) -> np.ndarray:
    """16 hex characters per zxid (a splitmix64 hash): stands in for ``zabray.trace.digest``."""
    x = zxids.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return np.frombuffer(x.byteswap().tobytes().hex().encode(), dtype="S16").astype(str).astype(object)


@dataclass
class _Life:
    replica: int
    inc: int
    start: float
    end: float  # crash time, inf if it lives to the end
    mode: str  # initial | from_start | snapshot


def generate(spec: SynthSpec = SynthSpec()) -> SynthTrace:
    """Build the run described in the module docstring (deterministic for a given spec)."""
    rng = np.random.default_rng(spec.seed)
    R, E, n, dt = spec.replicas, spec.epochs, spec.txns_per_epoch, spec.dt
    gap = 20 * dt
    leader = {e: (e - 1) % R + 1 for e in range(1, E + 1)}
    lag = {r: dt * (0.1 + 0.08 * ((r - 1) % 4)) for r in range(1, R + 1)}

    # All txns in zxid order (committed ones and each epoch's lost last proposal).
    est_t, crash_t = {1: gap}, {}
    z, tc, tp = [], [], []
    for e in range(1, E + 1):
        m = n + (1 if e < E else 0)
        z.append((np.int64(e) << 32) + np.arange(1, m + 1, dtype=np.int64))
        c = est_t[e] + dt * np.arange(1, m + 1)
        tp.append(c - dt / 2)
        if e < E:
            c[-1] = np.nan
            crash_t[e] = est_t[e] + (n + 0.75) * dt
            est_t[e + 1] = crash_t[e] + gap
        tc.append(c)
    Z, TC, TP = np.concatenate(z), np.concatenate(tc), np.concatenate(tp)
    EP = (Z >> 32).astype(np.int64)
    committed = ~np.isnan(TC)
    G = np.nonzero(committed)[0]
    end_t = est_t[E] + (n + 1) * dt

    TCG = TC[G]  # commit times, increasing

    def commit_points(t: np.ndarray) -> np.ndarray:
        """Z index of the last txn committed at or before each ``t`` (-1 if none)."""
        k = np.searchsorted(TCG, t, side="right") - 1
        return np.where(k >= 0, G[np.maximum(k, 0)], -1)

    def commit_point(t: float) -> int:
        return int(commit_points(np.array([t]))[0])

    # Incarnations: the epoch-1 follower crash, and every leader's crash at the end of its epoch.
    crashes: list[tuple[int, float, float, str]] = []
    follower = next(r for r in range(1, R + 1) if r not in (leader[1], leader[2]))
    crashes.append((follower, est_t[1] + (n // 3 + 0.8) * dt, est_t[1] + (2 * n // 3 + 0.8) * dt, "snapshot"))
    for e in range(1, E):
        crashes.append((leader[e], crash_t[e], est_t[e + 1] + (n // 2 + 0.3) * dt,
                        "from_start" if e % 2 else "snapshot"))
    lives: dict[int, list[_Life]] = {r: [_Life(r, 0, 0.0, math.inf, "initial")] for r in range(1, R + 1)}
    for r, down, up, mode in sorted(crashes, key=lambda c: c[1]):
        lives[r][-1].end = down
        lives[r].append(_Life(r, len(lives[r]), up, math.inf, mode))

    def up_at(r: int, t: float) -> bool:
        return any(lf.start <= t < lf.end for lf in lives[r])

    leader_of = np.array([0] + [leader[e] for e in range(1, E + 1)])
    files: dict[str, list[Segment]] = {}
    snapshots = []
    for r in range(1, R + 1):
        is_leader = leader_of[EP] == r
        t_deliver = TC + np.where(is_leader, 0.0, lag[r])
        for lf in lives[r]:
            env = {"v": SCHEMA_VERSION, "run": spec.run, "src": f"replica-{r}", "replica": r, "inc": lf.inc}
            small: list[dict[str, Any]] = []
            ok = committed & (t_deliver <= lf.end)
            if lf.mode == "initial":
                small.append({"t": 0.0, "kind": "state", "state": "LOOKING", "epoch": 0, "leader": -1})
                d_idx = np.nonzero(ok)[0]
                d_t = t_deliver[d_idx]
            else:
                cp = commit_point(lf.start)
                e_now = max(e for e in est_t if est_t[e] <= lf.start)
                small.append({"t": lf.start, "kind": "state", "state": "LOOKING", "epoch": e_now, "leader": -1})
                small.append({"t": lf.start + 0.01 * dt, "kind": "state", "state": "FOLLOWING",
                              "epoch": e_now, "leader": leader[e_now]})
                later = np.nonzero(ok & (TC > lf.start))[0]
                if lf.mode == "from_start":
                    redo = G[: int(np.searchsorted(G, cp, side="right"))]
                    ramp = lf.start + 0.05 * dt + 0.1 * dt * np.arange(1, len(redo) + 1) / (len(redo) + 1)
                    d_idx, d_t = np.concatenate([redo, later]), np.concatenate([ramp, t_deliver[later]])
                else:
                    small.append({"t": lf.start + 0.1 * dt, "kind": "snapshot", "epoch": int(EP[cp]),
                                  "zxid": int(Z[cp])})
                    snapshots.append({"replica": r, "inc": lf.inc, "zxid": int(Z[cp]), "t": lf.start + 0.1 * dt})
                    d_idx, d_t = later, t_deliver[later]
            leads = np.array([False] + [leader[e] == r and lf.start <= est_t[e] < lf.end for e in range(1, E + 1)])
            p_idx = np.nonzero(leads[EP])[0]
            for e in range(1, E + 1):
                if lf.start <= est_t[e] < lf.end:
                    small.append({"t": est_t[e], "kind": "state", "epoch": e, "leader": leader[e],
                                  "state": "LEADING" if leader[e] == r else "FOLLOWING"})
                    if leader[e] == r:
                        cp = commit_point(est_t[e])
                        small.append({"t": est_t[e], "kind": "established", "epoch": e,
                                      "zxid": int(Z[cp]) if cp >= 0 else 0})
                if e < E and lf.start <= crash_t[e] + 0.1 * dt < lf.end:
                    small.append({"t": crash_t[e] + 0.1 * dt, "kind": "state", "state": "LOOKING",
                                  "epoch": e, "leader": -1})
            # Deliveries and proposals interleaved in time order.
            t_all = np.concatenate([d_t, TP[p_idx]])
            order = np.argsort(t_all, kind="stable")
            bulk = Segment(len(order), {
                **env, "t": t_all[order],
                "kind_code": np.concatenate([np.zeros(len(d_idx), np.int8), np.ones(len(p_idx), np.int8)])[order],
                "epoch": EP[np.concatenate([d_idx, p_idx])][order],
                "zxid": Z[np.concatenate([d_idx, p_idx])][order], "digest": _DIGEST})
            files[f"replica-{r}-inc{lf.inc}"] = _interleave(bulk, sorted(small, key=lambda x: x["t"]), env)

    # Clients.
    S = spec.sessions
    w_idx = G[:: spec.client_every]
    w_session = np.arange(len(w_idx)) % S + 1
    w_ops = np.array(["create", "set", "set", "delete"], dtype=object)[np.arange(len(w_idx)) // S % 4]
    w_inv = TC[w_idx] - dt * (0.5 + 0.4 * rng.random(len(w_idx)))
    w_done = TC[w_idx] + dt * (0.05 + 0.4 * rng.random(len(w_idx)))
    lost = {e: int(Z[(EP == e)][-1]) for e in range(1, E)}
    meta_lost_ops = []
    for s in range(1, S + 1):
        mine = w_session == s
        reads_t = np.sort(rng.uniform(est_t[1], end_t, spec.reads_per_session))
        cps = commit_points(reads_t)
        r_z = np.where(cps >= 0, Z[np.maximum(cps, 0)], 0)
        small = [{"session": s, "op": "set", "path": f"/s{s}/missing", "invoke_t": est_t[1] + s * dt / 7,
                  "complete_t": est_t[1] + s * dt / 7 + dt / 4, "outcome": "failed"}]
        for e, zl in lost.items():
            if (e - 1) % S + 1 == s:
                inv = float(TP[Z == zl][0]) - 0.2 * dt
                small.append({"session": s, "op": "set", "path": f"/s{s}/lost", "invoke_t": inv,
                              "complete_t": crash_t[e] + gap / 2, "outcome": "unknown"})
                meta_lost_ops.append({"session": s, "epoch": e, "zxid": zl})
        cols = {
            "session": np.concatenate([w_session[mine], np.full(len(reads_t), s)]).astype(np.int64),
            "op": np.concatenate([w_ops[mine],
                                  np.array(["get", "exists", "children"], dtype=object)[np.arange(len(reads_t)) % 3]]),
            "invoke_t": np.concatenate([w_inv[mine], reads_t]),
            "complete_t": np.concatenate([w_done[mine], reads_t + dt * (0.05 + 0.2 * rng.random(len(reads_t)))]),
            "zxid": np.concatenate([Z[w_idx[mine]], r_z]).astype(np.int64),
        }
        k_w = int(mine.sum())
        for extra in small:
            for name in cols:
                cols[name] = np.append(cols[name], extra.get(name))  # type: ignore[arg-type]  # None widens to object
        outcome = np.array(["ok"] * (k_w + len(reads_t)) + [r["outcome"] for r in small], dtype=object)
        zx = cols["zxid"].astype(object)
        zx[k_w + len(reads_t):] = None
        order = np.argsort(cols["complete_t"].astype(float), kind="stable")
        seg_cols = {"v": SCHEMA_VERSION, "run": spec.run, "src": f"client-{s}", "replica": -1, "inc": 0,
                    "t": cols["complete_t"].astype(float)[order],
                    "kind": "client", **{c: v[order] for c, v in cols.items() if c != "zxid"},
                    "zxid": zx[order], "outcome": outcome[order]}
        if len(w_idx) <= 100_000:
            paths = np.array([f"/s{s}/n{i % 5}" for i in range(k_w)] + [None] * len(reads_t)
                             + [r["path"] for r in small], dtype=object)
            seg_cols["path"] = paths[order]
        digest_w = np.concatenate([digests(Z[w_idx[mine]]), np.full(len(reads_t) + len(small), None, dtype=object)])
        seg_cols["digest"] = digest_w[order]
        files[f"client-{s}"] = [Segment(len(order), seg_cols)]

    fault_rows = [{"v": SCHEMA_VERSION, "run": spec.run, "src": "faults", "replica": -1, "inc": 0, "t": up,
                   "kind": "fault", "fault": "crash", "target": str(r), "start": down, "end": up}
                  for r, down, up, _ in sorted(crashes, key=lambda c: c[1])]
    files["faults"] = [Segment.from_rows(fault_rows)]
    meta = {"leaders": leader, "established_t": est_t, "crash_t": crash_t, "follower": follower,
            "crashes": [{"replica": r, "down": d, "up": u, "mode": m} for r, d, u, m in crashes],
            "lost": lost, "lost_ops": meta_lost_ops, "snapshots": snapshots, "lag": lag,
            "zxids": Z[G], "commit_t": TC[G], "end_t": end_t}
    return SynthTrace(spec, files, meta)


def _interleave(bulk: Segment, small: list[dict[str, Any]], env: dict[str, Any]) -> list[Segment]:
    """Cut ``bulk`` (sorted by t) at each small row's time; a small row goes before bulk rows of
    the same time."""
    if not small:
        return [bulk]
    cuts = np.searchsorted(bulk.cols["t"], [r["t"] for r in small], side="left")
    out, lo = [], 0
    for row, cut in zip(small, cuts, strict=True):
        if cut > lo:
            out.append(_slice(bulk, lo, int(cut)))
            lo = int(cut)
        out.append(Segment.from_rows([{**env, **row}]))
    if lo < bulk.n:
        out.append(_slice(bulk, lo, bulk.n))
    return out


def _slice(seg: Segment, lo: int, hi: int) -> Segment:
    return Segment(hi - lo, {c: (v[lo:hi] if isinstance(v, np.ndarray) else v) for c, v in seg.cols.items()})


def _chunks(files: SynthTrace | Mapping[str, pd.DataFrame], chunk_rows: int) -> Iterator[tuple[str, Iterator[pd.DataFrame]]]:
    if isinstance(files, SynthTrace):
        def gen(segs: list[Segment]) -> Iterator[pd.DataFrame]:
            for s in segs:
                for lo in range(0, s.n, chunk_rows):
                    yield s.frame(lo, lo + chunk_rows)
        for name, segs in files.files.items():
            yield name, gen(segs)
    else:
        for name, df in files.items():
            yield name, iter([df])


def write_jsonl(files: SynthTrace | Mapping[str, pd.DataFrame], run_dir: str | PathLike[str], *,
                chunk_rows: int = 500_000) -> Path:
    """Write ``RUN_DIR/trace/<file>.jsonl`` for each writer file; returns the run dir."""
    trace = Path(run_dir) / "trace"
    trace.mkdir(parents=True, exist_ok=True)
    for name, chunks in _chunks(files, chunk_rows):
        with open(trace / f"{name}.jsonl", "w") as fh:
            for df in chunks:
                text = df.to_json(orient="records", lines=True, double_precision=15)
                fh.write(text if text.endswith("\n") or not text else text + "\n")
    return Path(run_dir)


def arrow_schema() -> Any:
    import pyarrow as pa

    types = {"int": pa.int32(), "long": pa.int64(), "double": pa.float64(), "string": pa.string()}
    return pa.schema([(c, types[k]) for c, k, _ in SCHEMA])


def write_parquet(files: SynthTrace | Mapping[str, pd.DataFrame], run_dir: str | PathLike[str], *,
                  chunk_rows: int = 1_000_000) -> Path:
    """Write ``RUN_DIR/trace/<file>.parquet`` (every schema column, one row group per chunk)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema()
    trace = Path(run_dir) / "trace"
    trace.mkdir(parents=True, exist_ok=True)
    for name, chunks in _chunks(files, chunk_rows):
        with pq.ParquetWriter(trace / f"{name}.parquet", schema, compression="zstd") as writer:
            for df in chunks:
                table = pa.Table.from_pandas(df, preserve_index=False)
                cols = [table.column(f.name).cast(f.type) if f.name in table.column_names
                        else pa.nulls(len(df), f.type) for f in schema]
                writer.write_table(pa.Table.from_arrays(cols, schema=schema))
    return Path(run_dir)
