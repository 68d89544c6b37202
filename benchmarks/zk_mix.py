"""The ZooKeeper paper's read/write mix: throughput vs read percentage, 1 KB data, several sessions.

    .venv/bin/python benchmarks/zk_mix.py --replicas 3 5 --reads 0 50 90 100 --seconds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import tempfile
import time

# Run as a script, this directory would shadow the top-level ``storage`` package.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))


def run_mix(ens, sessions: int, read_pct: int, seconds: float, in_flight: int) -> float:
    ss = [ens.session(timeout=10) for _ in range(sessions)]
    for i, s in enumerate(ss):
        try:
            s.create(f"/b{i}", b"x" * 1024)
        except Exception:
            pass
    data = b"y" * 1024
    done = 0

    async def client(i: int) -> None:
        nonlocal done
        s = ss[i]
        end = time.monotonic() + seconds
        rnd = random.Random(i)

        async def one() -> None:
            nonlocal done
            while time.monotonic() < end:
                if rnd.randrange(100) < read_pct:
                    await s.get_async(f"/b{i}")
                else:
                    await s.set_async(f"/b{i}", data)
                done += 1

        await asyncio.gather(*(one() for _ in range(in_flight)))

    t0 = time.monotonic()
    async def all_clients() -> None:
        await asyncio.wait_for(asyncio.gather(*(client(i) for i in range(sessions))), seconds + 60)

    asyncio.run(all_clients())
    rate = done / (time.monotonic() - t0)
    for s in ss:
        s.close()
    return rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, nargs="+", default=[3, 5])
    ap.add_argument("--reads", type=int, nargs="+", default=[0, 50, 90, 100])
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--in-flight", type=int, default=25)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--fsync", action="store_true")
    a = ap.parse_args()
    import ray

    from zabray.config import EnsembleConfig
    from zabray.driver.ensemble import Ensemble
    from zabray.driver.rayhead import unniced_workers
    from zabray.experiments.machine import machine_line

    cfg = EnsembleConfig.load(None)
    print(machine_line())
    print(f"zabray: configs/local.yaml + service: zookeeper, trace off, fsync {a.fsync} (auth {cfg.auth}, "
          f"tick_ms {cfg.tick_ms}); {a.sessions} sessions x {a.in_flight} in flight, {a.seconds:g} s per mix",
          flush=True)
    unniced_workers()  # replicas at nice 0, as `zabray up` and Ensemble.start run them
    ray.init(namespace="zabray", include_dashboard=False, log_to_driver=False)

    for n in a.replicas:
        tmp = tempfile.mkdtemp(prefix="zkmix-")
        ens = Ensemble.start(n, name=f"zkmix-{n}-{os.getpid()}", data_dir=f"{tmp}/data", run_dir=f"{tmp}/run",
                             service="zookeeper", trace=False, fsync=a.fsync)
        try:
            ens.wait_for_leader()
            for r in a.reads:
                rate = run_mix(ens, a.sessions, r, a.seconds, a.in_flight)
                print(f"replicas={n} reads={r:3d}% sessions={a.sessions} in_flight={a.in_flight}/session "
                      f"fsync={a.fsync}: {rate:8.0f} ops/s", flush=True)
        finally:
            ens.stop()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
