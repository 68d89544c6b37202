"""zabray against Apache ZooKeeper 3.8 on this machine, in one run: durable 1 KB writes.

For each ensemble size, Apache ZooKeeper (Debian's package, forceSync on) and zabray in its
default configuration (``configs/local.yaml``: fsync on, traces on) run side by side, and the
load alternates between them round by round:

- ``broadcast``: zabray's atomic broadcast from its own client (1 KB values, ``--in-flight``
  outstanding, then one at a time) against ZooKeeper's setData from ZooKeeper's Java client with
  the same window: what each system commits durably, through its fastest client.
- ``service``: zabray's ZooKeeper service (``service: zookeeper``) against ZooKeeper, both
  driven by ZooKeeper's Java client doing setData: the same client, the same operation.

Each client talks to one server of a chosen role (``--client-on role``, the default): on the
``broadcast`` path both clients are at the leader (zabray's broadcast client always submits to
it), on the ``service`` path both are at a follower (ZooKeeper's usual case: a write is
forwarded to the leader), so one write in flight takes the same hops in both systems. With
``--client-on any`` ZooKeeper's Java clients pick a server at random, as applications do.

The table gives medians over rounds and the ratio zabray / ZooKeeper (above 1: zabray is
faster; for p50 latency, below 1 is better).

    .venv/bin/python benchmarks/zookeeper.py                         # 3, 5, 7 replicas, both paths
    .venv/bin/python benchmarks/zookeeper.py --replicas 3 --paths broadcast --rounds 1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import runpy
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, benchmarks/ would shadow the `storage` package with benchmarks/storage.py.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))



def _zabray_broadcast(ens: Any, in_flight: int, size: int, seconds: float, warmup: float) -> dict[str, Any]:
    from zabray.driver.workload import Workload, percentile

    warm = Workload(ens, in_flight=in_flight, size=size).start()
    time.sleep(warmup)
    warm.stop()
    wl = Workload(ens, in_flight=in_flight, size=size).start()
    time.sleep(seconds)
    r = wl.stop()
    lat = r.latencies_ms()
    return {"ops_per_s": r.throughput(), "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99),
            "errors": r.count("failed") + r.count("unknown")}


def _zk_hosts(azk: Any, path: str, replicas: int, client_on: str) -> str:
    """ZooKeeper's connect string: the server in the role zabray's client has on ``path``."""
    if client_on == "any" or replicas == 1:
        return str(azk.hosts)
    return str(azk.host_in_mode("leader" if path == "broadcast" else "follower"))


def _zabray_hosts(ens: Any, client_on: str) -> str:
    """zabray's ZooKeeper connect string for the service path: one follower's client port."""
    if client_on == "any":
        return str(ens.connect_string())
    rows = [r for r in ens.status() if r.zk_client and r.state == "FOLLOWING"]
    if not rows:
        return str(ens.connect_string())  # one replica: it leads
    host, port = rows[0].zk_client
    return f"{host}:{port}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, nargs="+", default=[3, 5, 7])
    ap.add_argument("--paths", nargs="+", default=["broadcast", "service"], choices=["broadcast", "service"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds per run")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--no-warm-round", dest="warm_round", action="store_false",
                    help="skip the uncounted warm-up round of each server before round 0")
    ap.add_argument("--in-flight", type=int, nargs="+", default=[1000, 1], help="outstanding writes per run")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--config", default=None, help="zabray YAML config (default: configs/local.yaml)")
    ap.add_argument("--json", default=None, help="also write every run's result here")
    ap.add_argument("--client-on", choices=["role", "any"], default="role",
                    help="role: both clients at the leader (broadcast path) or at a follower (service path); "
                         "any: the Java client picks a server at random")
    ap.add_argument("--zk-force-sync", choices=["yes", "no"], default="yes",
                    help="ZooKeeper's forceSync; 'no' with a zabray config of fsync: false compares the two "
                         "without the disk")
    args = ap.parse_args()

    import ray

    from zabray.config import EnsembleConfig
    from zabray.driver import apache_zk
    from zabray.driver.ensemble import Ensemble
    from zabray.driver.rayhead import unniced_workers
    from zabray.experiments.machine import machine_line

    if not apache_zk.available():
        sys.exit("Apache ZooKeeper is not installed: run bin/bootstrap (it installs Debian's zookeeper)")
    zkclients = runpy.run_path(os.path.join(_here, "zkclients.py"))
    java_load, median_of = zkclients["java_load"], zkclients["median_of"]
    cfg = EnsembleConfig.load(args.config)
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    print(machine_line(loop))
    print(f"zabray: config {args.config or 'configs/local.yaml'} (fsync {cfg.fsync}, trace {cfg.trace}, "
          f"auth {cfg.auth}, tls {cfg.tls}, tick_ms {cfg.tick_ms})")
    print(f"ZooKeeper: Apache ZooKeeper 3.8 (Debian), forceSync={args.zk_force_sync}, setData from its Java client")
    print(f"load: {args.size} B values, in flight {args.in_flight}, {args.seconds} s timed + {args.warmup} s "
          f"warm-up per run, {args.rounds} rounds (after {'an uncounted warm-up round' if args.warm_round else 'no warm-up round'}), "
          f"alternating order; sizes {args.replicas}, paths {args.paths}")
    print("clients: " + ("both at the leader (broadcast path), both at a follower (service path)"
                         if args.client_on == "role" else "ZooKeeper's Java client picks a server at random"))
    tmp = Path(tempfile.mkdtemp(prefix="zabray-bench-zk-"))
    unniced_workers()  # replicas at nice 0, as `zabray up` and Ensemble.start run them
    ray.init(address="local", include_dashboard=False, log_to_driver=False, num_cpus=os.cpu_count() or 2)
    results: list[dict[str, Any]] = []
    try:
        for n in args.replicas:
            with apache_zk.ApacheZooKeeper(tmp / f"apache-{n}", servers=n,
                                           force_sync=args.zk_force_sync == "yes") as azk:
                for path in args.paths:
                    pcfg = cfg.to_dict() | ({"service": "zookeeper"} if path == "service" else {})
                    ens = Ensemble.start(n, config=pcfg, name=f"zkbench-{n}-{path}-{os.getpid()}",
                                         data_dir=str(tmp / f"zabray-{n}-{path}"), run_dir=str(tmp / f"runs-{n}-{path}"))
                    try:
                        ens.wait_for_leader(60)
                        # Round -1 warms both servers up and is not counted: a fresh ZooKeeper
                        # ensemble's JVMs run its first load at half speed or less (JIT).
                        for rnd in range(-1 if args.warm_round else 0, args.rounds):
                            order = ["zookeeper", "zabray"] if rnd % 2 == 0 else ["zabray", "zookeeper"]
                            for out in args.in_flight if rnd >= 0 else args.in_flight[:1]:
                                for server in order:
                                    if server == "zookeeper":
                                        r = java_load(_zk_hosts(azk, path, n, args.client_on), "setData", args.size,
                                                      out, seconds=args.seconds, warmup=args.warmup)
                                    elif path == "broadcast":
                                        r = _zabray_broadcast(ens, out, args.size, args.seconds, args.warmup)
                                    else:
                                        r = java_load(_zabray_hosts(ens, args.client_on), "setData", args.size, out,
                                                      seconds=args.seconds, warmup=args.warmup)
                                    r = dict(r, server=server, replicas=n, path=path, in_flight=out, round=rnd)
                                    if rnd >= 0:
                                        results.append(r)
                                    label = f"round {rnd}" if rnd >= 0 else "warm-up"
                                    print(f"  {n} replicas {path:<9} {label:<8} {out:>5} in flight {server:<9} "
                                          f"{r['ops_per_s']:>9,.0f} writes/s  p50 {r['p50_ms']:.2f} ms  "
                                          f"errors {r['errors']}{'' if rnd >= 0 else '  (not counted)'}", flush=True)
                    finally:
                        ens.stop(wipe=True)
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print()
    print(f"{'replicas':>8} {'path':<9} {'in flight':>9} {'ZooKeeper w/s':>14} {'zabray w/s':>11} {'ratio':>6} "
          f"{'ZK p50 ms':>9} {'zabray p50':>10} {'ratio':>6}")
    for n in args.replicas:
        for path in args.paths:
            for out in args.in_flight:
                where = {"replicas": n, "path": path, "in_flight": out}
                zk, zb = median_of(results, "zookeeper", "ops_per_s", **where), median_of(results, "zabray", "ops_per_s", **where)
                zl, bl = median_of(results, "zookeeper", "p50_ms", **where), median_of(results, "zabray", "p50_ms", **where)
                print(f"{n:>8} {path:<9} {out:>9} {zk:>14,.0f} {zb:>11,.0f} {zb / zk if zk else 0:>6.2f} "
                      f"{zl:>9.2f} {bl:>10.2f} {bl / zl if zl else 0:>6.2f}")
    zkclients["footer"](results)


if __name__ == "__main__":
    main()
