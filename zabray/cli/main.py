"""The ``zabray`` command. Each area registers its own subcommands; this module only wires them.

Exit codes: 0 success, 1 a property was violated or an operation failed, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from zabray.cli import check, ensemble, experiment, faults, inspect, scenario, security, sim, zk
from zabray.errors import ConfigError

# Each adds its subcommands through ``register(subparsers)``, in the order ``--help`` lists them.
_COMMAND_MODULES = (ensemble, zk, faults, inspect, scenario, sim, check, experiment, security)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zabray",
        description="Zab, ZooKeeper's atomic broadcast, as a durable replicated system on Ray.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("--temp-dir", metavar="DIR", default=None,
                        help="Ray's temp dir (its RAY_TMPDIR): where the Ray head `up` starts keeps its "
                             "sessions and where later commands look for it; one per user on a shared machine")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in _COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.temp_dir is not None:  # Ray's own setting: this process, `ray start`, and Ray's workers
        os.environ["RAY_TMPDIR"] = os.path.abspath(args.temp_dir)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except ConfigError as e:  # bad usage that a subcommand found after parsing: exit 2, as argparse does
        print(f"zabray {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
