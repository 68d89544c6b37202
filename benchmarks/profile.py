"""Where a loaded ensemble spends its CPU: py-spy on the leader, a follower and the client at once.

Starts a local ensemble (default configuration unless ``--config``/``--no-trace``), runs the
broadcast load (1 KB values, ``--in-flight`` outstanding) and samples the three processes with
py-spy for ``--seconds``. Prints, per process, the CPU it used per committed write and its top
frames by own time and by inclusive time; the raw samples stay in ``--out`` (py-spy's "raw"
format: one ``stack count`` line per distinct stack, ready for flamegraph tools).

    .venv/bin/python benchmarks/profile.py                        # 3 replicas, tracing on
    .venv/bin/python benchmarks/profile.py --no-trace --in-flight 1 --top 30
    .venv/bin/python benchmarks/profile.py --service --via follower   # the ZooKeeper service path

``--service`` runs the ensemble as a ZooKeeper service and drives it with ZooKeeper's own Java
client (setData, one session connected to ``--via``: the leader, or a follower that forwards
every write); the client is then a JVM, which py-spy cannot sample, so only the replicas are shown.

``--ledger`` samples no stacks: it reads every process's CPU time from ``/proc`` before and
after the load (each thread, user and system time) and prints where the whole machine's CPU went
per write: each replica by role, the client (the JVM's threads, or this driver), Ray's own
processes, the kernel's threads. On a machine where every core is busy, that is the budget
a change has to cut.

    .venv/bin/python benchmarks/profile.py --service --ledger
    .venv/bin/python benchmarks/profile.py --service --ledger --apache   # Apache ZooKeeper's

py-spy needs permission to read another process's memory (root, or ptrace_scope 0).
"""

from __future__ import annotations

import argparse
import collections
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# Run as a script, benchmarks/ would shadow the `storage` package with benchmarks/storage.py.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
sys.path.insert(0, os.path.dirname(_here))



def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> dict[tuple[int, str, str], tuple[float, float]]:
    """(pid, process name, thread id) -> (user, system) CPU seconds of every thread alive now.
    Keyed by id, not name: a thread that renames itself (a JVM's do) is still the same thread."""
    tck = os.sysconf("SC_CLK_TCK")
    out: dict[tuple[int, str, str], tuple[float, float]] = {}
    cpu = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]  # the machine, all cores
    # Busy: user, nice, system, irq, softirq. Not idle or iowait, nor steal (the hypervisor's).
    out[(0, "", "")] = (sum(int(v) for i, v in enumerate(cpu) if i not in (3, 4, 7)) / tck, 0.0)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            for tid in os.listdir(f"/proc/{pid}/task"):
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                fields = stat.rsplit(")", 1)[1].split()
                key = (int(pid), comm, tid)
                out[key] = (int(fields[11]) / tck, int(fields[12]) / tck)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            pass  # exited meanwhile
    return out


def _script(pid: int) -> str:
    """The script a Python process runs, as a ledger label (Ray's log monitor, its dashboard...)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return "python"
    script = next((a for a in args[1:] if a.endswith(b".py")), b"python").decode(errors="replace")
    return ("Ray: " if "/ray/" in script else "other: ") + os.path.basename(script)


def print_ledger(before: dict[tuple[int, str, str], tuple[float, float]],
                 after: dict[tuple[int, str, str], tuple[float, float]],
                 roles: dict[int, str], writes: int, seconds: float) -> None:
    """CPU per write by process (replicas by role), with its system share; kernel threads and
    Ray's own processes grouped."""
    used: dict[str, float] = collections.defaultdict(float)
    sys_: dict[str, float] = collections.defaultdict(float)
    busy = after[(0, "", "")][0] - before[(0, "", "")][0]
    for key, (u1, s1) in after.items():
        u0, s0 = before.get(key, (0.0, 0.0))
        pid, comm, _ = key
        if pid == 0:
            continue
        label = roles.get(pid)
        if label is None:
            if comm.startswith(("kworker", "ksoftirqd", "jbd2", "kswapd", "kcompactd", "rcu", "kdamond")):
                label = "kernel threads"
            elif comm in ("raylet", "gcs_server") or comm.startswith(("ray::", "ray-", "dashboard")):
                label = f"Ray: {comm}" if comm in ("raylet", "gcs_server") else "Ray: other processes"
            elif comm == "java":
                label = "client: the JVM"
            else:
                label = _script(pid) if comm.startswith("python") else f"other: {comm}"
        used[label] += (u1 - u0) + (s1 - s0)
        sys_[label] += s1 - s0
    total = sum(used.values())
    print(f"\n== the machine: {busy / seconds:.2f} of {os.cpu_count()} cores busy (/proc/stat), "
          f"{1e6 * busy / writes:.0f} us of CPU per write; by process (their threads' times, which "
          f"sum to {total / seconds:.2f} cores):")
    print(f"   {'process':<36} {'us/write':>9} {'share':>6} {'system':>7}")
    for label, v in sorted(used.items(), key=lambda kv: -kv[1]):
        if v * 1e6 / writes < 0.5:
            continue
        print(f"   {label:<36} {1e6 * v / writes:>9.1f} {v / total:>6.0%} {sys_[label] / v if v else 0:>7.0%}")


