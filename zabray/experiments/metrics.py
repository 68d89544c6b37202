"""Numbers from an experiment's recorded operations: pure functions of the records.

Times are wall-clock seconds. The measured window is ``[m0, m1]``: throughput counts ok
operations that completed inside it; latency percentiles cover ok operations invoked inside
it. A fault's *recovery* is measured from the clients' side only (no replica clock involved):
``stall_s`` is the longest stretch after the fault with no ok operation completing, up to the
next fault or the window's end; ``recovered_s`` is the time from the fault to the end of the
first bucket whose throughput is back to 90 % of the mean before the fault (0 if it never
dropped below that; NaN if it was not back by the next fault or the window's end).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

READ_OPS = ("get", "read", "exists", "children")


def ops_frame(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per operation from the clients' ``run`` results."""
    frames = []
    for r in results:
        recs = r["records"]
        f = pd.DataFrame({"invoke": recs["invoke"], "complete": recs["complete"], "outcome": recs["outcome"],
                          "op": recs["op"], "zxid": pd.array(recs["zxid"], dtype="Int64"),
                          "digest": recs["digest"]})
        f["client"] = r["index"]
        frames.append(f)
    if not frames:
        return pd.DataFrame(columns=["invoke", "complete", "outcome", "op", "zxid", "digest", "client"])
    return pd.concat(frames, ignore_index=True)


def percentile(values: list[float] | pd.Series, p: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    s = sorted(values)
    if not s:
        return float("nan")
    return float(s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))])


def summary(ops: pd.DataFrame, m0: float, m1: float) -> dict[str, float]:
    """Throughput (ok ops/s, split reads/writes) and latency percentiles (ms) over the window."""
    dur = m1 - m0
    ok = ops[ops.outcome == "ok"]
    done = ok[(ok.complete >= m0) & (ok.complete <= m1)]
    reads = done.op.isin(READ_OPS)
    lat_ops = ok[(ok.invoke >= m0) & (ok.invoke <= m1)]
    lat = ((lat_ops.complete - lat_ops.invoke) * 1000).tolist()
    inwin = ops[(ops.invoke >= m0) & (ops.invoke <= m1)]
    return {
        "throughput": len(done) / dur,
        "read_throughput": float(reads.sum()) / dur,
        "write_throughput": float((~reads).sum()) / dur,
        "ops_ok": float(len(done)),
        "ops_failed": float((inwin.outcome == "failed").sum()),
        "ops_unknown": float((inwin.outcome == "unknown").sum()),
        "latency_p50_ms": percentile(lat, 50),
        "latency_p90_ms": percentile(lat, 90),
        "latency_p99_ms": percentile(lat, 99),
        "latency_mean_ms": float(sum(lat) / len(lat)) if lat else float("nan"),
    }


def timeline(ops: pd.DataFrame, t0: float, m0: float, m1: float, bucket: float) -> pd.DataFrame:
    """Ok operations per second in buckets of ``bucket`` s from ``t0`` to ``m1``; ``t`` is the
    bucket's start relative to ``m0`` (negative during warm-up). Empty buckets are kept."""
    n = max(1, math.ceil((m1 - t0) / bucket))
    ok = ops[(ops.outcome == "ok") & (ops.complete >= t0) & (ops.complete < t0 + n * bucket)]
    idx = ((ok.complete - t0) // bucket).astype(int)
    is_read = ok.op.isin(READ_OPS)
    reads = idx[is_read].value_counts().reindex(range(n), fill_value=0)
    writes = idx[~is_read].value_counts().reindex(range(n), fill_value=0)
    t = [t0 - m0 + i * bucket for i in range(n)]
    return pd.DataFrame({"t": t, "reads_per_s": reads.to_numpy() / bucket, "writes_per_s": writes.to_numpy() / bucket,
                         "ops_per_s": (reads.to_numpy() + writes.to_numpy()) / bucket})


def recoveries(ops: pd.DataFrame, marks: list[dict[str, Any]], m0: float, m1: float,
               bucket: float) -> list[dict[str, Any]]:
    """Per fault mark (``{"t": wall time, "what": ...}``): ``stall_s`` and ``recovered_s``."""
    ok = ops[ops.outcome == "ok"].complete.sort_values().to_numpy()
    out = []
    times = sorted(m["t"] for m in marks)
    for m in sorted(marks, key=lambda m: m["t"]):
        tf = m["t"]
        nxt = min([t for t in times if t > tf] + [m1])
        inside = [x for x in ok if tf <= x <= nxt]
        edges = [tf, *inside, nxt]
        stall = max(b - a for a, b in zip(edges, edges[1:], strict=False)) if nxt > tf else 0.0
        before = [x for x in ok if max(m0, tf - 5 * bucket * 4) <= x < tf]
        span = tf - max(m0, tf - 5 * bucket * 4)
        base = len(before) / span if span > 0 else 0.0
        recovered = float("nan")
        if base > 0:
            k = 0
            while tf + (k + 1) * bucket <= nxt + 1e-9:
                lo, hi = tf + k * bucket, tf + (k + 1) * bucket
                rate = sum(1 for x in inside if lo <= x < hi) / bucket
                if rate >= 0.9 * base:
                    recovered = k * bucket if k == 0 else hi - tf
                    break
                k += 1
        out.append({**m, "at": tf - m0, "stall_s": stall, "recovered_s": recovered, "base_ops_per_s": base})
    return out


def limit(client_cores: list[float], replica_cores: list[float], saturated: float = 0.85,
          contended: bool = False) -> str:
    """Which side was the limit: a Python client or replica is one event loop, so a process near
    one full core (``saturated``) is the bottleneck. Neither near it: with ``contended`` (more
    runnable work than cores on the host) the machine's CPU was the limit, shared with everything
    else; otherwise the run was bound by latency (fsync, round trips), not by CPU."""
    c = max(client_cores, default=0.0)
    r = max(replica_cores, default=0.0)
    if c >= saturated and c >= r:
        return "clients"
    if r >= saturated:
        return "replicas"
    if c >= saturated:
        return "clients"
    return "machine CPU (contended)" if contended else "latency (fsync, round trips)"
