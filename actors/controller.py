"""The ensemble controller: a detached, named Ray actor that owns an ensemble's membership.

It places replicas across the cluster's nodes (one per node, round robin, pinned by node id so
a restarted replica finds its data directory again), tells every replica where its peers
listen, and carries out the control-plane operations: kill, restart, pause, resume,
partition, heal, stop, and the membership changes of ``actors.controller_reconfig``. It is
never on the data path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors import checkpoint, homes
from actors import controller_reconfig as membership
from actors.hostwatch import HostWatch, wipe_dir
from actors.names import NAMESPACE, WORKER_NICENESS
from actors.replica_actor import ReplicaActor
from actors.snapshot_actor import SnapshotActor
from actors.status import DiskSummary, ReplicaReport, ReplicaStatus
from zabray.config import EnsembleConfig
from zabray.errors import ConfigError, NotRunningError
from zabray.replay.crashpoints import crash_points as check_crash_points
from zabray.trace import records as trace

log = logging.getLogger(__name__)


def _replica_env() -> dict[str, Any] | None:
    """Nothing when this worker runs at nice 0: the raylet's environment then already starts
    replicas' workers so (``zabray.driver.rayhead.unniced_workers``). Otherwise, a cluster started
    without it, each replica asks for nice 0 itself, at the price of Ray's ``setup_worker``."""
    return None if os.nice(0) <= 0 else {"env_vars": {WORKER_NICENESS: "0"}}


