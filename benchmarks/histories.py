"""The history checker at scale: a generated linearizable history, checked on Spark.

    python benchmarks/histories.py                         # 1,000,000 ops over 1,000 keys, 4 sessions/key
    python benchmarks/histories.py --ops 200000 --keys 100,300,1000 --concurrency 2,4,8

The generator simulates, per key, ``concurrency`` sessions each issuing one operation at a
time (reads, writes, compare-and-sets, a few outcomes lost as unknown); every operation takes
effect at a random point inside its interval, so the history is linearizable by construction
and the checker must say so for every key (the script fails otherwise). It is written as
Parquet under a temporary run directory and read back by Spark, as a real run would be.

Printed per configuration: wall time of the check, peak RSS of the driver (Python) and of the
JVM (VmHWM), search steps. Figures measured on a shared machine are contended: say so.
"""

from __future__ import annotations

import argparse
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


def generate(ops: int, keys: int, concurrency: int, seed: int = 1) -> dict[str, list[Any]]:
    """Columns of a linearizable history (``zabray.client.histories`` schema)."""
    rng = random.Random(seed)
    cols: dict[str, list[Any]] = {c: [] for c in ("v", "client", "session", "op", "key", "kind", "value", "version",
                                                  "invoke_t", "complete_t", "outcome", "result",
                                                  "result_version", "zxid", "error", "replica")}
    per_key = max(1, ops // keys)
    n = 0
    for k in range(keys):
        key = f"/bench/k{k}"
        events = []  # (lin point, session, invoke, complete, kind, arg)
        clock = [0.0] * concurrency
        for i in range(per_key):
            s = i % concurrency
            inv = clock[s] + rng.random() * 0.002
            dur = 0.001 + rng.random() * 0.01
            clock[s] = inv + dur
            r = rng.random()
            kind = "read" if r < 0.4 else "write" if r < 0.7 else "cas"
            events.append([inv + rng.random() * dur, s, inv, inv + dur, kind])
        events.sort()
        exists, data, ver = True, "init", 0
        rows = [(0.0, -1, -1.0, -0.5, "create", "init", None, "ok", None, 0, None)]
        last_seen: dict[int, int] = {}
        for j, (_, s, inv, done, kind) in enumerate(events):
            if kind == "read":
                rows.append((inv, s, inv, done, "read", None, None, "ok", data, ver, None))
                last_seen[s] = ver
                continue
            value = f"{k}-{j}"
            unknown = rng.random() < 0.005
            if kind == "write":
                ver, data = ver + 1, value
                rows.append((inv, s, inv, done, "write", value, None, "unknown" if unknown else "ok", None,
                             None if unknown else ver, None))
            else:
                expect = last_seen.get(s, ver)
                if expect == ver:
                    ver, data = ver + 1, value
                    rows.append((inv, s, inv, done, "cas", value, expect, "unknown" if unknown else "ok", None,
                                 None if unknown else ver, None))
                else:
                    rows.append((inv, s, inv, done, "cas", value, expect, "fail", None, None, "BAD_VERSION"))
        del exists
        for (_, s, inv, done, kind, value, version, outcome, result, rv, error) in rows:
            cols["v"].append(1)
            cols["client"].append("bench")
            cols["session"].append(f"k{k}-s{s}")
            cols["op"].append(n)
            cols["key"].append(key)
            cols["kind"].append(kind)
            cols["value"].append(value)
            cols["version"].append(version)
            cols["invoke_t"].append(inv)
            cols["complete_t"].append(done)
            cols["outcome"].append(outcome)
            cols["result"].append(result)
            cols["result_version"].append(rv)
            cols["zxid"].append(None)
            cols["error"].append(error)
            cols["replica"].append(None)
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
    pq.write_table(table, out)
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
    ap.add_argument("--master", default=None)
    args = ap.parse_args()

    from zabray.experiments.machine import machine_line
    from zabray.pipeline.history_checks import check_histories, load_histories
    from zabray.pipeline.spark_session import get_session

    spark = get_session(args.master)
    jvm_pid = int(spark._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    print(machine_line())
    print(f"Spark {spark.version} on {spark.sparkContext.master}")
    print(f"{'ops':>10} {'keys':>6} {'conc':>5} {'gen s':>7} {'check s':>8} {'ops/s':>9} {'driver MB':>10} "
          f"{'JVM MB':>8}  verdicts")
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
                rep = check_histories(load_histories(spark, tmp), reads="all")
                took = time.monotonic() - t0
                stop.set()
                th.join()
                driver_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                print(f"{nops:>10,} {keys:>6} {conc:>5} {gen:>7.1f} {took:>8.1f} {nops / took:>9,.0f} "
                      f"{driver_mb:>10.0f} {peak_jvm[0] / 1024:>8.0f}  {rep.keys}")
                if rep.violations or rep.session:
                    raise SystemExit(f"false alarm on a linearizable history: {rep.violations[:1] or rep.session[:1]}")
    spark.stop()


if __name__ == "__main__":
    main()
