"""What every command shares: finding the ensemble it names, and turning typed errors into one
line and an exit code (2 bad usage or configuration, 1 the operation failed).

Command modules import the driver (and with it Ray) inside the commands that need it: ``zabray
--help``, a typo or ``zabray sim`` answer without loading Ray."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from zabray.errors import ConfigError, NotRunningError, ZabError


def guard(func: Any, args: argparse.Namespace) -> int:
    try:
        return int(func(args) or 0)
    except ConfigError as e:
        print(f"zabray {args.command}: {e}", file=sys.stderr)
        return 2
    except ZabError as e:
        print(f"zabray {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


NAME_HELP = "ensemble name (default: the only ensemble running, else 'default')"


def add_name(p: argparse.ArgumentParser, *, creating: bool = False) -> None:
    """The ``--name`` option. A command that creates an ensemble defaults to 'default'; one that
    acts on a running ensemble leaves it unset, and ``connect`` picks the ensemble."""
    if creating:
        p.add_argument("--name", default="default", help="ensemble name (default: default)")
    else:
        p.add_argument("--name", default=None, help=NAME_HELP)


def connect(args: argparse.Namespace) -> Any:
    """The ensemble the command names. Without ``--name``: the one named 'default' if it runs,
    else the only ensemble running (said on stderr); with several and none named 'default',
    a ``NotRunningError`` that lists them."""
    from zabray.driver.ensemble import Ensemble, running_ensembles
    from zabray.driver.raylink import init_ray

    address = address_of(args)
    require_cluster(address)
    if getattr(args, "name", None) is None:
        init_ray(address)
        running = running_ensembles()
        if "default" in running or not running:
            args.name = "default"  # none running: connecting says so, with what is running
        elif len(running) == 1:
            args.name = running[0]
            print(f"zabray {args.command}: ensemble {args.name!r}, the only one running", file=sys.stderr)
        else:
            raise NotRunningError(f"{len(running)} ensembles are running, none named 'default': "
                                  f"{', '.join(map(repr, running))}; pick one with --name")
    ens = Ensemble.connect(args.name, address=address)
    exit_on_sigterm()
    return ens


def require_cluster(address: str | None) -> None:
    """A running ensemble is only ever in a running cluster: with none to join, say so, rather
    than start a Ray instance only to report that no ensemble runs in it."""
    from zabray.driver.rayhead import running_head

    if address is None and running_head() is None:
        import ray

        if not ray.is_initialized():
            raise NotRunningError("no Ray cluster is running on this machine: `zabray up` starts one with an "
                                  "ensemble (or pass --address / set RAY_ADDRESS)")


def exit_on_sigterm() -> None:
    """A SIGTERM (``kill``, ``timeout``, a job runner) ends the command as Ctrl-C would: through
    its ``finally`` blocks (a session closed, so its ephemeral znodes go at once), exit 143.
    Installed once Ray is up, since joining Ray replaces the handler with one that dumps stacks."""
    def _terminated(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)


def address_of(args: argparse.Namespace) -> str | None:
    """An explicit --address or RAY_ADDRESS; otherwise ``init_ray`` finds the running head."""
    return args.address or os.environ.get("RAY_ADDRESS") or None
