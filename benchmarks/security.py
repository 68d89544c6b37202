"""What membership authentication and TLS cost: broadcast throughput and latency, 3 replicas,
1 KB writes, 1,000 in flight, with auth off, auth on (the default) and auth + TLS.

    python benchmarks/security.py                     # 20 s per mode
    python benchmarks/security.py --seconds 5 --json out.json

Auth runs once per connection, so it should cost nothing measurable on the data path; TLS
encrypts every byte on the peer and client ports. Each mode starts a fresh ensemble on an
embedded local Ray, warms up for 2 s, then measures. Run on a quiet machine: figures taken while
other work shares the CPUs are not comparable.
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

from zabray.config import EnsembleConfig  # noqa: E402
from zabray.driver.ensemble import Ensemble  # noqa: E402
from zabray.driver.workload import Workload, check_histories, percentile  # noqa: E402
from zabray.experiments.machine import machine_line  # noqa: E402
from zabray.net.tls import make_certs  # noqa: E402

MODES = ("auth-off", "auth", "auth+tls")


def measure(mode: str, seconds: float, in_flight: int, size: int, replicas: int) -> dict[str, object]:
    data = Path(tempfile.mkdtemp(prefix=f"zabray-sec-{mode.replace('+', '-')}-"))
    overrides: dict[str, object] = {"auth": mode != "auth-off"}
    if mode == "auth+tls":
        make_certs(data / "tls", ["node", "client"])
        overrides.update(tls=True, tls_ca=str(data / "tls/ca.pem"), tls_cert=str(data / "tls/node.pem"),
                         tls_key=str(data / "tls/node.key"))
    ens = Ensemble.start(replicas, name=f"sec-{mode.replace('+', '-')}", data_dir=str(data / "data"),
                         run_dir=str(data / "run"), trace=False, **overrides)
    try:
        ens.wait_for_leader(60)
        warm = Workload(ens, in_flight=in_flight, size=size).start()
        time.sleep(2)
        warm.stop()
        wl = Workload(ens, in_flight=in_flight, size=size).start()
        time.sleep(seconds)
        r = wl.stop()
        lat = r.latencies_ms()
        problems = check_histories(ens.histories(), {**warm.result.acked, **r.acked})
        return {
            "mode": mode,
            "replicas": replicas,
            "in_flight": in_flight,
            "value_bytes": size,
            "seconds": seconds,
            "committed_per_s": round(r.throughput()),
            "p50_ms": round(percentile(lat, 50), 2),
            "p99_ms": round(percentile(lat, 99), 2),
            "failed": r.count("failed") + r.count("unknown"),
            "lost_or_disagreeing": len(problems),
        }
    finally:
        ens.stop()
        shutil.rmtree(data, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--in-flight", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {', '.join(MODES)}")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode {bad[0]!r}; choose from {', '.join(MODES)}")
    cfg = EnsembleConfig.load(None)
    print(machine_line())
    print(f"zabray: {args.replicas} replicas, configs/local.yaml but trace off, so only auth and TLS differ "
          f"(fsync {cfg.fsync}, tick_ms {cfg.tick_ms}); {args.size} B values, {args.in_flight} in flight, "
          f"2 s warm-up + {args.seconds:g} s per mode; modes {', '.join(modes)}", flush=True)
    rows = [measure(m, args.seconds, args.in_flight, args.size, args.replicas) for m in modes]
    base = next((r for r in rows if r["mode"] == "auth-off"), None)
    print(f"{'mode':10} {'commits/s':>10} {'vs off':>7} {'p50 ms':>8} {'p99 ms':>8} {'failed':>7} {'lost':>5}")
    for r in rows:
        rel = f"{100 * int(r['committed_per_s']) / int(base['committed_per_s']):.0f}%" if base else "-"  # type: ignore[call-overload]
        print(f"{r['mode']:10} {r['committed_per_s']:>10} {rel:>7} {r['p50_ms']:>8} {r['p99_ms']:>8} "
              f"{r['failed']:>7} {r['lost_or_disagreeing']:>5}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0 if all(r["lost_or_disagreeing"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
