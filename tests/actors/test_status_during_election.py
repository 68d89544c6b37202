"""A replica's status can be asked at any moment, an election included: three real replica
servers on one event loop, their status read on every loop turn from start until a leader is
established. (A prospective leader has no epoch until a quorum has followed it; the metrics in
the status used to assume one, so ``Ensemble.status()`` during an election could fail.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from actors.replica import ReplicaServer

pytestmark = pytest.mark.timeout(60)


def test_status_never_fails_while_a_leader_is_being_elected(tmp_path: Path) -> None:
    seen: set[str] = set()

    async def body() -> None:
        servers = [ReplicaServer(ensemble="status", sid=sid, config={"fsync": False}, voters=[1, 2, 3],
                                 observers=[], data_dir=str(tmp_path / f"r{sid}")) for sid in (1, 2, 3)]
        infos = [await s.start() for s in servers]
        try:
            for s in servers:
                s.set_peers({i["sid"]: tuple(i["quorum"]) for i in infos})
            while True:
                statuses = [s.status() for s in servers]
                seen.update(st.node.state.name if st.node else "STARTING" for st in statuses)
                if any(st.established for st in statuses):
                    return
                await asyncio.sleep(0)  # every loop turn: each step of the election
        finally:
            for s in servers:
                await s.stop()

    asyncio.run(asyncio.wait_for(body(), 45))
    assert len(seen) >= 2, f"the election was never observed in progress: {seen}"
