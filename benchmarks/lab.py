"""zabray and Apache ZooKeeper 3.8 side by side in the lab, under the same nemesis, in one run.

The lab (``zabray.lab``: hosts as network namespaces, each with its own IP, disk and Ray node)
runs both systems, one server per host: zabray's ZooKeeper service (``configs/cluster.yaml``,
``service: zookeeper``) and Debian's ZooKeeper with the same failure detection (``tickTime`` x
``syncLimit`` = zabray's ``sync_limit``: 2 s). Clients are kazoo on this machine (the root
namespace, at the lab's .254), the same for both: ``--writers`` threads per system, each its own
session on the whole connect string, each writing one znode in a loop (setData, 100 bytes).
While both write, the nemesis acts on the hosts, so one cut hits both systems at once:

- ``bandwidth``: the host of each system's leader limited to ``--rate`` (tc tbf) for
  ``--phase-s``: write throughput then, against the same length before it;
- ``leader-cut``: the host of each system's leader cut off for ``--leader-cut-s``: the write
  pause, from the cut to the first write issued after it that succeeds;
- ``follower-cut``: a host holding followers of both cut off for ``--follower-cut-s`` (longer
  than Ray's node-death time with Ray's default health checks: zabray's replica is lost with its
  Ray node and must come back by itself), then healed: the time from the heal until that host's
  server answers ``srvr`` as a follower with the zxid the leader had at the heal.

Prints the configuration it ran and a table; ``--out`` writes both as Markdown, ``--timeline``
the raw acknowledgements and nemesis intervals as JSON (the notebook draws them).

    sudo .venv/bin/python benchmarks/lab.py --out benchmarks/results/lab-$(date +%F).md
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))

from zabray.driver.apache_zk import four_letter  # noqa: E402
from zabray.driver.lab_zookeeper import LabZooKeeper  # noqa: E402
from zabray.lab import Lab, LabSpec, RaySettings  # noqa: E402

log = logging.getLogger("benchmarks.lab")
SYSTEMS = ("zabray", "zookeeper")


@dataclass
class Writers:
    """``n`` kazoo sessions writing one znode each, as fast as they are answered; every attempt
    recorded as (start, end, ok)."""

    name: str
    hosts: str
    n: int
    session_timeout: float
    ops: list[tuple[float, float, bool]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _clients: list[Any] = field(default_factory=list)

    def start(self) -> Writers:
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        for i in range(self.n):
            k = KazooClient(hosts=self.hosts, timeout=self.session_timeout,
                            connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5))
            k.start(30)
            k.ensure_path(f"/lab/w{i}")
            self._clients.append(k)
            t = threading.Thread(target=self._loop, args=(k, f"/lab/w{i}"), daemon=True)
            self._threads.append(t)
        for t in self._threads:
            t.start()
        return self

    def _loop(self, k: Any, path: str) -> None:
        value = b"x" * 100
        while not self._stop.is_set():
            t0 = time.time()
            try:
                k.set(path, value)
                self.ops.append((t0, time.time(), True))
            except Exception:  # connection loss, session moved: try again, as an application would
                self.ops.append((t0, time.time(), False))
                time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        for k in self._clients:
            try:
                k.stop()
                k.close()
            except Exception:  # a session on a host still cut off
                pass

    def acked_between(self, a: float, b: float) -> int:
        return sum(1 for s, e, ok in self.ops if ok and a <= e < b)

    def resumed_after(self, t: float) -> float | None:
        """Seconds from ``t`` to the end of the first write issued after ``t`` that succeeded."""
        ends = [e for s, e, ok in self.ops if ok and s >= t]
        return min(ends) - t if ends else None


class Systems:
    """Both systems running in ``lab``: zabray's ensemble (driven from host 1, as an operator on
    the head would) and Apache ZooKeeper."""

    def __init__(self, lab: Lab, zk: LabZooKeeper, name: str = "bench") -> None:
        self.lab, self.zk, self.name = lab, zk, name

    def zabray(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.lab.exec(1, ["zabray", *args, "--name", self.name], timeout=timeout)

    def zabray_status(self) -> list[dict[str, Any]]:
        r = self.zabray("status", "--json")
        return list(json.loads(r.stdout)) if r.stdout.strip().startswith("[") else []

    def zabray_hosts(self) -> dict[int, int]:
        """replica sid -> lab host."""
        return {int(r["sid"]): self.lab.spec.host_of_ip(r["zk_client"][0]) or 0 for r in self.zabray_status()}

    def zabray_connect(self) -> str:
        return ",".join(f"{r['zk_client'][0]}:{r['zk_client'][1]}" for r in self.zabray_status())

    def zabray_ports(self) -> dict[int, int]:
        """lab host -> zabray's ZooKeeper port on it."""
        return {self.lab.spec.host_of_ip(r["zk_client"][0]) or 0: int(r["zk_client"][1]) for r in self.zabray_status()}

    def leader_host(self, system: str, ports: dict[int, int]) -> int | None:
        for h in self.lab.spec.host_ids:
            if self.mode(system, h, ports) == "leader":
                return h
        return None

    def srvr(self, system: str, host: int, ports: dict[int, int]) -> dict[str, str]:
        port = ports.get(host) if system == "zabray" else 2181
        if not port:
            return {}
        try:
            out = four_letter(self.lab.ip(host), port, "srvr", 1.0)
        except OSError:
            return {}
        return {ln.split(":", 1)[0]: ln.split(":", 1)[1].strip() for ln in out.splitlines() if ":" in ln}

    def mode(self, system: str, host: int, ports: dict[int, int]) -> str | None:
        return self.srvr(system, host, ports).get("Mode")

    def zxid(self, system: str, host: int, ports: dict[int, int]) -> int | None:
        z = self.srvr(system, host, ports).get("Zxid")
        return int(z, 16) if z else None

    def wait_all_serving(self, ports: dict[int, int], timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.mode(s, h, ports) in ("leader", "follower") for s in SYSTEMS for h in self.lab.spec.host_ids):
                return
            time.sleep(0.5)
        raise RuntimeError(f"not every server serves after {timeout} s")


