"""zabray and Apache ZooKeeper 3.8 through the same membership changes, in one run: the write pause.

Each system runs the ZooKeeper service with reconfiguration on (ZooKeeper: ``reconfigEnabled=true``,
``standaloneEnabled=false``, Debian's package, forceSync on; zabray: ``reconfig_enabled``, fsync
on, ``configs/local.yaml`` otherwise) as a 3-voter ensemble, under the same steady write load:
kazoo setData of 1 KB on one znode with ``--in-flight`` writes outstanding, from a client on a
follower that no change removes. Then the same two changes, one after the other:

1. **add a voter:** start a fourth server outside the configuration (ZooKeeper: a server whose
   initial configuration is the current one plus itself, as the reconfiguration guide says;
   zabray: ``Ensemble.add_replica``, which also places it on a Ray node), wait until it is
   synced, and commit the reconfiguration that makes it a voter;
2. **remove the leader:** one reconfiguration removing the current leader, which hands the
   leadership over to a voter it designates.

For each change it prints how long the change took (from asking to the reconfiguration's
answer) and the **write pause**: the longest stretch, from asking until 2 s after the answer, in
which no write was acknowledged to the client (its own clock, nothing of the servers'). Writes
that failed (a connection lost in a hand-off) are counted; kazoo retries them on its next server.

    .venv/bin/python benchmarks/reconfig.py                 # both systems, the default load
    .venv/bin/python benchmarks/reconfig.py --systems zabray --in-flight 32
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as a script, benchmarks/ would shadow the `storage` package with benchmarks/storage.py.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # super:test
AFTER = 2.0  # seconds after a change's answer its pause window extends


class Writer:
    """kazoo setData of ``size`` bytes with ``in_flight`` outstanding; every acknowledgement's time."""

    def __init__(self, hosts: str, in_flight: int, size: int) -> None:
        from kazoo.client import KazooClient

        self.client = KazooClient(hosts=hosts, timeout=20)
        self.client.start(timeout=60)
        self.client.ensure_path("/bench")
        self.in_flight = in_flight
        self.value = os.urandom(size)
        self.acks: list[float] = []
        self.failed = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(in_flight)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._slots.acquire(timeout=0.5):
                continue
            try:
                res = self.client.set_async("/bench", self.value)
            except Exception:  # the client is reconnecting: try again shortly
                self._slots.release()
                self.failed += 1
                time.sleep(0.05)
                continue
            res.rawlink(self._done)

    def _done(self, res: Any) -> None:
        t = time.monotonic()
        try:
            res.get(timeout=0)
            with self._lock:
                self.acks.append(t)
        except Exception:
            self.failed += 1
        self._slots.release()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.stop()
        self.client.close()

    def pause(self, start: float, end: float) -> float:
        """The longest time in [start, end] with no write acknowledged."""
        with self._lock:
            done = sorted(t for t in self.acks if start <= t <= end)
        edges = [start, *done, end]
        return max(b - a for a, b in zip(edges, edges[1:], strict=False))

    def rate(self, start: float, end: float) -> float:
        with self._lock:
            return sum(1 for t in self.acks if start <= t <= end) / max(end - start, 1e-9)


def _measure(writer: Writer, name: str, change: Callable[[], str]) -> dict[str, Any]:
    before = writer.rate(time.monotonic() - 3, time.monotonic())
    failed0 = writer.failed
    t0 = time.monotonic()
    detail = change()
    t1 = time.monotonic()
    time.sleep(AFTER)
    return {"change": name, "took_s": t1 - t0, "pause_s": writer.pause(t0, t1 + AFTER),
            "rate_before": before, "rate_after": writer.rate(t1, t1 + AFTER), "failed": writer.failed - failed0,
            "detail": detail}


