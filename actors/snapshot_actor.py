"""The snapshot actor: asks each replica for a snapshot every ``snapshot_every`` delivered txns.

Each replica's next threshold is drawn between half and all of ``snapshot_every`` so replicas do
not snapshot together. Used when the config sets ``snapshot_actor: true`` (the replicas then do
not self-trigger). ``DiskStore.save_snapshot`` purges old snapshots and the log segments they
cover, keeping ``keep_snapshots``; the core keeps ``diff_window`` txns in memory for DIFFs.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from actors.status import ReplicaReport

log = logging.getLogger(__name__)


class SnapshotActor:
    def __init__(self, every: int, poll_s: float = 0.25) -> None:
        self.every = every
        self.poll_s = poll_s
        self.handles: dict[int, Any] = {}
        self.base: dict[int, tuple[Any, int]] = {}  # sid -> (handle, delivered count at last snapshot)
        self.due: dict[int, int] = {}
        self.taken: dict[int, int] = {}
        self._task: asyncio.Task[None] | None = None

    def _draw(self) -> int:
        return random.randint(max(1, self.every // 2), self.every)

    async def set_replicas(self, handles: dict[int, Any]) -> None:
        self.handles = dict(handles)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            for sid, h in list(self.handles.items()):
                try:
                    st: ReplicaReport = await asyncio.wait_for(h.status.remote(), 2)
                except Exception:
                    continue  # down or restarting; the controller hands us its new handle
                delivered = (st.stats or {}).get("delivered", 0)
                prev = self.base.get(sid)
                if prev is None or prev[0] is not h or delivered < prev[1]:
                    # A new incarnation: its counter restarted from 0 (it may have run a while).
                    self.base[sid] = (h, 0)
                    self.due[sid] = self._draw()
                    prev = self.base[sid]
                if delivered - prev[1] >= self.due[sid]:
                    try:
                        await asyncio.wait_for(h.request_snapshot.remote(), 5)
                    except Exception as e:
                        log.info("snapshot of replica %d failed: %s", sid, e)
                        continue
                    self.base[sid] = (h, delivered)
                    self.due[sid] = self._draw()
                    self.taken[sid] = self.taken.get(sid, 0) + 1

    async def stats(self) -> dict[int, int]:
        return dict(self.taken)
