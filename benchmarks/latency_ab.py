"""One write in flight through two builds of zabray at once, request by request: which is faster.

    git worktree add /tmp/before <commit>
    .venv/bin/python benchmarks/latency_ab.py /tmp/before .            # setData via a follower
    .venv/bin/python benchmarks/latency_ab.py /tmp/before . --via leader --op create
    .venv/bin/python benchmarks/latency_ab.py . . --config-b /tmp/notrace.yaml   # what a setting costs

Each build runs its own 3-replica ZooKeeper service (``configs/local.yaml`` unless ``--config``:
fsync on, traces on, membership auth on), every replica in its own process as a Ray actor's would
be, with real TCP and real files. One client, a minimal pipelined ZooKeeper (jute) client,
alternates single requests between the two: A, B, B, A, A, B... Only one build works at a time, so
both see the same machine, whose CPU speed swings by up to 2x within seconds
(``benchmarks/results/notes-2026-11-24.md``): a change of a few percent in the time of one write, invisible between
runs of ``zk_wire.py`` or ``zookeeper.py``, shows here. The ensemble started second ran a few
percent slower whatever its build, so there are two sessions, the builds swapping places, and
the ratio is the geometric mean of the two. Below the latencies it prints each build's CPU per
write by replica role (every thread's user and system time, from ``/proc``): with one write in
flight the three replicas use more CPU than the write takes, and the table shows which of them a
change made cheaper or dearer. It compares zabray with zabray; the comparison with Apache
ZooKeeper is ``zookeeper.py``'s and ``zk_wire.py``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

_here = os.path.dirname(os.path.abspath(__file__))
# benchmarks/storage.py would shadow the `storage` package; a replica's build comes from PYTHONPATH.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]


ROLES = ("leader", "client's follower", "other follower")


@functools.cache
def _bench(name: str) -> Any:
    """benchmarks/<name>.py: cpu.py for its JuteClient, profile.py for its ``cpu_seconds`` (only
    the driver loads them: they put this checkout first on sys.path, which a replica of another
    build must not do)."""
    spec = importlib.util.spec_from_file_location(f"zabray_bench_{name}", os.path.join(_here, f"{name}.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


async def replica_main(spec: dict[str, Any]) -> None:
    """One replica in this process (the build on PYTHONPATH): its info on stdout, then its peers
    from stdin, then ``status`` lines answered with its status until stdin closes."""
    from actors.replica import ReplicaServer
    from zabray.wire.auth import Secret

    s = ReplicaServer(ensemble=spec["name"], sid=spec["sid"], config=spec["config"], voters=[1, 2, 3],
                      observers=[], data_dir=spec["data_dir"], run_dir=spec["run_dir"],
                      secret=Secret(bytes.fromhex(spec["secret"])))
    info = await s.start()
    print(json.dumps(info), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    s.set_peers({int(k): tuple(v) for k, v in json.loads(await reader.readline()).items()})
    while line := await reader.readline():
        if line.strip() == b"status":
            st = s.status()
            print(json.dumps({"established": bool(st.get("established")), "sid": spec["sid"]}), flush=True)
    await s.stop()


class Build:
    """A 3-replica ensemble of the build in ``root``, each replica a process of its own."""

    def __init__(self, tag: str, root: str, config: dict[str, Any], base: str) -> None:
        self.tag, self.root = tag, os.path.abspath(root)
        env = dict(os.environ, PYTHONPATH=self.root)
        secret = os.urandom(32).hex()
        self.procs = {}
        for sid in (1, 2, 3):
            spec = {"name": f"ab-{tag}", "sid": sid, "config": config, "secret": secret,
                    "data_dir": f"{base}/{tag}/r{sid}", "run_dir": f"{base}/{tag}/run"}
            self.procs[sid] = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--replica", json.dumps(spec)],
                                               cwd=self.root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               text=True)
        self.infos = {sid: json.loads(p.stdout.readline()) for sid, p in self.procs.items()}  # type: ignore[union-attr]
        peers = json.dumps({sid: i["quorum"] for sid, i in self.infos.items()})
        for p in self.procs.values():
            p.stdin.write(peers + "\n")  # type: ignore[union-attr]
            p.stdin.flush()  # type: ignore[union-attr]

    def leader(self) -> int | None:
        for sid, p in self.procs.items():
            p.stdin.write("status\n")  # type: ignore[union-attr]
            p.stdin.flush()  # type: ignore[union-attr]
            if json.loads(p.stdout.readline())["established"]:  # type: ignore[union-attr]
                return sid
        return None

    def cpu_s(self) -> dict[int, float]:
        """Each replica's user + system CPU seconds so far, every thread's (``/proc``)."""
        return {sid: _bench("profile").cpu_seconds(p.pid) for sid, p in self.procs.items()}

    def stop(self) -> None:
        for p in self.procs.values():
            p.stdin.close()  # type: ignore[union-attr]
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


async def connect(build: Build, via: str, op: str) -> tuple[Any, int, bytes, int]:
    """A session on the build's leader or a follower, the write to time on it, and the replica."""
    cpu = _bench("cpu")
    while (leader := build.leader()) is None:
        await asyncio.sleep(0.05)
    sid = leader if via == "leader" else min(s for s in build.infos if s != leader)
    client = await cpu.jute_session(*build.infos[sid]["zk_client"])
    return (client, *cpu.write_request(op), sid)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