def run(args: argparse.Namespace) -> dict[str, Any]:
    ray = RaySettings() if not args.fast_health else RaySettings(
        health_period_ms=1000, health_timeout_ms=1000, health_failures=5)
    spec = LabSpec(name=args.lab_name, hosts=args.hosts, subnet=args.subnet, ray=ray)
    out: dict[str, Any] = {"config": {}, "results": {s: {} for s in SYSTEMS}, "events": [], "ops": {}}
    lab = Lab.up(spec)
    writers: dict[str, Writers] = {}
    try:
        r = lab.exec(1, ["zabray", "up", "--config", os.path.join(os.path.dirname(_here), "configs", "cluster.yaml"), "--service", "zookeeper",
                         "--name", "bench"], timeout=300, env={"PYTHONPATH": os.path.dirname(_here)})
        if r.returncode != 0:
            raise RuntimeError(f"zabray up failed: {r.stderr.strip()[-500:]}")
        zk = LabZooKeeper(lab, tick_ms=args.zk_tick_ms, sync_limit=args.zk_sync_limit).start()
        sysm = Systems(lab, zk)
        ports = sysm.zabray_ports()
        out["config"] = {
            "hosts": args.hosts, "subnet": spec.subnet, "ray_health": spec.to_dict()["ray"],
            "ray_node_death_s": ray.node_death_s(), "zabray_config": "configs/cluster.yaml (tick 50 ms, sync_limit 40)",
            "zookeeper": f"tickTime={zk.tick_ms} syncLimit={zk.sync_limit} initLimit={zk.init_limit} forceSync=yes",
            "writers_per_system": args.writers, "session_timeout_s": args.session_timeout, "rate": args.rate,
            "phase_s": args.phase_s, "leader_cut_s": args.leader_cut_s, "follower_cut_s": args.follower_cut_s,
            "netem": lab.state.capabilities.get("netem"), "machine_load": os.getloadavg(),
        }
        writers = {"zabray": Writers("zabray", sysm.zabray_connect(), args.writers, args.session_timeout).start(),
                   "zookeeper": Writers("zookeeper", zk.connect_string(), args.writers, args.session_timeout).start()}

        def event(kind: str, host: int, start: float, end: float) -> None:
            out["events"].append({"kind": kind, "host": host, "start": start, "end": end})

        time.sleep(args.phase_s)  # warm

        if "bandwidth" in args.scenarios:
            for s in SYSTEMS:
                h = sysm.leader_host(s, ports)
                t0 = time.time()
                before = {x: writers[x].acked_between(t0 - args.phase_s, t0) / args.phase_s for x in SYSTEMS}
                lab.limit(h, args.rate)
                t1 = time.time()
                time.sleep(args.phase_s)
                t2 = time.time()
                lab.unlimit(h)
                event(f"limit {args.rate}", h, t1, t2)
                out["results"][s]["bandwidth"] = {
                    "host": h, "before_ops_s": before[s],
                    "limited_ops_s": writers[s].acked_between(t1, t2) / (t2 - t1)}
                time.sleep(args.phase_s)

        if "leader-cut" in args.scenarios:
            for s in SYSTEMS:
                h = sysm.leader_host(s, ports)
                other = next(x for x in SYSTEMS if x != s)
                lab.cut(h)
                t1 = time.time()  # once the port is down: a write issued before may still commit
                time.sleep(args.leader_cut_s)
                t2 = time.time()
                lab.heal()
                event("cut", h, t1, t2)
                res = {"host": h, "pause_s": writers[s].resumed_after(t1), "cut_s": args.leader_cut_s}
                also = sysm.mode(other, h, ports)
                res["same_cut_hit_other_as"] = also
                out["results"][s]["leader-cut"] = res
                lab.wait_nodes(lab.spec.host_ids, 300)
                sysm.wait_all_serving(ports, 300)
                time.sleep(args.phase_s)

        if "follower-cut" in args.scenarios:
            leaders = {s: sysm.leader_host(s, ports) for s in SYSTEMS}
            spare = [h for h in lab.spec.host_ids if h not in leaders.values()]
            h = spare[0] if spare else next(h for h in lab.spec.host_ids if h != leaders["zabray"])
            lab.cut(h)
            t1 = time.time()
            time.sleep(args.follower_cut_s)
            lab.heal()
            t2 = time.time()
            event("cut", h, t1, t2)
            target = {s: sysm.zxid(s, leaders[s], ports) if leaders[s] else None for s in SYSTEMS}
            # Back: serving as a follower with the leader's zxid at the heal, and still so 10 s later
            # (zabray's old process may answer for a moment before its raylet learns it was
            # declared dead and takes it down; the replica then comes back as a new process).
            since: dict[str, float | None] = {s: None for s in SYSTEMS}
            back: dict[str, float | None] = {s: None for s in SYSTEMS}
            deadline = time.monotonic() + args.recover_timeout
            while time.monotonic() < deadline and any(v is None for v in back.values()):
                for s in SYSTEMS:
                    if back[s] is not None:
                        continue
                    z = sysm.zxid(s, h, ports) if sysm.mode(s, h, ports) == "follower" else None
                    if z is not None and target[s] is not None and z >= target[s]:
                        since[s] = since[s] or time.time()
                        if time.time() - since[s] >= 10:
                            back[s] = since[s] - t2
                    else:
                        since[s] = None
                time.sleep(0.1)
            for s in SYSTEMS:
                out["results"][s]["follower-cut"] = {
                    "host": h, "cut_s": args.follower_cut_s, "was": "follower" if leaders[s] != h else "leader",
                    "back_after_heal_s": back[s]}
            time.sleep(args.phase_s)
        out["ops"] = {s: writers[s].ops for s in SYSTEMS}
        out["config"]["machine_load_after"] = os.getloadavg()
    finally:
        for w in writers.values():
            w.stop()
        if args.keep_lab:
            print(f"lab {spec.name!r} kept: zabray lab down --name {spec.name}")
        else:
            Lab.down(spec.name, spec.root)
    return out


