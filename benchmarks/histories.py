"""The history checker at scale: a generated linearizable history on Spark, and one hard key.

    python benchmarks/histories.py --concurrency 2,4,8,16   # 1,000,000 ops over 1,000 keys
    python benchmarks/histories.py --ops 200000 --keys 100,1000 --concurrency 4
    python benchmarks/histories.py --one-key-only           # only the 16+16 single-key searches

Part 1, one key, no Spark: 16 concurrent writes and 16 concurrent reads (every order of the
writes possible), linearizable, then made impossible in several ways (a read of a value nobody
wrote; inverted reads; two reads pinned to one version; a cas from a version never reached; a
late stale read), each searched by ``check_key`` (best of `--repeat` wall times, 3 by default, and its steps).

Part 2, Spark: per key, ``concurrency`` sessions each issue one operation at a time (reads,
writes, compare-and-sets, a few outcomes lost as unknown, every change with its zxid, every read
with its znode's mzxid); each operation takes effect at a random point inside its interval, so
the history is linearizable by construction and every check must pass (the script fails
otherwise). It is written as Parquet under a temporary run directory and read back by Spark as a
real run is. Printed per configuration: wall time of the whole check, the per-key search time
measured inside the Spark tasks (mean, 99th percentile, max) and steps, peak RSS of the driver
and of the JVM (VmHWM). Figures measured on a shared machine are contended: the first line
says the load.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# Run as a script, benchmarks/profile.py would shadow the standard library's profile module,
# which pyspark imports (through cProfile).
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]


# -- part 1: one key, 16 + 16 --------------------------------------------------------------------

def _row(op: int, session: str, kind: str, t0: float, t1: float, **more: Any) -> dict[str, Any]:
    return {"v": 2, "client": "c", "session": session, "op": op, "key": "/k", "kind": kind, "invoke_t": t0,
            "complete_t": t1, "outcome": "ok", **more}


def sixteen(variant: str) -> list[dict[str, Any]]:
    """16 writes of v0..v15 and 16 reads, all overlapping, after a create; then ``variant``."""
    rows = [_row(0, "s", "create", 0, 1, value="x", result_version=0)]
    for i in range(16):
        rows.append(_row(1 + i, f"w{i}", "write", 2 + i / 100, 10 + i / 100, value=f"v{i}"))
        rows.append(_row(17 + i, f"r{i}", "read", 2.005 + i / 100, 10.005 + i / 100, result=f"v{15 - i}"))
    if variant == "nobody":
        rows.append(_row(40, "x", "read", 3, 9, result="nobody"))
    elif variant == "inverted":  # v0 read, then v1, then v0 again, one after another
        rows += [_row(40, "x", "read", 2.5, 3, result="v0"), _row(41, "x", "read", 3.5, 4, result="v1"),
                 _row(42, "x", "read", 4.5, 5, result="v0")]
    elif variant == "same-version":  # v3 and v4 cannot both be the third write
        rows += [_row(40, "x", "read", 2, 11, result="v3", result_version=3),
                 _row(41, "y", "read", 2, 11, result="v4", result_version=3)]
    elif variant == "far-version":  # 16 writes never reach version 20
        rows.append(_row(40, "x", "cas", 2, 11, version=20, value="z", result_version=21))
    elif variant == "late-stale":  # after every write completed, v3 then v4 then v3 again
        rows += [_row(40, "x", "read", 12, 13, result="v3"), _row(41, "x", "read", 14, 15, result="v4"),
                 _row(42, "x", "read", 16, 17, result="v3")]
    elif variant == "unknown-writes":  # half the writes lost: each may have landed, or not
        for r in rows:
            if r["kind"] == "write" and r["op"] % 2:
                r["outcome"], r["complete_t"] = "unknown", None
    return rows


def _best(fn: Any, repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1000, out


def one_key(budget: int, repeat: int = 3) -> list[str]:
    from zabray.pipeline.linearizability import check_key, ops_of, search

    lines = ["### One key: 16 concurrent writes + 16 concurrent reads (no Spark)", "",
             "check_key = value zones, then the search, then shrinking a violation to its culprits; "
             "search alone = the segment search with its cache and pruning, no zones, no shrinking. "
             "Best of 3 wall times.", "",
             "| history | operations | verdict | check_key steps | check_key ms | search alone steps | "
             "search alone ms |", "|---|---:|---|---:|---:|---:|---:|"]
    for variant in ("linearizable", "unknown-writes", "nobody", "inverted", "same-version", "far-version",
                    "late-stale"):
        rows = sixteen(variant)
        ops = ops_of(rows, reads="all")
        ms, v = _best(lambda ops=ops: check_key("/k", ops, budget=budget), repeat)
        ms2, r = _best(lambda ops=ops: search(ops, budget), repeat)
        want = "ok" if variant in ("linearizable", "unknown-writes") else "violation"
        if v.verdict != want or r.ok is not (want == "ok"):
            raise SystemExit(f"16+16 {variant}: {v.verdict} / search {r.ok}, expected {want}\n{v.timeline}")
        lines.append(f"| {variant} | {len(rows)} | {v.verdict} | {v.steps:,} | {ms:.1f} | {r.steps:,} | {ms2:.1f} |")
    return lines


# -- part 2: Spark, many keys -------------------------------------------------------------------

def generate(ops: int, keys: int, concurrency: int, seed: int = 1) -> dict[str, list[Any]]:
    """Columns of a linearizable history (``zabray.client.histories`` schema, version 2)."""
    from zabray.client.histories import COLUMNS

    rng = random.Random(seed)
    cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    per_key = max(1, ops // keys)
    n = 0
    for k in range(keys):
        key = f"/bench/k{k}"
        base = k * 10_000_000  # this key's zxids (its sessions touch no other key)
        events = []  # (lin point, session, invoke, complete, kind)
        clock = [0.0] * concurrency
        for i in range(per_key):
            s = i % concurrency
            inv = clock[s] + rng.random() * 0.002
            dur = 0.001 + rng.random() * 0.01
            clock[s] = inv + dur
            r = rng.random()
            kind = "read" if r < 0.4 else "write" if r < 0.7 else "cas"
            events.append((inv + rng.random() * dur, s, inv, inv + dur, kind))
        events.sort()
        zxid = base + 1
        data, ver, mz = "init", 0, zxid
        rows = [(-1, -1.0, -0.5, "create", "init", None, "ok", None, 0, zxid, None)]
        last_seen: dict[int, int] = {}
        for j, (_, s, inv, done, kind) in enumerate(events):
            if kind == "read":
                rows.append((s, inv, done, "read", None, None, "ok", data, ver, mz, None))
                last_seen[s] = ver
                continue
            value = f"{k}-{j}"
            unknown = rng.random() < 0.005
            expect = last_seen.get(s, ver) if kind == "cas" else -1
            if kind == "cas" and expect != ver:
                rows.append((s, inv, done, "cas", value, expect, "fail", None, None, None, "BAD_VERSION"))
                continue
            zxid += 1
            ver, data, mz = ver + 1, value, zxid
            rows.append((s, inv, done, kind, value, expect if kind == "cas" else None,
                         "unknown" if unknown else "ok", None, None if unknown else ver,
                         None if unknown else zxid, "CONNECTION_LOSS" if unknown else None))
        for (s, inv, done, kind, value, version, outcome, result, rv, zx, error) in rows:
            row = {"v": 2, "client": "bench", "session": f"k{k}-s{s}", "op": n, "key": key, "kind": kind,
                   "value": value, "version": version, "invoke_t": inv,
                   "complete_t": None if outcome == "unknown" else done, "outcome": outcome, "result": result,
                   "result_version": rv, "zxid": zx, "error": error, "replica": None, "multi": None}
            for c in COLUMNS:
                cols[c].append(row[c])
            n += 1
    return cols


def write_parquet(cols: dict[str, list[Any]], run_dir: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from zabray.client.histories import SCHEMA

    types = {"int": pa.int32(), "long": pa.int64(), "double": pa.float64(), "string": pa.string()}
    table = pa.table({c: pa.array(cols[c], type=types[t]) for c, t, _ in SCHEMA})
    out = run_dir / "histories" / "bench.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out, row_group_size=250_000)
    return out


def vm_hwm_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--keys", default="1000", help="comma-separated key counts")
    ap.add_argument("--concurrency", default="4", help="comma-separated sessions per key")
    ap.add_argument("--reads", default="all", choices=("after-sync", "all", "none"),
                    help="reads the search includes (default all: the widest search)")
    ap.add_argument("--master", default=None)
    ap.add_argument("--one-key-only", action="store_true", help="only part 1 (no Spark)")
    ap.add_argument("--repeat", type=int, default=3, help="part 1: the best of this many wall times")
    args = ap.parse_args()

    from zabray.experiments.machine import machine_line
    from zabray.pipeline.linearizability import DEFAULT_BUDGET

    print(machine_line())
    print(f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; command: "
          f"python benchmarks/histories.py {' '.join(sys.argv[1:])}")
    print(f"search budget {DEFAULT_BUDGET:,} steps per key; reads searched: {args.reads}")
    print()
    print("\n".join(one_key(DEFAULT_BUDGET, args.repeat)))
    if args.one_key_only:
        return

    from zabray.pipeline.history_checks import check_histories, load_histories
    from zabray.pipeline.spark_session import get_session

    spark = get_session(args.master)
    jvm_pid = int(spark._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    print()
    print(f"### Spark {spark.version} on {spark.sparkContext.master}: every check, {args.ops:,} operations")
    print()
    print("| ops | keys | sessions/key | gen s | check s | ops/s | search ms/key: mean | p99 | max | "
          "steps/key max | driver MB | JVM MB | verdicts |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for keys in [int(x) for x in args.keys.split(",")]:
        for conc in [int(x) for x in args.concurrency.split(",")]:
            with tempfile.TemporaryDirectory(prefix="zabray-hbench-") as tmp:
                t0 = time.monotonic()
                cols = generate(args.ops, keys, conc)
                write_parquet(cols, Path(tmp))
                nops = len(cols["op"])
                del cols
                gen = time.monotonic() - t0
                peak_jvm = [vm_hwm_kb(jvm_pid)]
                stop = threading.Event()

                def watch(stop: threading.Event = stop, peak: list[int] = peak_jvm) -> None:
                    while not stop.wait(0.5):
                        peak[0] = max(peak[0], vm_hwm_kb(jvm_pid))

                th = threading.Thread(target=watch, daemon=True)
                th.start()
                t0 = time.monotonic()
                rep = check_histories(load_histories(spark, tmp), reads=args.reads)
                took = time.monotonic() - t0
                stop.set()
                th.join()
                driver_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                sr = rep.search  # per-key search times, measured inside the Spark tasks
                print(f"| {nops:,} | {keys:,} | {conc} | {gen:.1f} | {took:.1f} | {nops / took:,.0f} | "
                      f"{sr['ms_mean']:.1f} | {sr['ms_p99']:.1f} | {sr['ms_max']:.1f} | {sr['steps_max']:,.0f} | "
                      f"{driver_mb:.0f} | {peak_jvm[0] / 1024:.0f} | {rep.keys} |", flush=True)
                if rep.verdict != "PASS":
                    raise SystemExit(f"not PASS on a linearizable history: {rep.verdict} "
                                     f"{rep.violations[:1] or rep.session[:1] or rep.unknown[:1]}")
    spark.stop()


if __name__ == "__main__":
    main()
