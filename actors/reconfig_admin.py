"""Reconfigurations asked for on the control plane (the controller's ``reconfigure``): submitted
to this replica's core as a superuser would, answered once committed here or refused.

The request is the hosted service's own: for the ZooKeeper service, a tree reconfig request with
the superuser's id (so the tree's checks run as for a ZooKeeper client's, and /zookeeper/config
changes with the txn); for broadcast, the ``ConfigChange`` itself. Request ids come from the top
of the core's 40-bit range, which the services (counting up from 1) never reach, so outcomes are
told apart from the service's without asking it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from zabray.errors import NoQuorumError, ReconfigError, UncertainOutcomeError
from zabray.protocol.actions import Committed, Failed, Outcome
from zabray.protocol.events import RID_MASK, SubmitReconfig
from zabray.protocol.membership import ConfigChange

_FIRST = RID_MASK - (1 << 24)


class AdminReconfigs:
    def __init__(self, zookeeper: bool) -> None:
        self.zookeeper = zookeeper
        self._next = _FIRST
        self._waiting: dict[int, asyncio.Future[int]] = {}

    def request(self, change: ConfigChange) -> tuple[SubmitReconfig, asyncio.Future[int]]:
        """The core event to step, and the future its outcome completes (with the zxid)."""
        rid = self._next
        self._next = rid + 1 if rid < RID_MASK else _FIRST
        if self.zookeeper:
            # Here, not at the top: a broadcast replica never loads the data tree's modules
            # (tests/actors/test_replica_imports.py), a load-cost choice, no cycle.
            from zabray.tree import ops as tops

            value = tops.reconfig(change.joining, change.leaving, change.members, change.from_version,
                                  session_id=0, time_ms=int(time.time() * 1000), auth=(("super", ""),))
        else:
            value = change.encode()
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        return SubmitReconfig(rid, value), fut

    def take(self, outcomes: list[Outcome]) -> list[Outcome]:
        """Complete the futures of the outcomes that are ours; the rest, for the service."""
        if not self._waiting:
            return outcomes
        rest: list[Outcome] = []
        for a in outcomes:
            fut = self._waiting.pop(a.request_id, None) if isinstance(a, (Committed, Failed)) else None
            if fut is None:
                rest.append(a)
            elif not fut.done():
                if _ok(a):
                    fut.set_result(int(a.zxid))  # type: ignore[union-attr]
                else:
                    fut.set_exception(_refusal(a))
        return rest

    def fail_all(self, why: str) -> None:
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(UncertainOutcomeError(why))
        self._waiting.clear()


def _ok(a: Any) -> bool:
    if isinstance(a, Failed):
        return False
    err = getattr(a.result, "error", None)
    return err is None


def _refusal(a: Any) -> Exception:
    """A refused (or lost) reconfiguration as the typed error the caller gets."""
    if isinstance(a, Failed):
        if a.uncertain:
            return UncertainOutcomeError(f"the reconfiguration's fate is unknown: {a.reason}")
        if a.reason.partition(":")[0] in ReconfigError.CODES:
            return ReconfigError.from_reason(a.reason)
        return NoQuorumError(a.reason)  # no leader to take it: nothing changed, it may be retried
    err = a.result.error
    if err.code in ReconfigError.CODES:
        return ReconfigError(err.code, err.message)
    return ReconfigError("BAD_ARGUMENTS", f"{err.code}: {err.message}")
