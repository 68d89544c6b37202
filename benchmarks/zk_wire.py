"""The same ZooKeeper clients against zabray and Apache ZooKeeper 3.8, side by side.

A 3-replica zabray ensemble (``service: zookeeper``, otherwise the default configuration,
``configs/local.yaml``: fsync on, traces on) and a 3-server Apache ZooKeeper 3.8 (Debian's
package, forceSync on) run on this machine at the same time. For each client (ZooKeeper's Java
client through benchmarks/zkload, and kazoo), each operation (setData, create, getData with 1 KB
values) and each window (1,000 outstanding for throughput, 1 for latency), the load runs against
one server and then the other, the order alternating by round; the table gives the median over
rounds of ops/s and the ratio zabray / ZooKeeper.

    .venv/bin/python benchmarks/zk_wire.py                 # 3 rounds, 5 s per run
    .venv/bin/python benchmarks/zk_wire.py --rounds 1 --seconds 1 --clients java
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

# Run as a script, this directory would shadow the top-level ``storage`` package.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))
# benchmarks/zkclients.py, run by path: this directory is off sys.path (see above).
ZKCLIENTS = runpy.run_path(os.path.join(_here, "zkclients.py"))
median_of = ZKCLIENTS["median_of"]




def _load(client: str, hosts: str, op: str, size: int, outstanding: int, seconds: float,
          warmup: float) -> dict[str, Any]:
    fn = ZKCLIENTS["java_load" if client == "java" else "kazoo_load"]
    return dict(fn(hosts, op, size, outstanding, seconds=seconds, warmup=warmup))


def _print_ensemble_health(ens: Any, epoch0: int) -> None:
    """An election during the run would cost writes and fail some: say whether there was one,
    and how many snapshots the replicas took (encoded in slices, so none stalls a replica)."""
    st = ens.status()
    stats = [r.stats for r in st]
    print(f"zabray during the run: epoch {epoch0} -> {max(r.epoch for r in st)}, "
          f"replicas up {sum(r.alive for r in st)}/{len(st)}, snapshots "
          f"{sum(s.get('snapshots_encoded', 0) for s in stats)} "
          f"({sum(s.get('snapshot_slices', 0) for s in stats)} slices)")
    # What held a replica's loop (actors/stall_watch.py; the replicas' logs have each one's stack).
    print("event loops held over a quarter of sync_limit: "
          + ", ".join(f"replica {r.sid} {s.get('loop_stalls', 0)}x (longest {s.get('loop_stall_max_ms', 0)} ms, "
                      f"longest collection {s.get('gc_max_ms', 0)} ms)" for r, s in zip(st, stats, strict=True)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds per run")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--no-warm-round", dest="warm_round", action="store_false",
                    help="skip the uncounted warm-up run of each server (the first client, op and "
                         "outstanding) before round 0")
    ap.add_argument("--clients", nargs="+", default=["java", "kazoo"], choices=["java", "kazoo"])
    ap.add_argument("--ops", nargs="+", default=["setData", "create", "getData"],
                    choices=["setData", "create", "getData"])
    ap.add_argument("--outstanding", type=int, nargs="+", default=[1000, 1])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--config", default=None, help="zabray YAML config (default: configs/local.yaml)")
    ap.add_argument("--json", default=None, help="also write every run's result here")
    args = ap.parse_args()

    import ray

    from zabray.config import EnsembleConfig
    from zabray.driver import apache_zk
    from zabray.driver.ensemble import Ensemble
    from zabray.driver.rayhead import unniced_workers
    from zabray.experiments.machine import machine_line

    if not apache_zk.available():
        sys.exit("Apache ZooKeeper is not installed: run bin/bootstrap (it installs Debian's zookeeper)")
    cfg = EnsembleConfig.load(args.config, service="zookeeper")
    tmp = Path(tempfile.mkdtemp(prefix="zk-wire-"))
    print(machine_line())
    print(f"zabray: 3 replicas, config {args.config or 'configs/local.yaml'} + service: zookeeper "
          f"(fsync {cfg.fsync}, trace {cfg.trace}, auth {cfg.auth}, tls {cfg.tls}, tick_ms {cfg.tick_ms})")
    print("ZooKeeper: Apache ZooKeeper 3.8 (Debian), 3 servers, forceSync=yes")
    print(f"load: {args.size} B values, {args.seconds} s timed + {args.warmup} s warm-up per run, "
          f"{args.rounds} rounds (after {'an uncounted warm-up run per server' if args.warm_round else 'no warm-up run'}), "
          "alternating order")
    unniced_workers()  # replicas at nice 0, as `zabray up` and Ensemble.start run them
    ray.init(address="local", include_dashboard=False, log_to_driver=False, num_cpus=os.cpu_count() or 2)
    results: list[dict[str, Any]] = []
    try:
        with apache_zk.ApacheZooKeeper(tmp / "apache", servers=3) as azk:
            ens = Ensemble.start(3, config=cfg.to_dict(), name=f"zkwire-{os.getpid()}",
                                 data_dir=str(tmp / "zabray"), run_dir=str(tmp / "runs"))
            try:
                ens.wait_for_leader()
                epoch0 = last_epoch = max(r.epoch for r in ens.status())
                servers = {"zookeeper": azk.hosts, "zabray": ens.connect_string()}
                if args.warm_round:
                    # Not counted: a fresh ZooKeeper ensemble's JVMs run their first load at half
                    # speed or less (JIT), which would favour zabray in round 0.
                    for server in ("zookeeper", "zabray"):
                        r = _load(args.clients[0], servers[server], args.ops[0], args.size, args.outstanding[0],
                                  args.seconds, args.warmup)
                        print(f"  warm-up {args.clients[0]:<5} {args.ops[0]:<8} {args.outstanding[0]:>5} outstanding  "
                              f"{server:<9} {r['ops_per_s']:>9,.0f} ops/s  (not counted)", flush=True)
                for rnd in range(args.rounds):
                    order = ["zookeeper", "zabray"] if rnd % 2 == 0 else ["zabray", "zookeeper"]
                    for client in args.clients:
                        for op in args.ops:
                            for out in args.outstanding:
                                for server in order:
                                    r = _load(client, servers[server], op, args.size, out, args.seconds, args.warmup)
                                    r.update(server=server, client=client, outstanding=out, round=rnd)
                                    results.append(r)
                                    print(f"  round {rnd} {client:<5} {op:<8} {out:>5} outstanding  {server:<9} "
                                          f"{r['ops_per_s']:>9,.0f} ops/s  p50 {r['p50_ms']:.2f} ms  "
                                          f"errors {r['errors']}", flush=True)
                                    epoch = max(x.epoch for x in ens.status())
                                    if epoch != last_epoch:  # which load an election came under
                                        print(f"  zabray's epoch went {last_epoch} -> {epoch} by the end of this run "
                                              f"(leader now replica {ens.leader()})", flush=True)
                                        last_epoch = epoch
                _print_ensemble_health(ens, epoch0)
            finally:
                ens.stop(wipe=True)
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print()
    print(f"{'client':<6} {'op':<8} {'outstanding':>11} {'ZooKeeper ops/s':>16} {'zabray ops/s':>13} "
          f"{'zabray/ZK':>9} {'ZK p50 ms':>9} {'zabray p50 ms':>13}")
    for client in args.clients:
        for op in args.ops:
            for out in args.outstanding:
                where = {"client": client, "op": op, "outstanding": out}
                zk, zb = median_of(results, "zookeeper", "ops_per_s", **where), median_of(results, "zabray", "ops_per_s", **where)
                zl, bl = median_of(results, "zookeeper", "p50_ms", **where), median_of(results, "zabray", "p50_ms", **where)
                print(f"{client:<6} {op:<8} {out:>11} {zk:>16,.0f} {zb:>13,.0f} {zb / zk if zk else 0:>9.2f} "
                      f"{zl:>9.2f} {bl:>13.2f}")
    ZKCLIENTS["footer"](results)


if __name__ == "__main__":
    main()
