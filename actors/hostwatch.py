"""The controller's side of hosts: replicas lost with their host come back when it does, faults
run on the replica's own node, and a down replica's status is read from its disk there.

``HostWatch`` is a mixin of ``EnsembleController`` (it uses the controller's ``members``,
``handles``, ``node_of``, ``paused`` and ``_launch``). A Ray node id names one run of a host's
node; ``home`` (``actors.homes``) names the host, so a host that comes back as a new node is
still the replica's home.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from typing import TYPE_CHECKING, Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors import homes
from actors.status import DiskSummary
from zabray.errors import NotRunningError

if TYPE_CHECKING:
    from zabray.config import EnsembleConfig

log = logging.getLogger(__name__)
DISK_READ_S = 30.0
"""How long a read of a down replica's disk may take before status gives up on it."""


@ray.remote(num_cpus=0)
def _send_signal(pid: int, sig: int) -> None:
    """Signal a replica's process from its own node (pause/resume of a replica on any host)."""
    os.kill(pid, sig)


@ray.remote
def wipe_dir(path: str, parent: str) -> str | None:
    """Delete a replica's data directory on this node (and the ensemble's, once empty)."""
    existed = os.path.isdir(path)
    shutil.rmtree(path, ignore_errors=True)
    try:
        os.rmdir(parent)  # only if empty: another replica on this node may still be there
    except OSError:
        pass
    return path if existed else None


def disk_summary(path: str) -> DiskSummary:
    """What a replica's disk holds, as ``zabray inspect`` reads it."""
    from storage.diskview import read_disk

    v = read_disk(path)
    return DiskSummary(v.current_epoch, v.accepted_epoch, v.last_zxid, v.committed_through, v.incarnation)


_disk_summary = ray.remote(num_cpus=0)(disk_summary)


def pinned(node: str) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node, soft=False)


