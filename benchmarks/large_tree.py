"""A large ZooKeeper tree: snapshots taken under load, and a wiped replica rebuilt by SNAP.

Fills a 3-replica ZooKeeper service (default configuration, ``diff_window: 1000`` so a wiped
replica needs a SNAP) with ``--znodes`` znodes of ``--size`` bytes, then:

1. asks every replica for a snapshot while a client keeps 200 setData in flight, and reports how
   long the three took, in how many slices, and whether an election happened meanwhile;
2. kills a follower, wipes its disk, restarts it, and reports how long it took to be back in
   sync, how many SNAP frames the leader sent, in how many slices the wiped replica decoded
   them, and whether every replica's tree is the same. That comparison comes after the timing:
   digesting a tree walks it on the replica's loop (about 4 s at 300,000 znodes, long enough
   to cost an election that the figures above do not include).

    .venv/bin/python benchmarks/large_tree.py                  # 75,000 1 KB znodes (~80 MB)
    .venv/bin/python benchmarks/large_tree.py --znodes 20000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]  # benchmarks/storage.py
sys.path.insert(0, os.path.dirname(_here))


def _wait(what: str, cond: Any, timeout: float) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--znodes", type=int, default=75_000)
    ap.add_argument("--size", type=int, default=1024, help="bytes per znode")
    ap.add_argument("--config", default=None, help="zabray YAML config (default: configs/local.yaml)")
    args = ap.parse_args()

    import ray

    from zabray.config import EnsembleConfig
    from zabray.driver.ensemble import Ensemble
    from zabray.driver.rayhead import unniced_workers
    from zabray.experiments.machine import machine_line

    cfg = EnsembleConfig.load(args.config, service="zookeeper", diff_window=1000, snapshot_every=10**9)
    print(machine_line())
    print(f"zabray: 3 replicas, config {args.config or 'configs/local.yaml'} + service: zookeeper, diff_window 1000, "
          f"snapshots on request only (fsync {cfg.fsync}, trace {cfg.trace}); {args.znodes:,} znodes of {args.size} B")
    tmp = tempfile.mkdtemp(prefix="zabray-large-tree-")
    unniced_workers()  # replicas at nice 0, as `zabray up` and Ensemble.start run them
    ray.init(address="local", include_dashboard=False, log_to_driver=False, num_cpus=os.cpu_count() or 2)
    ens = Ensemble.start(3, config=cfg.to_dict(), name=f"large-{os.getpid()}", data_dir=f"{tmp}/data",
                         run_dir=f"{tmp}/run")
    try:
        leader = ens.wait_for_leader()
        s = ens.session(timeout=30, replica=leader)
        s.create("/big")
        value = b"v" * args.size

        async def fill(lo: int, hi: int) -> None:
            await asyncio.gather(*(s.create_async(f"/big/n{i:07d}", value) for i in range(lo, hi)))

        t0 = time.monotonic()
        for lo in range(0, args.znodes, 2000):
            asyncio.run(fill(lo, min(args.znodes, lo + 2000)))
        print(f"filled in {time.monotonic() - t0:.1f} s")

        def stats() -> dict[int, dict[str, int]]:
            return {r.sid: r.stats for r in ens.status()}

        epoch = max(r.epoch for r in ens.status())
        done = False
        written = [0]

        async def writes() -> None:
            while not done:
                i = written[0] % args.znodes
                await asyncio.gather(*(s.set_async(f"/big/n{j % args.znodes:07d}", value) for j in range(i, i + 200)))
                written[0] += 200

        th = threading.Thread(target=lambda: asyncio.run(writes()))
        th.start()
        for sid in (1, 2, 3):
            ens.snapshot(sid)
        took = _wait("the snapshots", lambda: all(v.get("snapshots_encoded", 0) >= 1 for v in stats().values()), 300)
        done = True
        th.join()
        slices = {k: v.get("snapshot_slices") for k, v in stats().items()}
        print(f"snapshots of all 3 replicas: {took:.1f} s under load ({written[0]:,} setData meanwhile), "
              f"slices per replica {slices}, epoch {epoch} -> {max(r.epoch for r in ens.status())}")

        leader = ens.wait_for_leader()
        victim = next(r.sid for r in ens.status() if r.sid != leader)
        ens.kill(victim)
        ens.restart(victim, fresh=True)

        def in_sync() -> bool:
            st = {r.sid: r for r in ens.status()}
            return st[victim].state == "FOLLOWING" and st[victim].applied == st[leader].applied

        took = _wait("the wiped replica", in_sync, 300)
        snaps = next(r for r in ens.status() if r.sid == leader).stats.get("sent_SNAP", 0)
        mine = stats()[victim]
        digests = ens._call("tree_digests")
        print(f"wiped replica {victim} back in sync in {took:.1f} s; the leader sent {snaps} SNAP frame(s), "
              f"decoded in {mine.get('snap_decode_slices', 0)} slice(s) ({mine.get('snaps_decoded', 0)} SNAP(s)); "
              f"trees {'identical' if len({d for d, _ in digests.values()}) == 1 else 'DIFFERENT'} on {len(digests)} replicas")
        s.close()
    finally:
        ens.stop(wipe=True)
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
