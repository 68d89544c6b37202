"""Broadcast throughput, latency and failover of a real ensemble on this machine.

    python benchmarks/broadcast.py                    # 3, 5 and 7 replicas, fsync on
    python benchmarks/broadcast.py --replicas 3 --seconds 20 --in-flight 1000

For each size: 1 KB values with ``--in-flight`` outstanding for ``--seconds`` (committed/s,
p50/p99 latency), then one request at a time (p50 latency), then a leader kill under load
(time until the driver sees a new leader established, and the longest stretch in which the
client got no write acknowledged).
Runs on an embedded local Ray; prints a table and writes JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, benchmarks/ would shadow the `storage` package with benchmarks/storage.py.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from zabray.driver.ensemble import Ensemble  # noqa: E402
from zabray.driver.workload import Workload, check_histories, percentile  # noqa: E402


def measure(replicas: int, seconds: float, in_flight: int, size: int, trace: bool) -> dict[str, object]:
    data = Path(tempfile.mkdtemp(prefix=f"zabray-bench-{replicas}-"))
    ens = Ensemble.start(replicas, name=f"bench{replicas}", data_dir=str(data / "data"),
                         run_dir=str(data / "run"), trace=trace)
    try:
        ens.wait_for_leader(60)
        warm = Workload(ens, in_flight=in_flight, size=size).start()
        time.sleep(2)
        warm.stop()
        wl = Workload(ens, in_flight=in_flight, size=size).start()
        time.sleep(seconds)
        r = wl.stop()
        lat = r.latencies_ms()
        one = Workload(ens, in_flight=1, size=size).start()
        time.sleep(min(5.0, seconds / 2))
        r1 = one.stop()
        lat1 = r1.latencies_ms()
        # Failover under load: kill the leader, time the new leader and the first commit after.
        load = Workload(ens, in_flight=in_flight, size=size).start()
        time.sleep(2)
        leader = ens.leader()
        ens.prepare_faults()  # the kill is timed without the fault injector's start
        killed_at = time.time()
        t0 = time.monotonic()
        ens.kill(leader)  # type: ignore[arg-type]
        new = ens.wait_for_leader(60)
        elected = time.monotonic() - t0
        time.sleep(2)
        rf = load.stop()
        pause = rf.longest_pause(killed_at - 1.0, killed_at + 2.0)
        live = [s.sid for s in ens.status() if s.alive]
        problems = check_histories({s: h for s, h in ens.histories().items() if s in live},
                                   {**r.acked, **rf.acked})
        return {
            "replicas": replicas,
            "in_flight": in_flight,
            "value_bytes": size,
            "committed_per_s": round(r.throughput()),
            "p50_ms": round(percentile(lat, 50), 2),
            "p99_ms": round(percentile(lat, 99), 2),
            "single_p50_ms": round(percentile(lat1, 50), 2),
            "single_p99_ms": round(percentile(lat1, 99), 2),
            "failover_leader_s": round(elected, 3),
            "failover_write_pause_s": round(pause, 3),
            "old_leader": leader,
            "new_leader": new,
            "acknowledged": len(r.acked) + len(rf.acked),
            "lost_or_disagreeing": len(problems),
        }
    finally:
        ens.stop()
        shutil.rmtree(data, ignore_errors=True)  # each run leaves ~700 MB of logs behind otherwise


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, nargs="*", default=[3, 5, 7])
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--in-flight", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--no-trace", action="store_true", help="replicas write no trace files")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from zabray.config import EnsembleConfig
    from zabray.experiments.machine import machine_line

    cfg = EnsembleConfig.load(None)
    print(machine_line())
    print(f"zabray: configs/local.yaml (fsync {cfg.fsync}, trace {not args.no_trace}, auth {cfg.auth}, "
          f"tick_ms {cfg.tick_ms}); {args.size} B values, {args.in_flight} in flight, {args.seconds} s per size",
          flush=True)
    rows = []
    for n in args.replicas:
        row = measure(n, args.seconds, args.in_flight, args.size, not args.no_trace)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n{'replicas':>8} {'commits/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'1-op p50':>9} "
          f"{'leader s':>9} {'pause s':>9} {'lost':>5}")
    for r in rows:
        print(f"{r['replicas']:>8} {r['committed_per_s']:>10,} {r['p50_ms']:>8} {r['p99_ms']:>8} "
              f"{r['single_p50_ms']:>9} {r['failover_leader_s']:>9} {r['failover_write_pause_s']!s:>9} "
              f"{r['lost_or_disagreeing']:>5}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