class HostWatch:
    # Set by EnsembleController.__init__.
    name: str
    cfg: EnsembleConfig
    members: list[int]
    voters: list[int]
    info: dict[int, dict[str, Any]]
    handles: dict[int, Any]
    node_of: dict[int, str]
    paused: set[int]
    wiped: set[int]
    groups: list[list[int]] | None
    home: dict[int, str]
    lost: dict[int, float]
    """Replicas that went down with their host's node, and since when: the watch brings them back."""
    node_addr: dict[str, str]
    _disk_reads: dict[int, Any]
    _lock: asyncio.Lock

    if TYPE_CHECKING:
        async def _launch(self, sid: int, crash_points: list[tuple[str, int]] | None = None,
                          holds: list[tuple[int, Any]] | None = None, rejoining: bool = False) -> None: ...
        async def _publish_peers(self, only: int | None = None) -> None: ...
        async def _apply_partition(self) -> None: ...
        def _fault(self, kind: str, target: list[int] | str, *, ends: str | None = None) -> None: ...
        def data_dir(self, sid: int) -> str: ...
        def _save(self) -> None: ...

    # -- nodes -----------------------------------------------------------------------------------

    async def _nodes(self) -> list[dict[str, Any]]:
        nodes: list[dict[str, Any]] = await asyncio.to_thread(ray.nodes)
        self.node_addr.update({n["NodeID"]: str(n.get("NodeManagerAddress") or "?") for n in nodes})
        return nodes

    def _here(self) -> str:
        return str(ray.get_runtime_context().get_node_id())

    async def _signal(self, sid: int, sig: int) -> None:
        """Send ``sig`` to the replica's process on whichever node runs it."""
        pid = int(self.info[sid]["pid"])
        node = self.node_of[sid]
        if node == self._here():
            os.kill(pid, sig)
            return
        try:
            await asyncio.wait_for(_send_signal.options(scheduling_strategy=pinned(node)).remote(pid, sig), 60)
        except Exception as e:  # the node is gone or cut off, the task failed
            raise NotRunningError(f"cannot signal replica {sid} on {homes.describe(self.home[sid])}: "
                                  f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None

    # -- the watch ----------------------------------------------------------------------------------

    async def _watch_hosts(self) -> None:
        """Every ``host_check_ms``: mark replicas whose node died lost, bring lost ones back home."""
        while True:
            await asyncio.sleep(self.cfg.host_check_ms / 1000)
            try:
                await self._check_hosts()
            except Exception:  # the GCS unreachable for a moment: try again next round
                log.warning("ensemble %s: host check failed", self.name, exc_info=True)

    async def _check_hosts(self) -> None:
        nodes = await self._nodes()
        alive = {n["NodeID"] for n in nodes if n["Alive"]}
        for sid in self.members:
            if sid in self.handles and self.node_of.get(sid) not in alive:
                # Ray kills the actors of a node it declared dead; the process may linger on a
                # cut-off host until its raylet learns of it, and nothing of it is used any more.
                self.handles.pop(sid, None)
                self.paused.discard(sid)
                self.lost[sid] = time.time()
                self._disk_reads.pop(sid, None)
                log.warning("ensemble %s: replica %d lost with its node %s (%s)", self.name, sid,
                            self.node_of.get(sid, "?")[:8], homes.describe(self.home[sid]))
                self._fault("lost-with-host", [sid])
                self._read_disk_soon(sid)
                self._save()
        for sid in sorted(self.lost):
            if sid in self.handles:
                self.lost.pop(sid, None)
                continue
            node = homes.node_for(self.home[sid], nodes)
            if node is not None:
                await self._bring_back(sid, node, fresh=False)
            elif self.cfg.rebuild_after_s and time.time() - self.lost[sid] >= self.cfg.rebuild_after_s:
                target = homes.rebuild_target(sid, self.home, nodes)
                if target is not None:
                    row = next(n for n in nodes if n["NodeID"] == target)
                    log.warning("ensemble %s: %s of replica %d gone for %d s: rebuilding it on %s", self.name,
                                homes.describe(self.home[sid]), sid, self.cfg.rebuild_after_s,
                                homes.describe(homes.home_of(row, nodes)))
                    self.home[sid] = homes.home_of(row, nodes)
                    await self._bring_back(sid, target, fresh=True)

    async def _bring_back(self, sid: int, node: str, fresh: bool) -> None:
        async with self._lock:
            if sid in self.handles or sid not in self.lost:  # a restart got there first
                self.lost.pop(sid, None)
                return
            self.node_of[sid] = node
            self._disk_reads.pop(sid, None)
            try:
                if fresh:
                    await self._wipe_on(sid, node)
                    if len(self.voters) > 1 and sid in self.voters:
                        self.wiped.add(sid)
                await asyncio.wait_for(self._launch(sid, rejoining=sid in self.wiped), 120)
            except Exception as e:  # its node went again, its disk is busy: next round
                log.warning("ensemble %s: replica %d could not start on %s yet: %s", self.name, sid,
                            homes.describe(self.home[sid]), e)
                return
            self.lost.pop(sid, None)
        await self._publish_peers()
        if self.groups is not None:
            await self._apply_partition()
        self._fault("rebuilt-elsewhere" if fresh else "rejoined", [sid])

    async def _wipe_on(self, sid: int, node: str) -> None:
        """Delete replica ``sid``'s data directory on ``node`` (a fresh start there)."""
        await asyncio.wait_for(wipe_dir.options(num_cpus=0, scheduling_strategy=pinned(node)).remote(
            self.data_dir(sid), ""), 60)

    # -- what a replica that is not running holds ----------------------------------------------------

    async def _disk_status(self, sid: int, timeout: float) -> DiskSummary | str:
        """A down or paused replica's epochs and zxids as its disk holds them (read on its node,
        once per stop), or why they are unknown."""
        ref = self._disk_reads.get(sid)
        if ref is None:
            nodes = await self._nodes()
            node = homes.node_for(self.home[sid], nodes)
            if node is None:
                return f"{homes.describe(self.home[sid])} has no live Ray node"
            path = self.info.get(sid, {}).get("data_dir") or self.data_dir(sid)
            if node == self._here():
                ref = asyncio.ensure_future(asyncio.to_thread(disk_summary, path))
            else:
                ref = asyncio.wrap_future(_disk_summary.options(scheduling_strategy=pinned(node)).remote(path).future())
            self._disk_reads[sid] = ref
        try:
            got: DiskSummary = await asyncio.wait_for(asyncio.shield(ref), timeout)
        except TimeoutError:
            return f"reading it on {homes.describe(self.home[sid])}"
        except Exception as e:  # the node went, the disk cannot be read
            self._disk_reads.pop(sid, None)
            return type(e).__name__
        return got

    def _read_disk_soon(self, sid: int) -> None:
        """Start reading a replica's disk now that it stopped, so that status has it at hand."""
        task = asyncio.get_running_loop().create_task(self._disk_status(sid, 0.0))
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
