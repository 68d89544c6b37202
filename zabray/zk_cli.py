"""ZooKeeper verbs against a named ``service: zookeeper`` ensemble: create, get, set, ls, rm, stat.

Exit codes as in ``zabray.commands``: 0 done, 1 the ensemble said no (no node, node exists, bad
version, not empty, connection loss), 2 bad usage or config.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from zabray.commands import _guard


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    def add(name: str, help_: str, func: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--name", default="default", help="ensemble name (default: default)")
        p.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or a local one)")
        p.add_argument("path")
        p.set_defaults(func=lambda a: _guard(lambda b: _run(func, b), a))
        return p

    p = add("create", "create a znode (prints the created path)", _create)
    p.add_argument("data", nargs="?", default="")
    p.add_argument("--sequential", "-s", action="store_true")
    p = add("get", "print a znode's data", _get)
    p = add("set", "replace a znode's data", _set)
    p.add_argument("data")
    p.add_argument("--version", type=int, default=-1)
    add("ls", "list a znode's children", _ls)
    p = add("rm", "delete a znode", _rm)
    p.add_argument("--version", type=int, default=-1)
    add("stat", "print a znode's Stat as JSON", _stat)


def _run(func: Any, args: argparse.Namespace) -> int:
    from zabray.ensemble import Ensemble

    ens = Ensemble.connect(args.name, address=args.address)
    s = ens.session(timeout=10)
    try:
        s.sync()
        return int(func(s, args) or 0)
    finally:
        s.close()
        ens.close()


def _create(s: Any, a: argparse.Namespace) -> None:
    print(s.create(a.path, a.data.encode(), sequential=a.sequential))


def _get(s: Any, a: argparse.Namespace) -> None:
    data, _ = s.get(a.path)
    sys.stdout.write(data.decode(errors="replace") + "\n")


def _set(s: Any, a: argparse.Namespace) -> None:
    print(s.set(a.path, a.data.encode(), a.version).version)


def _ls(s: Any, a: argparse.Namespace) -> None:
    for c in s.children(a.path):
        print(c)


def _rm(s: Any, a: argparse.Namespace) -> None:
    s.delete(a.path, a.version)


def _stat(s: Any, a: argparse.Namespace) -> int:
    st = s.exists(a.path)
    if st is None:
        print(f"zabray stat: {a.path} does not exist", file=sys.stderr)
        return 1
    print(json.dumps(st.__dict__ if hasattr(st, "__dict__") else {f: getattr(st, f) for f in st.__slots__}))
    return 0
