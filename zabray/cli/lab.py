"""``zabray lab up|down|status|env|exec|cut|heal|partition|oneway|limit|crash|revive``."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

from zabray.cli.common import guard
from zabray.errors import ConfigError

_HOST_HELP = "host number (1 is the head)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="a lab of hosts on this machine (network namespaces) and its nemesis",
                       description="Hosts as network namespaces on a bridge, each with its own IP, disk and Ray "
                                   "node; cut, partition, slow down and crash them. Needs root.")
    lsub = p.add_subparsers(dest="lab_command", metavar="SUBCOMMAND")
    lsub.required = True

    def add(name: str, help_: str, func: Any) -> argparse.ArgumentParser:
        q = lsub.add_parser(name, help=help_, description=help_)
        q.add_argument("--name", default="lab", help="lab name (default: lab)")
        q.add_argument("--root", default=None, help="the labs' directory (default /var/tmp/zabray-lab)")
        q.set_defaults(func=lambda a: guard(func, a))
        return q

    q = add("up", "build the lab: hosts, bridge, a Ray node per host (host 1 the head)", up)
    q.add_argument("--hosts", type=int, default=3)
    q.add_argument("--subnet", default=None, help="a private /24 the lab owns (default 10.213.0.0/24)")
    q.add_argument("--cpus", type=int, default=1, help="CPUs each host's Ray node offers (default 1)")
    q.add_argument("--no-token", action="store_true", help="Ray without token authentication")
    q.add_argument("--health-period-ms", type=int, default=None, help="Ray's health_check_period_ms (3000)")
    q.add_argument("--health-timeout-ms", type=int, default=None, help="Ray's health_check_timeout_ms (10000)")
    q.add_argument("--health-failures", type=int, default=None, help="Ray's health_check_failure_threshold (5)")
    q.add_argument("--gcs-reconnect-s", type=int, default=None,
                   help="Ray's gcs_rpc_server_reconnect_timeout_s (60): how long a node lives without the head")
    q = add("down", "remove everything the lab made (processes, namespaces, links, disks)", down)
    q.add_argument("--keep-data", action="store_true", help="keep the hosts' disks")
    q = add("status", "the lab's hosts: address, cable, partition, limit, Ray node", status)
    q.add_argument("--json", action="store_true")
    add("env", "shell lines that point Ray drivers here at the lab (RAY_ADDRESS, its token)", env)
    q = add("exec", "run a command on a host (its network and disk, the lab's Ray): lab exec 1 -- zabray status",
            exec_)
    q.add_argument("host", type=int, help=_HOST_HELP)
    q.add_argument("argv", nargs=argparse.REMAINDER, help="the command (after --)")
    q = add("cut", "cut a host off from everything (its switch port down)", cut)
    q.add_argument("hosts", type=int, nargs="+")
    q = add("heal", "undo cuts and partitions (all, or reconnect only the hosts named)", heal)
    q.add_argument("hosts", type=int, nargs="*")
    q = add("partition", "groups of hosts that cannot reach each other: lab partition 1 2,3", partition)
    q.add_argument("groups", nargs="+")
    q = add("oneway", "what SRC hosts send to DST hosts is lost: lab oneway 1 2,3", oneway)
    q.add_argument("src")
    q.add_argument("dst")
    q = add("limit", "limit a host's bandwidth both ways (tc tbf); --delay-ms needs netem", limit)
    q.add_argument("host", type=int, help=_HOST_HELP)
    q.add_argument("--rate", default=None, help="e.g. 10mbit, 500kbit")
    q.add_argument("--delay-ms", type=float, default=None)
    q.add_argument("--off", action="store_true", help="remove the host's limit")
    q = add("crash", "power a host off: every process in it killed, its cable down; its disk stays", crash)
    q.add_argument("host", type=int, help=_HOST_HELP)
    q = add("revive", "power a crashed host back on: its Ray node joins again, with its disk", revive)
    q.add_argument("host", type=int, help=_HOST_HELP)
    q.add_argument("--no-wait", action="store_true", help="return before its Ray node has joined")


def _root(args: argparse.Namespace) -> str:
    from zabray.lab.lab import DEFAULT_ROOT

    return str(args.root or DEFAULT_ROOT)


def _lab(args: argparse.Namespace) -> Any:
    from zabray.lab import Lab
    from zabray.lab.net import check_privileges

    check_privileges()
    return Lab.find(args.name, _root(args))


def up(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from zabray.lab import Lab, LabSpec, RaySettings

    ray = RaySettings(token=not args.no_token)
    for key, attr in (("health_period_ms", "health_period_ms"), ("health_timeout_ms", "health_timeout_ms"),
                      ("health_failures", "health_failures"), ("gcs_reconnect_s", "gcs_reconnect_s")):
        if getattr(args, key) is not None:
            ray = replace(ray, **{attr: getattr(args, key)})
    kw: dict[str, Any] = {"name": args.name, "hosts": args.hosts, "root": _root(args), "cpus": args.cpus, "ray": ray}
    if args.subnet:
        kw["subnet"] = args.subnet
    lab = Lab.up(LabSpec(**kw))
    s = lab.spec
    print(f"lab {s.name!r} is up: {s.hosts} hosts in {s.subnet} ({', '.join(f'{h}={s.ip(h)}' for h in s.host_ids)}), "
          f"Ray head at {s.head_address}, this machine at {s.gateway_ip}")
    print(f"run on a host: zabray lab exec 1 -- zabray up --config configs/cluster.yaml; drivers here: "
          f"eval \"$(zabray lab env{'' if s.name == 'lab' else ' --name ' + s.name})\"")
    return 0


def down(args: argparse.Namespace) -> int:
    from zabray.lab import Lab

    gone = Lab.down(args.name, _root(args), keep_data=args.keep_data)
    print(f"lab {args.name!r} removed: {', '.join(gone) if gone else 'nothing was left'}")
    return 0


def status(args: argparse.Namespace) -> int:
    st = _lab(args).status()
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    print(f"lab {st['name']!r}: {st['subnet']}, head {st['head']}, this machine {st['gateway']}, dir {st['dir']}")
    print(f"  nemesis: partitions by {st['capabilities'].get('partitions')}, bandwidth by tbf, "
          f"netem (latency): {st['capabilities'].get('netem')}")
    print(f"  Ray declares a silent node dead after about {st['node_death_s']:.1f} s; a node without the head "
          f"lives {st['ray']['gcs_reconnect_s']} s")
    if st["partition"]:
        print(f"  partition: {st['partition']}")
    print(f"  {'host':>4} {'ip':<15} {'cable':<8} {'procs':>5} {'limit':<16} {'unreachable':<24} ray node")
    for h in st["hosts"]:
        lim = h["limit"]
        lim_s = "-" if not lim else " ".join(x for x in (
            f"{lim['rate_bps'] / 1e6:g}mbit" if lim["rate_bps"] else "", f"+{lim['delay_ms']:g}ms" if lim["delay_ms"] else "") if x)
        node = h["ray_node"] if h["ray_node"] in ("unknown", None) else h["ray_node"][:12]
        print(f"  {h['host']:>4} {h['ip']:<15} {h['cable']:<8} {h['processes']:>5} {lim_s:<16} "
              f"{','.join(h['unreachable']) or '-':<24} {node or 'none'}")
    return 0


def env(args: argparse.Namespace) -> int:
    for k, v in sorted(_lab(args).env().items()):
        print(f"export {k}={v}")
    return 0


def exec_(args: argparse.Namespace) -> int:
    from zabray.lab.nodes import host_argv, host_env

    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise ConfigError("lab exec: name a command after the host, e.g. zabray lab exec 1 -- zabray status")
    lab = _lab(args)
    lab.spec.check_host(args.host)
    sys.stdout.flush()
    return subprocess.run(host_argv(lab.spec, args.host, argv), env=host_env(lab.spec)).returncode


def cut(args: argparse.Namespace) -> int:
    lab = _lab(args)
    for h in args.hosts:
        lab.cut(h)
    print(f"cut off: host(s) {', '.join(map(str, args.hosts))}")
    return 0


def heal(args: argparse.Namespace) -> int:
    lab = _lab(args)
    if args.hosts:
        for h in args.hosts:
            lab.reconnect(h)
        print(f"reconnected: host(s) {', '.join(map(str, args.hosts))}")
    else:
        lab.heal()
        print("healed: every cut and partition")
    return 0


def partition(args: argparse.Namespace) -> int:
    from zabray.lab.plan import parse_groups

    lab = _lab(args)
    lab.partition(*parse_groups(args.groups))
    print(f"partitioned: {lab.state.partition}")
    return 0


def oneway(args: argparse.Namespace) -> int:
    from zabray.lab.plan import parse_groups

    lab = _lab(args)
    src, dst = parse_groups([args.src, args.dst])
    lab.oneway(src, dst)
    print(f"one-way: what {args.src} sends to {args.dst} is lost")
    return 0


def limit(args: argparse.Namespace) -> int:
    lab = _lab(args)
    if args.off:
        lab.unlimit(args.host)
        print(f"host {args.host}: no limit")
        return 0
    if args.rate is None and args.delay_ms is None:
        raise ConfigError("lab limit: give --rate (e.g. 10mbit), --delay-ms, or --off")
    lab.limit(args.host, args.rate, args.delay_ms)
    print(f"host {args.host}: limited to {args.rate or 'any rate'}"
          + (f", +{args.delay_ms:g} ms each way" if args.delay_ms else ""))
    return 0


def crash(args: argparse.Namespace) -> int:
    n = _lab(args).crash(args.host)
    print(f"host {args.host} crashed: {n} process(es) killed, its cable down; its disk is kept")
    return 0


def revive(args: argparse.Namespace) -> int:
    lab = _lab(args)
    lab.revive(args.host, wait=0 if args.no_wait else 120)
    print(f"host {args.host} is back" + ("" if args.no_wait else ", its Ray node joined"))
    return 0
