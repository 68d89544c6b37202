"""The Ray actor around ``ReplicaServer``: what the ensemble controller creates, one per replica.

Every method is a control call (start, status, faults, holds); none carries a write, which
travels over the replica's own TCP ports. The server does the work; this class only adapts it
to Ray (an async actor, so each call runs on the server's own event loop).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, assert_never

from actors.fault_calls import (
    AddHold,
    CutLinks,
    FaultAnswer,
    FaultCall,
    ListHeld,
    ReleaseHeld,
    ShapeLinks,
    StopHold,
    UnshapeLinks,
)
from actors.replica import ReplicaServer
from actors.status import ReplicaReport
from zabray.errors import ConfigError
from zabray.protocol.membership import ConfigChange


class ReplicaActor:
    """The Ray actor around ``ReplicaServer`` (created by the ensemble controller)."""

    def __init__(self, **kwargs: Any) -> None:
        import sys

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        # The IO thread needs the GIL back quickly after each write/fdatasync returns; the
        # default 5 ms switch interval would add that much to every group commit.
        sys.setswitchinterval(0.0005)
        self.server = ReplicaServer(**kwargs)

    async def start(self) -> dict[str, Any]:
        info = await self.server.start()
        self._metrics_task = asyncio.get_running_loop().create_task(self.server.metrics.export_forever(self.server))
        import ray

        info["node_id"] = ray.get_runtime_context().get_node_id()
        return info

    async def set_peers(self, addrs: dict[int, tuple[str, int]]) -> None:
        self.server.set_peers(addrs)

    async def status(self) -> ReplicaReport:
        return self.server.status()

    async def reconfigure(self, change: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
        return await self.server.reconfigure(ConfigChange(**change), timeout)

    async def request_snapshot(self) -> dict[str, int]:
        return self.server.request_snapshot()

    async def tree_digest(self) -> tuple[str, int] | None:
        return self.server.tree_digest()

    async def history(self, after: int = 0) -> list[tuple[int, str]]:
        return self.server.history(after)

    async def block(self, peers: list[int]) -> None:
        self.server.block(peers)

    async def arm_crash(self, point: str, nth: int = 1) -> None:
        self.server.faults.arm(point, nth)

    async def arm_crashes(self, points: list[tuple[str, int]]) -> None:
        """Arm several crash points at once (replacing what was armed); empty disarms."""
        self.server.faults.arm_all(points)

    async def disk_fault(self, kind: str, delay_ms: float = 0.0) -> None:
        f = self.server.faults
        if kind == "fsync-fail":
            f.fail_next_sync = True
        elif kind == "slow-fsync":
            f.sync_delay_s = delay_ms / 1000
        elif kind == "lose-unsynced":
            # A power cut: everything not yet fdatasync'ed is gone. Appends sit in memory until
            # the group commit writes and syncs them together, so dying before the next one is it.
            self.server.crash("lose-unsynced")
        elif kind == "clear":
            f.fail_next_sync, f.sync_delay_s = False, 0.0
        else:
            raise ConfigError(f"unknown disk fault {kind!r}: fsync-fail, slow-fsync, lose-unsynced or clear")

    async def fault(self, call: FaultCall) -> FaultAnswer:
        """Apply a link or hold fault (``actors.fault_calls``) on this replica's channels."""
        gate = self.server.gate
        match call:
            case ShapeLinks(peers, delay_ms):
                gate.shape_links(list(peers), delay_ms)
            case UnshapeLinks(peers):
                gate.unshape_links(list(peers))
            case CutLinks(peers):
                return gate.cut_links(list(peers))
            case AddHold(hold_id, pattern):
                gate.add_hold(hold_id, pattern)
            case StopHold(hold_id):
                gate.stop_hold(hold_id)
            case ReleaseHeld(hold_id, count, dst):
                out = gate.release_held(hold_id, count, dst)
                await asyncio.sleep(0)  # the released frames are written before this call returns
                return out
            case ListHeld():
                return gate.held()
            case _:
                assert_never(call)
        return None

    async def unblock(self, peers: list[int]) -> None:
        self.server.unblock(peers)

    async def stop(self) -> None:
        await self.server.stop()
