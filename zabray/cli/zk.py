"""ZooKeeper verbs against a named ``service: zookeeper`` ensemble: create, get, set, ls, rm,
stat, watch.

Exit codes as in ``zabray.cli.ensemble``: 0 done, 1 the ensemble said no (no node, node exists, bad
version, not empty, connection loss), 2 bad usage or config. Zxids print as ``epoch:counter``.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import time
from typing import Any

from zabray.cli import common
from zabray.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    def add(name: str, help_: str, func: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        common.add_name(p)
        p.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or a local one)")
        p.add_argument("path")
        p.set_defaults(func=lambda a: common.guard(lambda b: _run(func, b), a))
        return p

    p = add("create", "create a znode (prints the created path)", _create)
    p.add_argument("data", nargs="?", default="")
    p.add_argument("--sequential", "-s", action="store_true", help="append a 10-digit sequence number")
    p.add_argument("--ephemeral", "-e", action="store_true",
                   help="owned by this command's session: it stays until the command ends (Ctrl-C or --hold)")
    p.add_argument("--hold", type=float, default=None,
                   help="with --ephemeral: seconds to keep the session (default: until Ctrl-C)")
    p = add("get", "print a znode's data", _get)
    p.add_argument("--stat", action="store_true", help="also print its Stat (version, zxids)")
    p = add("set", "replace a znode's data; --version makes it conditional", _set)
    p.add_argument("data")
    p.add_argument("--version", type=int, default=-1,
                   help="only if the znode is at this version (a compare-and-set); -1: any")
    p = add("ls", "list a znode's children", _ls)
    p.add_argument("--recursive", "-R", action="store_true", help="the whole subtree, one path a line")
    p = add("rm", "delete a znode; --version makes it conditional", _rm)
    p.add_argument("--version", type=int, default=-1, help="only if the znode is at this version; -1: any")
    add("stat", "print a znode's Stat as JSON (zxids as epoch:counter)", _stat)
    p = add("watch", "wait for a change to a znode (or its children) and print each event", _watch)
    p.add_argument("--children", action="store_true", help="watch its list of children instead of its data")
    p.add_argument("--count", type=int, default=1, help="events to print before exiting (default 1)")
    p.add_argument("--timeout", type=float, default=None, help="give up after this many seconds (exit 1)")


def _run(func: Any, args: argparse.Namespace) -> int:

    ens = common.connect(args)
    s = ens.session(timeout=10)
    try:
        s.sync()
        return int(func(s, args) or 0)
    finally:
        s.close()
        ens.close()


def _stat_json(st: Any) -> dict[str, Any]:
    from zabray.driver.workload import trace_zxid

    d = {f: getattr(st, f) for f in ("czxid", "mzxid", "pzxid", "ctime", "mtime", "version", "cversion",
                                     "aversion", "ephemeral_owner", "data_length", "num_children")}
    for f in ("czxid", "mzxid", "pzxid"):
        d[f] = trace_zxid(int(d[f]))
    d["ephemeral_owner"] = f"0x{int(d['ephemeral_owner']):x}"
    return d


def _create(s: Any, a: argparse.Namespace) -> None:
    if a.hold is not None and not a.ephemeral:
        raise ConfigError("--hold only makes sense with --ephemeral")
    print(s.create(a.path, a.data.encode(), ephemeral=a.ephemeral, sequential=a.sequential), flush=True)
    if a.ephemeral:
        try:  # the message is inside: a Ctrl-C once it is out ends the hold cleanly, exit 0
            print(f"holding session 0x{s.session_id:x}: the znode lives until "
                  + ("Ctrl-C" if a.hold is None else f"{a.hold:g} s from now"), file=sys.stderr, flush=True)
            if a.hold is not None:
                time.sleep(a.hold)
            else:
                while True:
                    time.sleep(3600)
        except KeyboardInterrupt:
            pass


def _get(s: Any, a: argparse.Namespace) -> None:
    data, st = s.get(a.path)
    sys.stdout.write(("null" if data is None else data.decode(errors="replace")) + "\n")  # as zkCli
    if a.stat:
        print(json.dumps(_stat_json(st)))


def _set(s: Any, a: argparse.Namespace) -> None:
    print(s.set(a.path, a.data.encode(), a.version).version)


def _ls(s: Any, a: argparse.Namespace) -> None:
    if not a.recursive:
        for c in s.children(a.path):
            print(c)
        return
    stack = [a.path]
    while stack:  # depth first, children sorted, each full path once
        p = stack.pop()
        kids = sorted(s.children(p))
        if p != a.path:
            print(p)
        base = p.rstrip("/")
        stack.extend(f"{base}/{c}" for c in reversed(kids))


def _rm(s: Any, a: argparse.Namespace) -> None:
    s.delete(a.path, a.version)


def _stat(s: Any, a: argparse.Namespace) -> int:
    st = s.exists(a.path)
    if st is None:
        print(f"zabray stat: {a.path} does not exist", file=sys.stderr)
        return 1
    print(json.dumps(_stat_json(st)))
    return 0


def _watch(s: Any, a: argparse.Namespace) -> int:
    """Set a one-shot watch, print what fires (`type path zxid`), set it again, ``count`` times."""
    from zabray.driver.workload import trace_zxid

    if a.count < 1:
        raise ConfigError("--count must be at least 1")
    events: queue.Queue[Any] = queue.Queue()
    deadline = None if a.timeout is None else time.monotonic() + a.timeout

    def arm() -> None:
        if a.children:
            s.children(a.path, watch=events.put)
        else:
            s.exists(a.path, watch=events.put)

    arm()
    print(f"watching {a.path} ({'children' if a.children else 'data'})", file=sys.stderr, flush=True)
    for _ in range(a.count):
        try:
            ev = events.get(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            print(f"zabray watch: nothing happened to {a.path} within {a.timeout:g} s", file=sys.stderr)
            return 1
        print(f"{ev.type} {ev.path} {trace_zxid(int(ev.zxid))}", flush=True)
        arm()
    return 0