def run_apache(in_flight: int, size: int, warmup: float) -> list[dict[str, Any]]:
    from kazoo.client import KazooClient

    from zabray.driver import apache_zk

    root = Path(tempfile.mkdtemp(prefix="zk-reconfig-"))
    with apache_zk.ApacheZooKeeper(root, servers=3, reconfig=True, super_digest=SUPER_DIGEST) as zk:
        leader = zk.host_in_mode("leader")
        hosts = zk.hosts.split(",")
        follower = next(h for h in hosts if h != leader)
        su = KazooClient(hosts=follower, timeout=20, auth_data=[("digest", "super:test")])
        su.start(timeout=60)
        w = Writer(follower, in_flight, size).start()
        time.sleep(warmup)

        def add() -> str:
            sid = zk.add_server()  # returns once it serves: connected to the leader and synced
            data, _ = su.reconfig(joining=zk.server_line(sid), leaving=None, new_members=None)
            return f"server.{sid} added: version {data.decode().splitlines()[-1].split('=')[1]}"

        def remove_leader() -> str:
            lead = hosts.index(zk.host_in_mode("leader")) + 1
            data, _ = su.reconfig(joining=None, leaving=str(lead), new_members=None)
            return f"leader server.{lead} removed: version {data.decode().splitlines()[-1].split('=')[1]}"

        out = [_measure(w, "add a voter (3 -> 4)", add), _measure(w, "remove the leader (4 -> 3)", remove_leader)]
        w.stop()
        su.stop()
        su.close()
    return out


def run_zabray(in_flight: int, size: int, warmup: float) -> list[dict[str, Any]]:
    from zabray.driver.ensemble import Ensemble

    tmp = Path(tempfile.mkdtemp(prefix="zabray-reconfig-"))
    ens = Ensemble.start(3, name=f"bench-reconfig-{os.getpid()}", service="zookeeper", reconfig_enabled=True,
                         zk_super_digest=SUPER_DIGEST, data_dir=str(tmp / "data"), run_dir=str(tmp / "run"))
    try:
        leader = ens.wait_for_leader(60)
        st = sorted(ens.status(), key=lambda s: s.sid)
        follower = next(s for s in st if s.sid != leader)
        assert follower.zk_client is not None
        w = Writer(f"{follower.zk_client[0]}:{follower.zk_client[1]}", in_flight, size).start()
        time.sleep(warmup)

        def add() -> str:
            sid = ens.add_replica()
            return f"replica {sid} added: version {ens.status()[0].config_version or 0:x}"

        def remove_leader() -> str:
            lead = ens.wait_for_leader(60)
            version = ens.remove_replica(lead)
            return f"leader replica {lead} removed: version {version:x}"

        out = [_measure(w, "add a voter (3 -> 4)", add), _measure(w, "remove the leader (4 -> 3)", remove_leader)]
        w.stop()
    finally:
        ens.stop(wipe=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default="apache,zabray", help="comma-separated: apache, zabray")
    ap.add_argument("--in-flight", type=int, default=16)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds of load before the first change")
    args = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    print(f"configuration: 3 voters, ZooKeeper service, reconfiguration on, fsync on; load: kazoo setData of "
          f"{args.size} B, {args.in_flight} in flight, from a client on a follower; a change's pause window "
          f"runs from asking to {AFTER:g} s after its answer; machine: {os.cpu_count()} cores, load1 "
          f"{os.getloadavg()[0]:.2f}")
    rows = []
    for system in args.systems.split(","):
        runner = {"apache": run_apache, "zabray": run_zabray}[system.strip()]
        for r in runner(args.in_flight, args.size, args.warmup):
            rows.append({"system": system.strip(), **r})
    print(f"{'system':<8} {'change':<28} {'took s':>7} {'pause s':>8} {'writes/s before':>16} "
          f"{'after':>7} {'failed':>6}  detail")
    for r in rows:
        print(f"{r['system']:<8} {r['change']:<28} {r['took_s']:7.2f} {r['pause_s']:8.3f} {r['rate_before']:16.0f} "
              f"{r['rate_after']:7.0f} {r['failed']:6d}  {r['detail']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