def top_frames(raw: Path, k: int) -> tuple[int, list[tuple[str, float]], list[tuple[str, float]]]:
    """(samples, top own-time frames, top inclusive frames) of a py-spy raw file, as shares."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        own[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    share = (lambda c: [(f, n / total) for f, n in c.most_common(k)]) if total else (lambda c: [])
    return total, share(own), share(incl)


def apache_ledger(args: argparse.Namespace) -> None:
    """``--ledger`` for Apache ZooKeeper: the same Java client load on a follower (or the leader)
    of ``--replicas`` servers, writes counted from the leader's zxid (``srvr``)."""
    from zabray.driver import apache_zk

    print(f"Apache ZooKeeper 3.8 (Debian's package), forceSync on; {args.replicas} servers, {args.size} B values, "
          f"{args.in_flight} in flight, {args.seconds} s; ZooKeeper's Java client via a {args.via}")
    tmp = Path(tempfile.mkdtemp(prefix="zabray-bench-profile-"))
    try:
        with apache_zk.ApacheZooKeeper(tmp / "zk", servers=args.replicas, force_sync=True) as azk:
            lead = azk.host_in_mode("leader")
            hosts = lead if args.via == "leader" else azk.host_in_mode("follower")

            def zxid() -> int:
                host, port = lead.rsplit(":", 1)
                line = next(x for x in apache_zk.four_letter(host, int(port), "srvr").splitlines()
                            if x.startswith("Zxid:"))
                return int(line.split()[1], 16) & 0xFFFFFFFF  # one epoch throughout

            java = runpy.run_path(os.path.join(_here, "zkclients.py"))["java_load"]
            jvm = threading.Thread(target=java, args=(hosts, "setData", args.size, args.in_flight),
                                   kwargs={"seconds": args.seconds + 4, "warmup": 4}, daemon=True)
            jvm.start()
            time.sleep(6)  # as for zabray: the JVM's start, its session, its warm-up
            z0, m0, t0 = zxid(), machine_cpu(), time.monotonic()
            time.sleep(args.seconds)
            z1, m1, t1 = zxid(), machine_cpu(), time.monotonic()
            jvm.join()
            roles: dict[int, str] = {}
            for key in m1:
                try:
                    cmd = Path(f"/proc/{key[0]}/cmdline").read_bytes()
                except FileNotFoundError:
                    continue
                if b"ZkLoad" in cmd:
                    roles[key[0]] = "client: the JVM"
                elif b"QuorumPeerMain" in cmd:
                    roles[key[0]] = f"ZooKeeper server (pid {key[0]})"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    writes = z1 - z0
    print(f"{writes:,} writes in {t1 - t0:.1f} s ({writes / (t1 - t0):,.0f}/s)")
    print_ledger(m0, m1, roles, writes, t1 - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--in-flight", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--config", default=None, help="zabray YAML config (default: configs/local.yaml)")
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--service", action="store_true",
                    help="the ZooKeeper service path, driven by ZooKeeper's Java client (setData)")
    ap.add_argument("--via", choices=["leader", "follower"], default="follower",
                    help="with --service: the replica the Java client connects to (default follower)")
    ap.add_argument("--ledger", action="store_true",
                    help="no stacks: every process's CPU per write, from /proc (see the docstring)")
    ap.add_argument("--apache", action="store_true",
                    help="with --service --ledger: the same load and ledger on Apache ZooKeeper (forceSync on) instead")
    ap.add_argument("--out", type=Path, default=Path("profile-out"), help="directory for the raw samples")
    args = ap.parse_args()

    from zabray.config import EnsembleConfig
    from zabray.driver.ensemble import Ensemble
    from zabray.driver.workload import Workload

    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not args.ledger and not Path(spy).exists():
        sys.exit("py-spy is not installed: .venv/bin/pip install py-spy")
    if args.apache:
        if not (args.service and args.ledger):
            sys.exit("--apache needs --service --ledger")
        apache_ledger(args)
        return
    cfg = EnsembleConfig.load(args.config)
    trace = cfg.trace and not args.no_trace
    load = f"ZooKeeper's Java client via a {args.via}" if args.service else "zabray's client"
    print(f"config {args.config or 'configs/local.yaml'}: fsync {cfg.fsync}, trace {trace}, auth {cfg.auth}; "
          f"{args.replicas} replicas, {args.size} B values, {args.in_flight} in flight, {args.seconds} s; {load}")
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="zabray-bench-profile-"))
    config = cfg.to_dict() | ({"service": "zookeeper"} if args.service else {})
    ens = Ensemble.start(args.replicas, config=config, name=f"profile-{os.getpid()}",
                         data_dir=str(tmp / "data"), run_dir=str(tmp / "run"), trace=trace)
    try:
        leader = ens.wait_for_leader(60)
        status = ens.status()
        follower = next(s for s in status if s.sid != leader)
        pids = {"leader": next(s.pid for s in status if s.sid == leader), "follower": follower.pid}
        if args.service:
            via = next(s for s in status if s.sid == leader) if args.via == "leader" else follower
            assert via.zk_client is not None
            hosts = f"{via.zk_client[0]}:{via.zk_client[1]}"
            java = runpy.run_path(os.path.join(_here, "zkclients.py"))["java_load"]
            jvm = threading.Thread(target=java, args=(hosts, "setData", args.size, args.in_flight),
                                   kwargs={"seconds": args.seconds + 4, "warmup": 4}, daemon=True)
            jvm.start()
            time.sleep(6)  # the JVM's start, its session, its warm-up
        else:
            pids["client"] = os.getpid()
            wl = Workload(ens, in_flight=args.in_flight, size=args.size).start()
            time.sleep(2)  # past connection set-up and the first segment's allocation
        if args.ledger:
            roles = {s.pid: "replica: leader" if s.sid == leader else f"replica: follower {s.sid}"
                     for s in status if s.pid is not None}
            roles[os.getpid()] = "this driver (and its client)" if not args.service else "this driver"
            if args.service and via.pid is not None:
                roles[via.pid] += " (the client's)"
            applied0 = next(s.applied for s in ens.status() if s.sid == leader)
            m0, t0 = machine_cpu(), time.monotonic()
            time.sleep(args.seconds)
            m1, t1 = machine_cpu(), time.monotonic()
            writes = next(s.applied for s in ens.status() if s.sid == leader).counter - applied0.counter
            if args.service:
                jvm.join()
            else:
                wl.stop()
            print(f"{writes:,} writes in {t1 - t0:.1f} s ({writes / (t1 - t0):,.0f}/s)")
            print_ledger(m0, m1, roles, writes, t1 - t0)
            return
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        applied0 = next(s.applied for s in ens.status() if s.sid == leader)
        spies = {name: subprocess.Popen([spy, "record", "-p", str(pid), "-d", str(int(args.seconds)), "-r",
                                         str(args.rate), "-f", "raw", "-o", str(args.out / f"{name}.txt"),
                                         "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for name, pid in pids.items()}
        for name, p in spies.items():
            if p.wait() != 0:
                err = p.stderr.read().decode().strip() if p.stderr else ""
                sys.exit(f"py-spy failed on the {name}: {err[-300:]}")
        used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        # Writes committed while sampling: the leader's applied counter (one epoch throughout).
        writes = next(s.applied for s in ens.status() if s.sid == leader).counter - applied0.counter
        if args.service:
            jvm.join()
        else:
            wl.stop()
    finally:
        ens.stop(wipe=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{writes:,} writes completed while sampling ({writes / args.seconds:,.0f}/s, slowed by the sampling)")
    for name in pids:
        total, own, incl = top_frames(args.out / f"{name}.txt", args.top)
        per = 1e6 * used[name] / writes if writes else float("nan")
        print(f"\n== {name}: {per:.0f} us of CPU per write (whole process, Ray's threads included), "
              f"{total} samples")
        print("   own time")
        for f, s in own:
            print(f"   {100 * s:5.1f}%  {f}")
        print("   inclusive")
        for f, s in incl:
            print(f"   {100 * s:5.1f}%  {f}")
    print(f"\nraw samples: {args.out}/{{{','.join(pids)}}}.txt")


if __name__ == "__main__":
    main()
