"""Planted bugs: deliberately broken builds that the checks must catch.

Production code never reads them. A test module that wants one starts its own Ray cluster with
``runtime_env(name)``: Ray runs the function ``name`` of this module in every worker process it
starts (its ``worker_process_setup_hook``), before any actor's code, and the function patches
the class that the bug lives in. The replicas of that cluster, and only of that cluster, run
the broken build.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def runtime_env(name: str) -> dict[str, Any]:
    """The ``runtime_env`` of a Ray cluster whose workers run with planted bug ``name``."""
    assert name in ("stale_reads", "resume_behind", "sync_drop"), name
    return {"worker_process_setup_hook": f"tests.histories.planted.{name}", "env_vars": {"PYTHONPATH": str(ROOT)}}


def _patch_zk_service(plant: Any) -> None:
    from actors import zkservice

    init = zkservice.ZooKeeperService.__init__

    def planted_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        plant(self.svc)

    zkservice.ZooKeeperService.__init__ = planted_init  # type: ignore[method-assign]


def stale_reads() -> None:
    """A replica runs a session's read as soon as it arrives, ahead of that session's earlier
    writes, so it can return a state older than one the session already saw."""

    def plant(svc: Any) -> None:
        drain = svc._drain

        def stale_drain(st: Any) -> None:
            for e in st.queue:
                if e.read is not None and not e.done:
                    svc._read(st, e)
            drain(st)

        svc._drain = stale_drain

    _patch_zk_service(plant)


def resume_behind() -> None:
    """A replica accepts a moving session even though its tree is older than what the session
    already saw, so the session's next read can go back in time."""

    def plant(svc: Any) -> None:
        connect = svc._connect

        def careless_connect(st: Any, xid: int, op: Any) -> None:
            connect(st, xid, replace(op, last_zxid=min(op.last_zxid, svc.tree.last_zxid)))

        svc._connect = careless_connect

    _patch_zk_service(plant)


def sync_drop() -> None:
    """A follower forgets the PROPOSALs it receives between NEWLEADER and UPTODATE, as if they
    never came; its later ACKs still claim them (the ZOOKEEPER-4394 window)."""
    from zabray.protocol import learner
    from zabray.protocol.messages import PeerState, Proposal, Proposals
    from zabray.protocol.role import Phase

    on_message = learner.Learner.on_message

    def forgetful(self: Any, channel: Any, msg: Any) -> None:
        if (isinstance(msg, (Proposal, Proposals)) and channel == self.channel
                and self.node.state is PeerState.FOLLOWING and self.phase is Phase.SYNCHRONIZATION):
            return
        on_message(self, channel, msg)

    learner.Learner.on_message = forgetful  # type: ignore[method-assign]