class EnsembleController(HostWatch):
    def __init__(self, name: str, replicas: int, observers: int, config: dict[str, Any], run_dir: str,
                 secret: Any = None) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.name = name
        self._secret = secret  # a zabray.wire.auth.Secret: handed to replicas and clients, never described
        self.snapshotter: Any = None  # the snapshot actor's handle, when the config asks for one
        self.cfg = EnsembleConfig.from_dict(config)
        self.voters = list(range(1, replicas + 1))
        self.observers = list(range(replicas + 1, replicas + observers + 1))
        self.members = self.voters + self.observers  # the configuration's, then those joining
        self.joining: set[int] = set()  # started to join, not yet members
        self.departed: set[int] = set()  # removed by a reconfiguration and stopped
        self.retiring: set[int] = set()  # removed, to be stopped once the new configuration is everywhere
        self.background: set[asyncio.Task[None]] = set()
        self.config_version = 0
        self.run_dir = run_dir
        self.handles: dict[int, Any] = {}
        self.info: dict[int, dict[str, Any]] = {}
        self.node_of: dict[int, str] = {}
        self.paused: set[int] = set()
        self.wiped: set[int] = set()  # restarted fresh once: marked rejoining at every start (see restart)
        self.groups: list[list[int]] | None = None
        self.started_at = time.time()
        self._open_faults: dict[tuple[str, str], float] = {}
        self.node_addr: dict[str, str] = {}
        self.home: dict[int, str] = {}  # each replica's host (actors.homes): its node id may change
        self.lost: dict[int, float] = {}
        self._disk_reads: dict[int, Any] = {}
        self._lock = asyncio.Lock()  # one launch of a replica at a time (a restart, the host watch)
        self._watch: asyncio.Task[None] | None = None
        saved = checkpoint.load(run_dir)
        if saved is not None and saved.get("started"):  # Ray restarted this controller: adopt the replicas
            found = checkpoint.adopt(self, saved, lambda n: ray.get_actor(n, namespace=NAMESPACE))
            log.warning("ensemble %s: controller restarted; replicas %s found running", name, found)

    def _save(self) -> None:
        checkpoint.save(self.run_dir, checkpoint.state_of(self))

    def _ensure_watch(self) -> None:
        """The host watch runs in every incarnation of the controller (a restarted one starts it
        at its first call)."""
        if self._watch is None and self.cfg.rejoin and self.info:
            self._watch = asyncio.get_running_loop().create_task(self._watch_hosts())

    def _fault(self, kind: str, target: list[int] | str, *, ends: str | None = None) -> None:
        """Record a fault in the run's trace: ``kind`` starts now; ``ends`` closes an open one."""
        now = time.time()
        tgt = target if isinstance(target, str) else ",".join(str(t) for t in target)
        rows = []
        if ends is not None:
            start = self._open_faults.pop((ends, tgt), None)
            if start is not None:
                rows.append(trace.Fault(ends, tgt, start, now))
        if kind:
            rows.append(trace.Fault(kind, tgt, now, None if kind in ("pause", "partition") else now))
            if kind in ("pause", "partition"):
                self._open_faults[(kind, tgt)] = now
        path = Path(self.run_dir) / "trace" / "faults.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            for rec in rows:
                fh.write(json.dumps(trace.row(rec, run=self.name, src="controller", replica=-1, inc=0, t=now),
                                    separators=(",", ":")) + "\n")

    def data_dir(self, sid: int) -> str:
        return str(Path(self.cfg.data_dir) / self.name / f"replica-{sid}")

    # -- placement and start -------------------------------------------------------------------

    async def start(self) -> dict[str, Any]:
        """Place one replica per host, in the order of the hosts (replica 1 on the first), and
        start them; then watch for replicas lost with their host (``rejoin``)."""
        nodes = await self._nodes()
        for sid, node in homes.placement(self.members, nodes).items():
            self.node_of[sid] = node
            self.home[sid] = homes.home_of(next(n for n in nodes if n["NodeID"] == node), nodes)
        # Every launch runs to its end before a failure is raised: a replica still starting when
        # another failed would otherwise be left running, detached, after the cleanup below.
        got = await asyncio.gather(*(self._launch(sid) for sid in self.members), return_exceptions=True)
        failed = [r for r in got if isinstance(r, BaseException)]
        if failed:  # detached replicas outlive the controller: stop those that started
            for h in self.handles.values():
                ray.kill(h, no_restart=True)
            # (at start, every replica's actor is its first: incarnation 0 in its name)
            await asyncio.gather(*(_name_freed(_name(self.name, sid, 0)) for sid in self.handles))
            self.handles.clear()
            for more in failed[1:]:  # the first is raised; the others are not lost without a word
                log.warning("ensemble %s: another replica failed to start too: %s: %s", self.name,
                            type(more).__name__, more)
            raise failed[0]
        await self._publish_peers()
        if self.cfg.reconfig_enabled:
            await membership.initial_config(self)
        if self.cfg.snapshot_actor:
            snap: Any = ray.remote(SnapshotActor).options(num_cpus=0, max_concurrency=10).remote(
                self.cfg.snapshot_every)
            self.snapshotter = snap
            await snap.set_replicas.remote(dict(self.handles))
        self._ensure_watch()
        self._save()
        return self._describe()

    async def _launch(self, sid: int, crash_points: list[tuple[str, int]] | None = None,
                      holds: list[tuple[int, Any]] | None = None, rejoining: bool = False,
                      joining: bool = False) -> None:
        before = self.info.get(sid, {})
        previous = before.get("incarnation", -1)
        # Where the last incarnation listened, to listen there again (clients hold those ports).
        ports = {kind: before[kind][1] for kind in ("quorum", "election", "client", "zk_client", "zk_secure_client")
                 if before.get(kind)}
        # The configuration as the controller knows it (committed), unless the replica's disk
        # holds a newer one; one outside it (being added) starts joining.
        joining = joining or sid not in self.voters + self.observers
        actor = ray.remote(ReplicaActor).options(
            num_cpus=0,
            max_restarts=0,
            # Not owned by the controller: a lost controller must not take the replicas with it.
            lifetime="detached",
            max_concurrency=1000,
            scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_of[sid], soft=False),
            name=_name(self.name, sid, previous + 1),
            namespace=NAMESPACE,
            runtime_env=_replica_env(),
        )
        handle: Any = actor.remote(ensemble=self.name, sid=sid, config=self.cfg.to_dict(), voters=self.voters,
                              observers=self.observers, data_dir=self.data_dir(sid), run_dir=self.run_dir,
                              min_incarnation=previous + 1, secret=self._secret,
                              crash_points=list(crash_points or ()), holds=list(holds or ()), ports=ports,
                              rejoining=rejoining, servers=membership.servers(self), joining=joining)
        try:
            info = await handle.start.remote()
        except BaseException:  # a timeout, a node that went: no half-started replica left behind
            ray.kill(handle, no_restart=True)
            await _name_freed(_name(self.name, sid, previous + 1))  # its name free for the next start
            raise
        self.handles[sid] = handle
        self.info[sid] = info
        self._save()

    async def _publish_peers(self, only: int | None = None) -> None:
        """Tell every running replica (or ``only`` that one) where its peers listen. A paused
        replica cannot answer a Ray call until resumed, so it is told then (``resume``)."""
        if self.snapshotter is not None and only is None:
            await self.snapshotter.set_replicas.remote(dict(self.handles))
        addrs = {sid: tuple(i["quorum"]) for sid, i in self.info.items()}
        await asyncio.gather(*(h.set_peers.remote(addrs) for s, h in self.handles.items()
                               if s not in self.paused and only in (None, s)), return_exceptions=True)

    async def describe(self) -> dict[str, Any]:
        self._ensure_watch()
        return self._describe()

    # -- membership (actors.controller_reconfig) --------------------------------------------------

    async def reconfig(self, joining: str | None = None, leaving: str | None = None, members: str | None = None,
                       from_version: int = -1, timeout: float = 60.0) -> dict[str, Any]:
        return await membership.reconfig(self, joining, leaving, members, from_version, timeout)

    async def add_replica(self, role: str = "participant", node: str | None = None,
                          timeout: float = 120.0) -> dict[str, Any]:
        return await membership.add_replica(self, role, node, timeout)

    async def remove_replica(self, sid: int, timeout: float = 60.0) -> dict[str, Any]:
        return await membership.remove_replica(self, sid, timeout)

    async def reconfigure(self, voters: list[int], observers: list[int], timeout: float = 180.0) -> dict[str, Any]:
        return await membership.reconfigure(self, voters, observers, timeout)

    async def secret(self) -> Any:
        """The ensemble secret, for ``Ensemble.connect`` (Ray's control plane is trusted)."""
        return self._secret

    def _describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "controller_node": ray.get_runtime_context().get_node_id(),
            "controller_pid": os.getpid(),
            "voters": self.voters,
            "observers": self.observers,
            "joining": sorted(self.joining),
            "config_version": self.config_version,
            "config": self.cfg.to_dict(),
            "run_dir": self.run_dir,
            "clients": {sid: i["client"] for sid, i in self.info.items()},
            "replicas": {sid: {**i, "node_id": self.node_of[sid], "home": self.home.get(sid)}
                         for sid, i in self.info.items()},
            # Where each replica keeps its disk (its own absolute path once it ran), for ``inspect``.
            "data_dirs": {sid: self.info.get(sid, {}).get("data_dir") or self.data_dir(sid) for sid in self.members},
        }

    # -- observation --------------------------------------------------------------------------------

    async def handle(self, sid: int) -> tuple[Any, bool]:
        """The replica's actor handle (for the fault injector), or None if it is down; and
        whether it is paused (then it answers no Ray call until resumed)."""
        return self.handles.get(sid), sid in self.paused

    async def snapshot_stats(self) -> dict[int, int]:
        """Snapshots the snapshot actor took, per replica."""
        if self.snapshotter is None:
            return {}
        return await self.snapshotter.stats.remote()

    async def tree_digests(self) -> dict[int, tuple[str, int]]:
        """(tree digest, last zxid) of every live replica of the ZooKeeper service (each walks
        its whole tree: for comparing replicas, not for polling)."""
        sids = [s for s in self.members if s in self.handles and s not in self.paused]
        got = await asyncio.gather(*(asyncio.wait_for(self.handles[s].tree_digest.remote(), 60) for s in sids),
                                   return_exceptions=True)
        return {s: (str(d[0]), int(d[1])) for s, d in zip(sids, got, strict=True) if isinstance(d, (tuple, list))}

    async def snapshot(self, sid: int) -> dict[str, int]:
        """Ask replica ``sid`` for a snapshot now (the snapshot actor's and tests' passthrough)."""
        self._check(sid)
        return await self.handles[sid].request_snapshot.remote()

    async def record_fault(self, kind: str, target: str, start: float, end: float | None) -> None:
        path = Path(self.run_dir) / "trace" / "faults.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.write(json.dumps(trace.row(trace.Fault(kind, target, start, end), run=self.name, src="faults",
                                          replica=-1, inc=0, t=end or start), separators=(",", ":")) + "\n")

    def _node_label(self, sid: int) -> str | None:
        node_id = self.node_of.get(sid)
        if node_id is None:
            return None
        home = self.home.get(sid, "")
        where = homes.describe(home).removeprefix("host ") if home.startswith("label:") else None
        addr = self.node_addr.get(node_id, "?")
        return f"{where} {addr} ({node_id[:8]})" if where else f"{addr} ({node_id[:8]})"

    async def status(self, timeout: float = 2.0) -> list[ReplicaStatus]:
        self._ensure_watch()
        async def one(sid: int) -> ReplicaStatus:
            info = self.info.get(sid, {})
            base = ReplicaStatus(
                sid, "DOWN", alive=False, observer=sid in self.observers, node=self.node_of.get(sid),
                pid=info.get("pid"), incarnation=info.get("incarnation"), stale=True, client=_addr(info.get("client")),
                node_label=self._node_label(sid), home=self.home.get(sid), zk_client=_addr(info.get("zk_client")),
                zk_secure_client=_addr(info.get("zk_secure_client")), paused=sid in self.paused, lost=sid in self.lost)
            # A replica that does not answer is shown with what its disk holds, read on its host
            # (as `zabray inspect` reads it), or with nothing: never with what it said before.
            h = self.handles.get(sid)
            if h is None or sid in self.paused:
                disk = await self._disk_status(sid, timeout)
                return replace(base, state="PAUSED" if h is not None else "DOWN", alive=h is not None,
                               disk=disk if isinstance(disk, DiskSummary) else None,
                               unknown=disk if isinstance(disk, str) else None)
            try:
                report: ReplicaReport = await asyncio.wait_for(h.status.remote(), timeout)
            except Exception as e:  # dead actor, timeout (its host cut off)
                return replace(base, unknown=f"the replica does not answer ({type(e).__name__})")
            state = report.node.state.name if report.node is not None else "STARTING"
            return replace(base, state=state, alive=report.fatal is None, stale=False, report=report)

        sids = sorted({*self.members, *self.retiring})
        got = list(await asyncio.gather(*(one(s) for s in sids)))
        membership.follow(self, got)
        return [st for st in got if st.sid in self.members or st.sid in self.retiring]

    async def histories(self, after: int = 0) -> dict[int, list[tuple[int, str]]]:
        """Delivered (zxid, digest) per live replica, for checking agreement and durability."""
        out: dict[int, list[tuple[int, str]]] = {}
        for sid, h in list(self.handles.items()):
            if sid in self.paused:
                continue
            try:
                out[sid] = await asyncio.wait_for(h.history.remote(after), 30)
            except Exception:  # died meanwhile
                continue
        return out

    # -- faults and recovery ------------------------------------------------------------------------

    def _check(self, sid: int) -> None:
        if sid not in self.members:
            raise ConfigError(f"no replica {sid!r} in ensemble {self.name!r} (replicas are {self.members})")

    async def kill(self, sid: int) -> None:
        """The replica's process is dead when this returns; its disk is kept.

        ``ray.kill`` only asks the raylet: the process could go on receiving, logging and
        acknowledging for tens of milliseconds after it returned, so "kill, then write while it
        is down" would not be what it says. So this waits until the process is gone (on the
        controller's node: no such pid, or a zombie; elsewhere: its actor stops answering).
        Ray itself does the killing, so it reports the death as intended instead of printing
        a "worker died unexpectedly" error on the driver's stdout, as a SIGKILL of ours would."""
        self._check(sid)
        h = self.handles.pop(sid, None)
        if h is None:
            raise NotRunningError(f"replica {sid} is not running")
        if sid in self.paused:  # a stopped process cannot act on Ray's kill
            await self._signal(sid, signal.SIGCONT)
            self.paused.discard(sid)
        self._disk_reads.pop(sid, None)
        pid = int(self.info.get(sid, {}).get("pid") or 0)
        local = bool(pid) and self.node_of[sid] == ray.get_runtime_context().get_node_id()
        ray.kill(h, no_restart=True)
        deadline = time.monotonic() + 10
        while not await _gone(pid, h, local):
            if time.monotonic() > deadline:
                log.warning("replica %d: not confirmed dead 10 s after kill", sid)
                break
            await asyncio.sleep(0.005)
        self._read_disk_soon(sid)
        self._save()
        self._fault("kill", [sid])

    async def _alive(self, sid: int) -> bool:
        h = self.handles.get(sid)
        if h is None:
            return False
        if sid in self.paused:
            return True
        try:
            st = await asyncio.wait_for(h.status.remote(), 5)
        except Exception:  # it died (a crash point, a kill from outside)
            self.handles.pop(sid, None)
            return False
        if st.fatal:  # it stopped itself (an fsync failed): reap the process
            self.handles.pop(sid, None)
            ray.kill(h, no_restart=True)
            return False
        return True

    async def restart(self, sid: int, fresh: bool = False,
                      crash_points: list[tuple[str, int]] | None = None,
                      holds: list[tuple[int, Any]] | None = None) -> dict[str, Any]:
        """Recover ``sid`` from its disk on its host (whichever Ray node runs there now); ``fresh``
        wipes it and lets the leader resync it (also the way out when the host is gone: then on
        another host). A replica that died on its own (a crash point, a failed fsync) is
        restarted the same way. ``crash_points`` (``(point, nth)`` pairs) and message ``holds``
        (``(id, HoldPattern)``, from the fault injector) are armed in the new process before it
        opens anything."""
        self._check(sid)
        points = [(c.point, c.nth) for c in check_crash_points(crash_points)]
        async with self._lock:
            return await self._restart(sid, fresh, points, holds)

    async def _restart(self, sid: int, fresh: bool, points: list[tuple[str, int]],
                       holds: list[tuple[int, Any]] | None) -> dict[str, Any]:
        if await self._alive(sid):
            raise ConfigError(f"replica {sid} is running; kill it before restarting it")
        nodes = await self._nodes()
        node = homes.node_for(self.home[sid], nodes)
        if node is None:
            if not fresh:
                raise NotRunningError(
                    f"{homes.describe(self.home[sid])}, which holds replica {sid}'s data, has no live Ray node; "
                    f"restart it with fresh=True to rebuild it from the leader on another host")
            node = homes.rebuild_target(sid, self.home, nodes)
            if node is None:
                raise NotRunningError("no live Ray node to rebuild replica {sid} on")
            self.home[sid] = homes.home_of(next(n for n in nodes if n["NodeID"] == node), nodes)
        self.node_of[sid] = node
        self.lost.pop(sid, None)
        self._disk_reads.pop(sid, None)
        if fresh:
            await self._wipe_on(sid, node)
        for point, nth in points:  # recorded first: the replica may die at one before _launch returns
            self._fault("arm-crash-point", f"{sid}:{point}#{nth}")
        # A wiped voter must not count until a leader has synced it, or it could help elect a
        # leader without the writes only its old disk held (a lone voter has nobody to wait for).
        # Marked at every later start too: a process that died before its mark was durable must
        # not come back counting (the mark is a no-op once a leader has synced it).
        if fresh and sid in self.voters and len(self.voters) > 1:
            self.wiped.add(sid)
        await self._launch(sid, points, holds, rejoining=sid in self.wiped)
        await self._publish_peers()
        if self.groups is not None:
            await self._apply_partition()
        self._fault("restart-fresh" if fresh else "restart", [sid])
        return self.info[sid]


    async def pause(self, sid: int) -> None:
        """Freeze the replica's process (SIGSTOP): its sockets stay open, it answers nothing."""
        self._check(sid)
        if sid not in self.handles:
            raise NotRunningError(f"replica {sid} is not running")
        await self._signal(sid, signal.SIGSTOP)
        self.paused.add(sid)
        self._disk_reads.pop(sid, None)
        self._read_disk_soon(sid)
        self._save()
        self._fault("pause", [sid])

    async def resume(self, sid: int) -> None:
        self._check(sid)
        if sid not in self.paused:
            raise NotRunningError(f"replica {sid} is not paused")
        await self._signal(sid, signal.SIGCONT)
        self.paused.discard(sid)
        self._disk_reads.pop(sid, None)
        self._save()
        # What changed while it was stopped: peers restarted, partitions made or healed.
        await self._publish_peers(only=sid)
        h = self.handles.get(sid)
        if h is not None:
            cut = [] if self.groups is None else next(
                [s for s in self.members if s not in g] for g in self.groups if sid in g)
            await asyncio.gather(h.unblock.remote([s for s in self.members if s not in cut]),
                                 h.block.remote(cut) if cut else asyncio.sleep(0), return_exceptions=True)
        self._fault("", [sid], ends="pause")

    async def partition(self, groups: list[list[int]]) -> None:
        """Cut every TCP link between replicas of different groups, both ways."""
        flat = [s for g in groups for s in g]
        unknown = sorted(set(flat) - set(self.members))
        if unknown:
            raise ConfigError(f"partition names unknown replica(s) {', '.join(map(repr, unknown))}; "
                              f"ensemble {self.name!r} has replicas {self.members}")
        twice = sorted({s for s in flat if flat.count(s) > 1})
        if twice:
            raise ConfigError(f"partition groups must be disjoint: replica(s) {', '.join(map(str, twice))} "
                              f"appear in more than one group")
        rest = [s for s in self.members if s not in flat]
        self.groups = [list(g) for g in groups] + ([rest] if rest else [])
        self._save()
        await self._apply_partition()
        self._fault("partition", " | ".join(",".join(map(str, g)) for g in self.groups))

    async def _apply_partition(self) -> None:
        assert self.groups is not None
        calls = []
        for g in self.groups:
            others = [s for s in self.members if s not in g]
            for sid in g:
                h = self.handles.get(sid)
                if h is not None and sid not in self.paused:
                    calls.append(h.block.remote(others))
        await asyncio.gather(*calls, return_exceptions=True)

    async def heal(self) -> None:
        if self.groups is not None:
            self._fault("", " | ".join(",".join(map(str, g)) for g in self.groups), ends="partition")
        self.groups = None
        self._save()
        calls = [h.unblock.remote(self.members) for s, h in self.handles.items() if s not in self.paused]
        await asyncio.gather(*calls, return_exceptions=True)

    async def stop(self, wipe: bool = False) -> list[str]:
        """Stop every replica (and the snapshot actor). ``wipe`` then deletes every replica's data
        directory, on whichever node holds it; returns the directories deleted."""
        if self._watch is not None:  # nothing comes back from now on
            self._watch.cancel()
            self._watch = None
        self.lost.clear()
        for sid in list(self.paused):
            try:
                await self._signal(sid, signal.SIGCONT)
            except NotRunningError:  # its host is gone: Ray's kill below is all there is to do
                pass
        self.paused.clear()
        calls = [asyncio.wait_for(h.stop.remote(), 5) for h in self.handles.values()]
        await asyncio.gather(*calls, return_exceptions=True)
        for h in self.handles.values():
            ray.kill(h, no_restart=True)
        self.handles.clear()
        self._save()
        if self.snapshotter is not None:
            ray.kill(self.snapshotter, no_restart=True)
            self.snapshotter = None
        if not wipe:
            return []
        nodes = await self._nodes()
        wipes = []
        for sid in [*self.members, *sorted(self.departed)]:
            node = homes.node_for(self.home[sid], nodes) if sid in self.home else None
            if node is not None:  # a host without a live node keeps its disk
                wipes.append(wipe_dir.options(
                    num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
                ).remote(self.data_dir(sid), str(Path(self.cfg.data_dir) / self.name)))
        return [d for d in await asyncio.gather(*wipes) if d]