def table(out: dict[str, Any]) -> str:
    res = out["results"]
    rows = ["| scenario | measure | zabray | Apache ZooKeeper 3.8 |", "|---|---|---|---|"]

    def f(v: Any, unit: str = "") -> str:
        return "never (within the wait)" if v is None else (f"{v:.2f}{unit}" if isinstance(v, float) else str(v))

    def get(s: str, sc: str, key: str) -> Any:
        return res[s].get(sc, {}).get(key)

    if any("bandwidth" in res[s] for s in SYSTEMS):
        rows.append(f"| bandwidth | writes/s before (leader's host unlimited) | {f(get('zabray', 'bandwidth', 'before_ops_s'))} "
                    f"| {f(get('zookeeper', 'bandwidth', 'before_ops_s'))} |")
        rows.append(f"| bandwidth | writes/s with the leader's host at {out['config']['rate']} | "
                    f"{f(get('zabray', 'bandwidth', 'limited_ops_s'))} | {f(get('zookeeper', 'bandwidth', 'limited_ops_s'))} |")
    if any("leader-cut" in res[s] for s in SYSTEMS):
        rows.append(f"| leader's host cut off ({out['config']['leader_cut_s']} s) | write pause, s | "
                    f"{f(get('zabray', 'leader-cut', 'pause_s'))} | {f(get('zookeeper', 'leader-cut', 'pause_s'))} |")
    if any("follower-cut" in res[s] for s in SYSTEMS):
        rows.append(f"| follower's host cut off ({out['config']['follower_cut_s']} s), healed | back in sync after the "
                    f"heal, s | {f(get('zabray', 'follower-cut', 'back_after_heal_s'))} | "
                    f"{f(get('zookeeper', 'follower-cut', 'back_after_heal_s'))} |")
    return "\n".join(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=3)
    p.add_argument("--scenarios", default="bandwidth,leader-cut,follower-cut")
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--session-timeout", type=float, default=4.0, help="kazoo's session timeout, s (both systems)")
    p.add_argument("--rate", default="10mbit")
    p.add_argument("--phase-s", type=float, default=10.0)
    p.add_argument("--leader-cut-s", type=float, default=15.0)
    p.add_argument("--follower-cut-s", type=float, default=60.0)
    p.add_argument("--recover-timeout", type=float, default=180.0)
    p.add_argument("--zk-tick-ms", type=int, default=400)
    p.add_argument("--zk-sync-limit", type=int, default=5)
    p.add_argument("--fast-health", action="store_true",
                   help="Ray's node health checks shortened (a cut node dead in ~6 s) instead of Ray's defaults")
    p.add_argument("--lab-name", default="bench")
    p.add_argument("--subnet", default="10.213.100.0/24")
    p.add_argument("--keep-lab", action="store_true")
    p.add_argument("--out", default=None, help="write the configuration and table as Markdown here")
    p.add_argument("--timeline", default=None, help="write acknowledgements and nemesis intervals as JSON here")
    args = p.parse_args()
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    logging.basicConfig(level=logging.WARNING)
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    out = run(args)
    conf = "\n".join(f"- {k}: {v}" for k, v in out["config"].items())
    text = (f"# zabray and Apache ZooKeeper 3.8 in the lab, {started}\n\n"
            f"`{' '.join(['benchmarks/lab.py', *sys.argv[1:]])}`\n\nConfiguration:\n\n{conf}\n\n{table(out)}\n")
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.timeline:
        Path(args.timeline).write_text(json.dumps({k: out[k] for k in ("config", "results", "events", "ops")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
