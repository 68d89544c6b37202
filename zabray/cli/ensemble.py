"""``zabray up | status | submit | kill | restart | pause | resume | partition | heal | down | demo``.

Exit codes: 0 done, 1 the operation failed (no quorum, not running, a check failed),
2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from zabray.cli import common
from zabray.errors import ConfigError, NotRunningError


def register(sub: argparse._SubParsersAction) -> None:
    def add(name: str, help_: str, func: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        common.add_name(p, creating=name == "up")
        p.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or a local one)")
        p.set_defaults(func=lambda a: common.guard(func, a))
        return p

    p = add("up", "start an ensemble (and a local Ray head if no cluster is running)", up)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--observers", type=int, default=0)
    p.add_argument("--config", default=None, help="YAML config (default configs/local.yaml)")
    p.add_argument("--service", choices=["broadcast", "zookeeper"], default=None,
                   help="what the replicas serve (default: the config's `service`, broadcast)")
    p.add_argument("--ray-port", type=int, default=None,
                   help="GCS port of the Ray head `up` starts when none runs (default: Ray's, 6379)")
    p = add("status", "show every replica's role, epoch and progress", status)
    p.add_argument("--json", action="store_true")
    p = add("submit", "replicate values (opaque bytes): their zxids, or with --count a summary", submit)
    p.add_argument("values", nargs="*", help="values to write (default: --count generated values)")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--replica", type=int, default=None,
                   help="send the writes to this replica (a follower forwards them to its leader)")
    p = add("kill", "crash a replica (its disk is kept): SID or 'leader'", kill)
    p.add_argument("sid")
    p = add("restart", "recover a killed replica from its disk", restart)
    p.add_argument("sid", type=int)
    p.add_argument("--fresh", action="store_true", help="wipe it and rebuild it from the leader")
    p.add_argument("--crash-point", action="append", default=[], metavar="POINT[#N]",
                   help="arm this crash point (`zabray faults points`) before the replica opens anything: "
                        "it dies the Nth time (default 1) it passes it; repeatable, the first reached fires")
    p = add("pause", "freeze a replica's process (SIGSTOP)", lambda a: _control(a, "pause"))
    p.add_argument("sid", type=int)
    p = add("resume", "thaw a paused replica (SIGCONT)", lambda a: _control(a, "resume"))
    p.add_argument("sid", type=int)
    p = add("partition", "cut links between groups, e.g. `zabray partition 1 2,3`", partition)
    p.add_argument("groups", nargs="+")
    add("heal", "restore every link", heal)
    p = add("down", "stop the ensemble (data stays on disk unless --wipe)", down)
    p.add_argument("--wipe", action="store_true", help="delete the replicas' data directories")
    p.add_argument("--stop-ray", action="store_true", help="also stop the local Ray head `up` started")
    p = add("demo", "3 replicas on an embedded Ray: writes, a leader kill, recovery, checks, a summary", demo)
    p.add_argument("--seconds", type=float, default=6.0, help="how long to write (default 6)")
    p.add_argument("--in-flight", type=int, default=200)
    p.add_argument("--simulated", action="store_true", help="run the deterministic simulator instead")
    p.add_argument("--keep", action="store_true", help="keep the run's traces (for `zabray check`)")


def up(args: argparse.Namespace) -> int:
    from zabray.driver.ensemble import Ensemble, preflight
    from zabray.driver.rayhead import running_head, start_head, stop_head

    overrides = {"service": args.service} if args.service else {}
    # Bad sizes, a bad name, config or key file fail before a Ray head is started for them.
    preflight(args.replicas, args.observers, args.name, args.config, **overrides)
    address = common.address_of(args)
    started = None
    if address is None and running_head() is None:
        started, dash = start_head(args.ray_port)
        print(f"started a local Ray head at {started}, dashboard http://127.0.0.1:{dash} "
              f"(`zabray down --stop-ray` stops it)")
    try:
        ens = Ensemble.start(args.replicas, args.observers, args.config, name=args.name, address=address,
                             **overrides)
    except Exception:
        if started is not None:  # a head started for nothing: leave the machine as it was
            import ray

            ray.shutdown()
            stop_head(started)
            print(f"stopped the Ray head at {started} again", file=sys.stderr)
        raise
    sid = ens.wait_for_leader(60)
    service = ens.info.get("config", {}).get("service", "broadcast")
    print(f"ensemble {args.name!r} is up ({service}): {args.replicas} voters, {args.observers} observers; "
          f"leader {sid}")
    if service == "zookeeper":
        print(f"ZooKeeper clients (kazoo hosts=, zkCli.sh -server): {ens.connect_string()}")
    print(f"traces: {ens.info['run_dir']}")
    return 0


def status(args: argparse.Namespace) -> int:
    rows = common.connect(args).status()
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
        return 0
    print(f"{'sid':>3} {'state':<10} {'phase':<16} {'epoch':>6} {'last zxid':>12} {'delivered':>12} "
          f"{'inc':>3} {'pid':>7}  {'client':<21} {'zookeeper':<21} node")
    for r in rows:
        mark = "~" if r.stale else ""
        blank = "?" if r.stale else "-"  # a replica that does not answer: its disk, or unknown
        epoch, last, applied = (f"{v}{mark}" if r.known else blank for v in (r.epoch, r.last_zxid, r.applied))
        client = f"{r.client[0]}:{r.client[1]}" if r.client else "-"
        zk = f"{r.zk_client[0]}:{r.zk_client[1]}" if r.zk_client else "-"
        print(f"{r.sid:>3} {r.state + ('*' if r.observer else ''):<10} {r.phase or '-':<16} {epoch:>6} "
              f"{last:>12} {applied:>12} {r.incarnation if r.incarnation is not None else '-':>3} "
              f"{r.pid or '-':>7}  {client:<21} {zk:<21} {r.node_label or (r.node or '-')[:12]}")
    if any(r.observer for r in rows):
        print("* observer")
    live = [r for r in rows if r.config_version is not None]
    if live:
        top = max(live, key=lambda r: r.config_version or 0)
        version = top.config_version or 0
        voters = ",".join(map(str, top.voters)) or "-"
        observers = ",".join(map(str, top.observers)) or "-"
        print(f"configuration version {version:x}: voters {voters}; observers {observers}"
              + ("" if version else " (the static one: no reconfiguration committed)"))
    if any(r.stale and r.known for r in rows):
        print("~ read from the disk of a replica that is down or paused, as `zabray inspect` reads it "
              "(delivered: what it knows committed)")
    for r in rows:
        if r.unknown is not None:
            print(f"? replica {r.sid}: {r.unknown}")
    lost = [r.sid for r in rows if r.lost]
    if lost:
        print(f"lost with their host, back when it is: replica(s) {', '.join(map(str, lost))}")
    return 0 if any(r.established_leader for r in rows) else 1


def submit(args: argparse.Namespace) -> int:
    import time

    if args.count < 1 or args.size < 1:
        raise ConfigError("--count and --size must be at least 1")
    ens = common.connect(args)
    values = [v.encode() for v in args.values] or [os.urandom(args.size) for _ in range(args.count)]
    t0 = time.monotonic()
    results = ens.submit_many(values, replica=args.replica)
    elapsed = time.monotonic() - t0
    failed = [(v, z) for v, z in zip(values, results, strict=True) if isinstance(z, BaseException)]
    for v, z in failed[:5]:
        print(f"{v[:20]!r}: {type(z).__name__}: {z}", file=sys.stderr)
    ok = [z for z in results if not isinstance(z, BaseException)]
    if args.values:
        for z in ok:
            print(z)
    elif ok:
        print(f"{len(ok):,} writes of {args.size:,} bytes committed in {elapsed:.2f} s "
              f"({len(ok) / max(elapsed, 1e-9):,.0f}/s, all in flight at once); zxids {min(ok)} .. {max(ok)}")
    if failed:
        print(f"{len(failed):,} of {len(values):,} writes failed", file=sys.stderr)
        return 1
    return 0


def kill(args: argparse.Namespace) -> int:
    ens = common.connect(args)
    if args.sid == "leader":
        sid = ens.leader()
        if sid is None:
            print("zabray kill: there is no established leader to kill", file=sys.stderr)
            return 1
    else:
        try:
            sid = int(args.sid)
        except ValueError:
            raise ConfigError(f"kill takes a replica id or 'leader', not {args.sid!r}") from None
    ens.kill(sid)
    print(f"killed replica {sid}")
    return 0


def restart(args: argparse.Namespace) -> int:
    points = []
    for spec in args.crash_point:
        point, _, nth = spec.partition("#")
        try:
            points.append((point, int(nth) if nth else 1))
        except ValueError:
            raise ConfigError(f"--crash-point takes POINT or POINT#N, not {spec!r}") from None
    common.connect(args).restart(args.sid, fresh=args.fresh, crash_points=points)
    armed = f" with crash point(s) {', '.join(args.crash_point)} armed" if points else ""
    print(f"restarted replica {args.sid}{armed}")
    return 0


_DONE = {"pause": "paused replica {} (SIGSTOP; `zabray resume {}` thaws it)",
         "resume": "resumed replica {}"}


def _control(args: argparse.Namespace, what: str) -> int:
    getattr(common.connect(args), what)(args.sid)
    print(_DONE[what].format(args.sid, args.sid))
    return 0


def heal(args: argparse.Namespace) -> int:
    common.connect(args).heal()
    print("healed: every link restored (partitions, one-way partitions, delays)")
    return 0


def partition(args: argparse.Namespace) -> int:
    try:
        groups = [[int(x) for x in g.split(",") if x] for g in args.groups]
    except ValueError:
        raise ConfigError("partition groups are comma lists of replica ids: `zabray partition 1 2,3`") from None
    if not groups or any(not g for g in groups):
        raise ConfigError("partition takes groups of replica ids: `zabray partition 1 2,3`")
    ens = common.connect(args)
    ens.partition(*groups)
    named = {s for g in groups for s in g}
    rest = [s for s in (*ens.info.get("voters", []), *ens.info.get("observers", [])) if int(s) not in named]
    shown = [*groups, rest] if rest else groups
    print("partitioned: " + " | ".join(",".join(map(str, g)) for g in shown) + " (`zabray heal` restores)")
    return 0


def down(args: argparse.Namespace) -> int:
    """Stop the ensemble; with ``--stop-ray``, then the local Ray head too, even when no
    ensemble was running (stopping the head is then all there is to do, and it is done)."""
    from zabray.driver.rayhead import running_head, stop_head

    try:
        wiped = common.connect(args).stop(wipe=args.wipe)
        print(f"ensemble {args.name!r} stopped" + (f"; wiped {len(wiped)} data directories" if args.wipe else
                                                  " (data kept; `--wipe` deletes it)"))
    except NotRunningError as e:
        if not args.stop_ray:
            raise
        # With no Ray cluster at all, "no local Ray head is running" below says all there is.
        if common.address_of(args) or running_head() is not None:
            print(f"no ensemble to stop: {e}")
    finally:
        if args.stop_ray:
            import ray

            # Leave the cluster before stopping it, or this driver's own Ray threads print
            # tracebacks as the head goes away under them.
            if ray.is_initialized():
                ray.shutdown()
            head = common.address_of(args) or running_head()
            if head is None:
                print("no local Ray head is running")
            else:
                n = stop_head(head)
                print(f"stopped the Ray head at {head} ({n} processes)" if n else
                      f"the Ray head at {head} runs elsewhere: stop it there")
    return 0


def demo(args: argparse.Namespace) -> int:
    from zabray.sim.demo import simulated_demo

    if args.simulated:
        return simulated_demo()
    from zabray.driver.demo import run_demo

    return run_demo(seconds=args.seconds, in_flight=args.in_flight, keep=args.keep)