async def _answers(handle: Any) -> bool:
    try:
        await asyncio.wait_for(handle.status.remote(), 2)
    except Exception:  # dead (RayActorError) or not answering
        return False
    return True


async def _gone(pid: int, handle: Any, local: bool) -> bool:
    """Is the killed replica's process gone? Locally: no process by that pid, or a zombie.
    Elsewhere: its actor no longer answers (a call fails once Ray has seen it die)."""
    if not local:
        return not await _answers(handle)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
    except OSError:  # no /proc here, or it was reaped meanwhile
        return not os.path.exists(f"/proc/{pid}") and os.path.isdir("/proc")


def _name(ensemble: str, sid: int, incarnation: int) -> str:
    """A replica actor's name: unique per incarnation (a crashed actor's name lingers in the GCS
    for a moment)."""
    return f"{ensemble}:replica-{sid}:{incarnation}"


async def _name_freed(name: str, timeout: float = 10.0) -> None:
    """Until Ray no longer knows an actor killed by that name (ray.kill returns before the GCS
    frees it), so that starting the ensemble again can take the name; gives up after
    ``timeout`` (the next start then says the name is taken)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return
        await asyncio.sleep(0.05)
    log.warning("actor %s still known to Ray %.0f s after it was killed: starting it again may fail", name, timeout)


def _addr(a: Any) -> tuple[str, int] | None:
    """A (host, port) as the replica's start reported it (a list, once through the checkpoint)."""
    return (str(a[0]), int(a[1])) if a else None
