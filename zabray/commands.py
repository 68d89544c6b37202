"""``zabray up | status | submit | kill | restart | pause | resume | partition | heal | down | demo``.

Exit codes: 0 done, 1 the operation failed (no quorum, not running, a check failed),
2 bad usage or configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Any

from zabray.errors import ConfigError, ZabError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    def add(name: str, help_: str, func: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--name", default="default", help="ensemble name (default: default)")
        p.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or a local one)")
        p.set_defaults(func=lambda a: _guard(func, a))
        return p

    p = add("up", "start an ensemble (and a local Ray head if no cluster is running)", up)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--observers", type=int, default=0)
    p.add_argument("--config", default=None, help="YAML config (default configs/local.yaml)")
    p = add("status", "show every replica's role, epoch and progress", status)
    p.add_argument("--json", action="store_true")
    p = add("submit", "replicate values (opaque bytes) and print their zxids", submit)
    p.add_argument("values", nargs="*", help="values to write (default: --count generated values)")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--size", type=int, default=1024)
    p = add("kill", "crash a replica (its disk is kept): SID or 'leader'", kill)
    p.add_argument("sid")
    p = add("restart", "recover a killed replica from its disk", restart)
    p.add_argument("sid", type=int)
    p.add_argument("--fresh", action="store_true", help="wipe it and rebuild it from the leader")
    p = add("pause", "freeze a replica's process (SIGSTOP)", lambda a: _control(a, "pause"))
    p.add_argument("sid", type=int)
    p = add("resume", "thaw a paused replica (SIGCONT)", lambda a: _control(a, "resume"))
    p.add_argument("sid", type=int)
    p = add("partition", "cut links between groups, e.g. `zabray partition 1 2,3`", partition)
    p.add_argument("groups", nargs="+")
    add("heal", "restore every link", lambda a: _ens(a).heal())
    p = add("down", "stop the ensemble (data stays on disk)", down)
    p.add_argument("--stop-ray", action="store_true", help="also stop the local Ray head `up` started")
    p = add("demo", "3 replicas on an embedded Ray: writes, a leader kill, recovery, checks, a summary", demo)
    p.add_argument("--seconds", type=float, default=6.0, help="how long to write (default 6)")
    p.add_argument("--in-flight", type=int, default=200)
    p.add_argument("--simulated", action="store_true", help="run the deterministic simulator instead")


def _guard(func: Any, args: argparse.Namespace) -> int:
    try:
        return int(func(args) or 0)
    except ConfigError as e:
        print(f"zabray {args.command}: {e}", file=sys.stderr)
        return 2
    except ZabError as e:
        print(f"zabray {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def _ens(args: argparse.Namespace) -> Any:
    from zabray.ensemble import Ensemble

    return Ensemble.connect(args.name, address=_address(args))


def _address(args: argparse.Namespace) -> str | None:
    return args.address or os.environ.get("RAY_ADDRESS") or ("auto" if _head_running() else None)


def _head_running() -> bool:
    ray_bin = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
    if ray_bin is None:
        return False
    r = subprocess.run([ray_bin, "status"], capture_output=True, text=True, timeout=60)
    return r.returncode == 0


def up(args: argparse.Namespace) -> int:
    from zabray.ensemble import Ensemble

    address = args.address or os.environ.get("RAY_ADDRESS")
    if address is None:
        if not _head_running():
            ray_bin = shutil.which("ray", path=os.path.dirname(sys.executable)) or "ray"
            print("starting a local Ray head (`zabray down --stop-ray` stops it)")
            subprocess.run([ray_bin, "start", "--head", "--include-dashboard=false", "--disable-usage-stats"],
                           check=True, capture_output=True)
        address = "auto"
    ens = Ensemble.start(args.replicas, args.observers, args.config, name=args.name, address=address)
    sid = ens.wait_for_leader(60)
    print(f"ensemble {args.name!r} is up: {args.replicas} voters, {args.observers} observers; leader {sid}")
    print(f"traces: {ens.info['run_dir']}")
    return 0


def status(args: argparse.Namespace) -> int:
    rows = _ens(args).status()
    if args.json:
        print(json.dumps([r.raw for r in rows], indent=2, default=str))
        return 0
    print(f"{'sid':>3} {'state':<10} {'phase':<16} {'epoch':>5} {'last zxid':>12} {'delivered':>12} "
          f"{'inc':>3} {'pid':>7}  node")
    for r in rows:
        print(f"{r.sid:>3} {r.state + ('*' if r.observer else ''):<10} {r.phase or '-':<16} {r.epoch:>5} "
              f"{r.last_zxid!s:>12} {r.applied!s:>12} {r.incarnation if r.incarnation is not None else '-':>3} "
              f"{r.pid or '-':>7}  {(r.node or '-')[:12]}")
    return 0 if any(r.established_leader for r in rows) else 1


def submit(args: argparse.Namespace) -> int:
    ens = _ens(args)
    values = [v.encode() for v in args.values] or [os.urandom(args.size) for _ in range(args.count)]
    for v, z in zip(values, ens.submit_many(values), strict=True):
        if isinstance(z, BaseException):
            print(f"{v[:20]!r}: {type(z).__name__}: {z}", file=sys.stderr)
            return 1
        print(z)
    return 0


def kill(args: argparse.Namespace) -> int:
    ens = _ens(args)
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
    _ens(args).restart(args.sid, fresh=args.fresh)
    print(f"restarted replica {args.sid}")
    return 0


def _control(args: argparse.Namespace, what: str) -> int:
    getattr(_ens(args), what)(args.sid)
    return 0


def partition(args: argparse.Namespace) -> int:
    try:
        groups = [[int(x) for x in g.split(",") if x] for g in args.groups]
    except ValueError:
        raise ConfigError("partition groups are comma lists of replica ids: `zabray partition 1 2,3`") from None
    _ens(args).partition(*groups)
    return 0


def down(args: argparse.Namespace) -> int:
    try:
        _ens(args).stop()
        print(f"ensemble {args.name!r} stopped")
    finally:
        if args.stop_ray:
            ray_bin = shutil.which("ray", path=os.path.dirname(sys.executable)) or "ray"
            subprocess.run([ray_bin, "stop"], capture_output=True)
    return 0


def demo(args: argparse.Namespace) -> int:
    if args.simulated:
        from zabray.sim.demo import simulated_demo

        return simulated_demo()
    from zabray.demo import run_demo

    return run_demo(seconds=args.seconds, in_flight=args.in_flight)