async def session(args: argparse.Namespace, cfgs: tuple[dict[str, Any], dict[str, Any]], roots: tuple[str, str],
                  tags: tuple[str, str]) -> tuple[list[list[float]], list[dict[str, float]]]:
    """Both builds up, ``args.rounds`` rounds of alternating requests; each build's latencies,
    and its replicas' CPU seconds over the timed requests by role."""
    base = tempfile.mkdtemp(prefix="zabray-ab-")
    builds = [Build(tags[0], roots[0], cfgs[0], base), Build(tags[1], roots[1], cfgs[1], base)]
    try:
        conns = [await connect(b, args.via, args.op) for b in builds]

        async def one(i: int) -> float:
            client, code, body, _ = conns[i]
            t0 = time.perf_counter()
            await client.request(code, body)
            return (time.perf_counter() - t0) * 1e3

        for _ in range(args.pairs // 5):
            await one(0), await one(1)
        lat: list[list[float]] = [[], []]
        cpu0 = [b.cpu_s() for b in builds]
        for r in range(args.rounds):
            got: list[list[float]] = [[], []]
            for k in range(args.pairs):
                for i in ((0, 1) if (k + r) % 2 == 0 else (1, 0)):
                    got[i].append(await one(i))
            pa, pb = statistics.median(got[0]), statistics.median(got[1])
            print(f"  {tags[0]} in the first ensemble, round {r}: p50 {tags[0]} {pa:.3f} ms, {tags[1]} {pb:.3f} ms")
            lat[0] += got[0]
            lat[1] += got[1]
        cpu1 = [b.cpu_s() for b in builds]
        cpu: list[dict[str, float]] = []
        for i, build in enumerate(builds):
            leader, via = build.leader(), conns[i][3]
            by_role = dict.fromkeys(ROLES, 0.0)
            for sid in build.procs:
                role = "leader" if sid == leader else "client's follower" if sid == via else "other follower"
                by_role[role] += cpu1[i][sid] - cpu0[i][sid]
            cpu.append(by_role)
        for c, _, _, _ in conns:
            c.transport.close()
        return lat, cpu
    finally:
        for b in builds:
            b.stop()
        shutil.rmtree(base, ignore_errors=True)


async def run(args: argparse.Namespace) -> None:
    from zabray.config import EnsembleConfig
    from zabray.experiments.machine import machine_line

    cfg = EnsembleConfig.load(args.config).to_dict() | {"service": "zookeeper"}
    cfg_b = EnsembleConfig.load(args.config_b).to_dict() | {"service": "zookeeper"} if args.config_b else cfg
    rev = {r: subprocess.run(["git", "-C", r, "describe", "--always", "--dirty"], capture_output=True,
                             text=True).stdout.strip() or "?" for r in (args.a, args.b)}

    def described(c: dict[str, Any]) -> str:
        return f"fsync {c['fsync']}, trace {c['trace']}, auth {c['auth']}"

    print(machine_line())
    print(f"config: {args.config or 'configs/local.yaml'} + service: zookeeper ({described(cfg)}); "
          f"{len(_bench('cpu').VALUE)} B values, one {args.op} in flight "
          f"via {'a follower' if args.via == 'follower' else 'the leader'}")
    print(f"A: {os.path.abspath(args.a)} at {rev[args.a]}\nB: {os.path.abspath(args.b)} at {rev[args.b]}"
          + (f", config {args.config_b} ({described(cfg_b)})" if args.config_b else ""))
    print(f"two sessions of {args.rounds} rounds of {args.pairs} pairs (after {args.pairs // 5} untimed), "
          "the builds swapping ensembles between them")
    # Whichever ensemble starts second ran a few percent slower in every round here, whatever
    # its build: so each build runs once in each place, and the ratio is taken over both.
    (a1, b1), (ca1, cb1) = await session(args, (cfg, cfg_b), (args.a, args.b), ("A", "B"))
    (b2, a2), (cb2, ca2) = await session(args, (cfg_b, cfg), (args.b, args.a), ("B", "A"))
    lat = {"A": a1 + a2, "B": b1 + b2}
    print(f"\n{'build':<6}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'mean ms':>9}")
    for tag, xs in lat.items():
        print(f"{tag:<6}{pct(xs, 50):>9.3f}{pct(xs, 90):>9.3f}{pct(xs, 99):>9.3f}{statistics.fmean(xs):>9.3f}")
    first = pct(b1, 50) / pct(a1, 50)
    second = pct(b2, 50) / pct(a2, 50)
    print(f"B/A p50: {first:.3f} with A in the first ensemble, {second:.3f} with B in it; "
          f"over both {(first * second) ** 0.5:.3f} (below 1: B is faster)")
    # CPU is the other signal: at one request in flight each write wakes every replica, and the
    # three of them use more CPU than the write takes (benchmarks/results/latency_ab-2026-11-26.md).
    writes = {tag: len(xs) for tag, xs in lat.items()}
    print(f"\nCPU per write, us (user + system, every thread of the replica; /proc ticks of "
          f"{1e6 / os.sysconf('SC_CLK_TCK'):.0f} us, so read it over many writes)")
    print(f"{'build':<6}" + "".join(f"{role:>20}" for role in ROLES) + f"{'all':>9}")
    for tag, parts in (("A", (ca1, ca2)), ("B", (cb1, cb2))):
        per = {role: sum(p[role] for p in parts) * 1e6 / writes[tag] for role in ROLES}
        print(f"{tag:<6}" + "".join(f"{per[role]:>20.0f}" for role in ROLES) + f"{sum(per.values()):>9.0f}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--replica":
        import uvloop

        uvloop.run(replica_main(json.loads(sys.argv[2])))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="the first build: a checkout (a git worktree) of zabray")
    ap.add_argument("b", help="the second build")
    ap.add_argument("--op", choices=["setData", "create"], default="setData")
    ap.add_argument("--via", choices=["follower", "leader"], default="follower",
                    help="the replica the client is connected to")
    ap.add_argument("--pairs", type=int, default=1000, help="requests to each build per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per session (there are two)")
    ap.add_argument("--config", default=None, help="zabray YAML config (default: configs/local.yaml)")
    ap.add_argument("--config-b", default=None, help="B's own config (default: --config): one build, two configs")
    args = ap.parse_args()
    import uvloop

    uvloop.run(run(args))


if __name__ == "__main__":
    main()
