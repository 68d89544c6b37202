"""``zabray reconfig``: change an ensemble's membership (``Ensemble.add_replica``, ``remove_replica``,
``reconfigure``, or ZooKeeper's reconfig as it is), and show the configuration in force.

Exit codes: 0 done, 1 refused by the ensemble (RECONFIG_IN_PROGRESS, NEW_CONFIG_NO_QUORUM,
BAD_VERSION) or it failed (no quorum, not running), 2 bad usage (BAD_ARGUMENTS, and
RECONFIG_DISABLED: the ensemble's configuration has reconfiguration off). Every refusal is one
line naming ZooKeeper's error.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from zabray.cli import common
from zabray.errors import ConfigError, ReconfigError

if TYPE_CHECKING:
    from zabray.driver.ensemble import Ensemble


def register(sub: argparse._SubParsersAction) -> None:
    help_ = "change the membership: add, remove, set voters/observers, or ZooKeeper's reconfig"
    p = sub.add_parser("reconfig", help=help_, description=help_)
    common.add_name(p)
    p.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or a local one)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--add", nargs="?", const="participant", choices=["participant", "observer"],
                      help="start a replica on a Ray node, sync it, then add it (default: as a voter)")
    what.add_argument("--remove", type=int, metavar="SID", help="remove replica SID (the leader too: it hands over)")
    what.add_argument("--voters", metavar="SIDS", help="make the voters exactly these (e.g. 1,2,3,4,5)")
    what.add_argument("--show", action="store_true", help="print the configuration in force (the default)")
    p.add_argument("--observers", metavar="SIDS", default="", help="with --voters: the observers")
    p.add_argument("--node", default=None, help="with --add: the Ray node (id prefix or address)")
    p.add_argument("--joining", default=None, metavar="SPECS",
                   help="ZooKeeper's form: server specs to add, comma-separated (server.N=host:q:e[:role];port)")
    p.add_argument("--leaving", default=None, metavar="SIDS", help="ZooKeeper's form: sids to remove")
    p.add_argument("--members", default=None, metavar="SPECS", help="ZooKeeper's form: the whole new membership")
    p.add_argument("--from-config", default="-1", metavar="HEX",
                   help="only if the configuration's version is this (hex, as /zookeeper/config shows it)")
    p.add_argument("--timeout", type=float, default=120.0)
    p.set_defaults(func=lambda a: common.guard(reconfig, a))


def _sids(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{what} takes comma-separated replica ids, got {text!r}") from None


def reconfig(args: argparse.Namespace) -> int:
    raw = args.joining is not None or args.leaving is not None or args.members is not None
    if raw and (args.add or args.remove is not None or args.voters):
        raise ConfigError("--joining/--leaving/--members (ZooKeeper's form) go without --add, --remove or --voters")
    try:
        from_config = -1 if args.from_config == "-1" else int(args.from_config, 16)
    except ValueError:
        raise ConfigError(f"--from-config takes a hex version, got {args.from_config!r}") from None
    ens = common.connect(args)
    try:
        if args.add:
            sid = ens.add_replica(args.add, node=args.node, timeout=args.timeout)
            print(f"added replica {sid} as {'a voter' if args.add == 'participant' else 'an observer'}")
        elif args.remove is not None:
            version = ens.remove_replica(args.remove, timeout=args.timeout)
            print(f"removed replica {args.remove}: configuration {version:x}")
        elif args.voters:
            version = ens.reconfigure(_sids(args.voters, "--voters"), _sids(args.observers, "--observers"),
                                      timeout=args.timeout)
            print(f"configuration {version:x}")
        elif raw:
            version, text = ens.reconfig(args.joining, args.leaving, args.members, from_config, timeout=args.timeout)
            print(text)
            return 0
    except ReconfigError as e:
        print(f"zabray reconfig: {e.code}: {e.message}", file=sys.stderr)
        return 2 if e.code in ("BAD_ARGUMENTS", "RECONFIG_DISABLED") else 1
    version, text = _config_in_force(ens)
    print(text if text else f"(version {version:x}: no configuration committed yet; reconfig_enabled is off)")
    return 0


def _config_in_force(ens: Ensemble) -> tuple[int, str]:
    """The newest configuration any running replica has in force."""
    best: tuple[int, str] = (-1, "")
    for r in ens.status():
        v = r.config_version or 0
        if r.report is not None and v > best[0]:
            best = (v, r.report.config)
    return best[0], best[1] if best[0] > 0 else ""
