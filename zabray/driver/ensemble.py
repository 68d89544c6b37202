"""The driver API: start, connect to, observe, write to and break an ensemble.

``Ensemble.start`` and ``Ensemble.connect`` join the Ray cluster named by ``address=`` or
``RAY_ADDRESS`` (as ``ray.init`` does) or start a local one. The ensemble lives in a
detached, named controller actor in the ``zabray`` namespace, so another process (a CLI, a
notebook) can ``connect`` to it by name. Writes go over TCP to the replicas, not through Ray.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.names import NAMESPACE, controller_name, ensemble_of, injector_name
from actors.status import ReplicaStatus
from zabray import yamlfile
from zabray.client.broadcast import EnsembleClient, LoopThread, as_value
from zabray.config import EnsembleConfig
from zabray.driver.raylink import actor_error, init_ray
from zabray.errors import (
    ConfigError,
    NoQuorumError,
    NotRunningError,
    RequestTimeoutError,
    StorageError,
)
from zabray.net import tls
from zabray.net.keyfiles import new_secret, read_secret
from zabray.protocol.zxid import Zxid
from zabray.replay.crashpoints import CrashPoints, check_point
from zabray.replay.crashpoints import crash_points as crash_points_of
from zabray.replay.holds import HoldControl

if TYPE_CHECKING:
    from storage.diskview import DiskView
    from zabray.client.session import Session

log = logging.getLogger(__name__)


def preflight(replicas: int, observers: int, name: str, config: str | os.PathLike[str] | dict[str, Any] | None = None,
              **overrides: Any) -> tuple[EnsembleConfig, Any]:
    """The config and the ensemble's secret, once everything the driver can check without Ray
    holds: the sizes, the name, the keys, the secret file, the TLS files. A ``ConfigError``
    names what to fix."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigError(f"replicas must be a positive integer, got {replicas!r}")
    if isinstance(observers, bool) or not isinstance(observers, int) or observers < 0:
        raise ConfigError(f"observers must be a non-negative integer, got {observers!r}")
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise ConfigError(f"name {name!r}: use letters, digits, '-', '_' or '.'")
    cfg = EnsembleConfig.load(config, **overrides)
    secret = ensemble_secret(cfg)
    tls.driver_context(cfg.to_dict())  # the TLS files must load here too, or the driver could not connect
    if cfg.zk_sasl_jaas_file and Path(cfg.zk_sasl_jaas_file).exists():
        cfg.sasl_users()  # a mistake in it named now; each replica reads it again on its node
    return cfg, secret


def ensemble_secret(cfg: EnsembleConfig) -> Any:
    """The secret a new ensemble's members share: from ``secret_file``, or fresh (None: auth off)."""
    if not cfg.auth:
        return None
    return read_secret(cfg.secret_file) if cfg.secret_file else new_secret()


def running_ensembles() -> list[str]:
    """The names of the ensembles whose controllers run in the connected Ray cluster, sorted."""
    from ray.util import list_named_actors

    names = (ensemble_of(a["name"]) for a in list_named_actors(all_namespaces=True) if a["namespace"] == NAMESPACE)
    return sorted(n for n in names if n is not None)


def _named_injector(name: str) -> Any:
    """The fault injector of ensemble ``name`` if one runs in this Ray cluster, else None."""
    import ray

    try:
        return ray.get_actor(injector_name(name), namespace=NAMESPACE)
    except ValueError:
        return None


class Ensemble(HoldControl):
    """A handle on a running ensemble. Thread-safe for the sync methods. Message holds
    (``hold``, ``release``, ``unhold``, ``held``) come from ``zabray.replay.holds.HoldControl``."""

    def __init__(self, name: str, controller: Any, info: dict[str, Any], secret: Any = None) -> None:
        self.name = name
        self._secret = secret  # zabray.wire.auth.Secret for the client port (None: auth is off)
        self._controller = controller
        self._injector: Any = None  # made by the first fault (``_fault_injector``)
        self.info = info
        self._loop: LoopThread | None = None
        self._client: EnsembleClient | None = None

    # -- creation -------------------------------------------------------------------------------

    @classmethod
    def start(cls, replicas: int = 3, observers: int = 0, config: str | os.PathLike[str] | dict[str, Any] | None = None,
              name: str = "default", *, address: str | None = None, run_dir: str | os.PathLike[str] | None = None,
              **overrides: Any) -> Ensemble:
        """Start ``replicas`` voters and ``observers`` observers; returns once all are listening.

        ``config`` is a YAML path or dict (default ``configs/local.yaml``); keyword ``overrides``
        replace single keys (``Ensemble.start(3, tick_ms=10)``).
        """
        cfg, secret = preflight(replicas, observers, name, config, **overrides)
        init_ray(address)
        import ray

        taken = ConfigError(f"an ensemble named {name!r} is already running; stop it or pick another name")
        try:
            ray.get_actor(controller_name(name), namespace=NAMESPACE)
        except ValueError:  # not found: the name is free
            pass
        else:
            raise taken
        run = Path(run_dir) if run_dir else Path(cfg.run_dir) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            run.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot create the run directory {run} (run_dir): {e.strerror or e}; "
                              "set run_dir to a writable directory") from None
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from actors.checkpoint import FILE

        (run / FILE).unlink(missing_ok=True)  # a new ensemble: nothing for its controller to adopt
        # The controller lives on the driver's node (the head, usually), not on a worker node
        # that a user may take away to exercise recovery.
        here = ray.get_runtime_context().get_node_id()
        try:  # another process may take the name between the check above and here
            # The actors' classes are imported where an actor is made: a command that only
            # talks to a running ensemble (status, kill, ...) never loads the replica's code.
            from actors.controller import EnsembleController

            controller: Any = ray.remote(EnsembleController).options(
                name=controller_name(name), namespace=NAMESPACE, lifetime="detached", num_cpus=0,
                # Ray starts a controller whose process died again, on its node; it finds its
                # replicas (detached, serving all the while) by name (actors.checkpoint).
                max_restarts=-1, max_concurrency=100,
                scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
            ).remote(name, replicas, observers, cfg.to_dict(), str(run.resolve()), secret)
        except ValueError:  # ActorAlreadyExistsError
            raise taken from None
        try:
            info: dict[str, Any] = ray.get(controller.start.remote(), timeout=120)
        except ray.exceptions.RayTaskError as e:
            ray.kill(controller)
            raise actor_error(e) from None
        except Exception:
            ray.kill(controller)
            raise
        # The fault injector is created at the first fault (``_inject``): a Ray worker costs a
        # second or two of CPU to start, which an ensemble nobody injects faults into never needs.
        # One left behind by an earlier ensemble of this name would drive that one's controller.
        stale = _named_injector(name)
        if stale is not None:
            ray.kill(stale)
        log.info("ensemble %s started: %s", name, info["clients"])
        return cls(name, controller, info, secret)

    @classmethod
    def connect(cls, name: str = "default", *, address: str | None = None) -> Ensemble:
        """A handle on an ensemble started earlier (by this or another process)."""
        init_ray(address)
        import ray

        try:
            controller = ray.get_actor(controller_name(name), namespace=NAMESPACE)
        except ValueError:
            try:  # only a hint: the error is the missing name whatever Ray answers here
                running = running_ensembles()
                hint = (f"; running here: {', '.join(map(repr, running))}" if running
                        else "; none is running here")
            except Exception:  # noqa: BLE001
                hint = ""
            raise NotRunningError(f"no ensemble named {name!r} is running in this Ray cluster{hint}") from None
        info: dict[str, Any]
        secret: Any
        info, secret = ray.get([controller.describe.remote(), controller.secret.remote()])
        return cls(name, controller, info, secret)

    # -- control plane (Ray calls) -----------------------------------------------------------------

    def _call(self, method: str, *args: Any, timeout: float = 60, actor: Any = None) -> Any:
        import ray

        try:
            return ray.get(getattr(actor or self._controller, method).remote(*args), timeout=timeout)
        except ray.exceptions.RayActorError:
            raise NotRunningError(f"ensemble {self.name!r} is not running") from None
        except ray.exceptions.GetTimeoutError:
            raise RequestTimeoutError(f"{method} on ensemble {self.name!r} took over {timeout} s") from None
        except ray.exceptions.RayTaskError as e:
            raise actor_error(e) from None

    def status(self) -> list[ReplicaStatus]:
        """Per replica: sid, role/state, epoch, last zxid, last delivered zxid, node, pid, alive."""
        got: list[ReplicaStatus] = self._call("status")
        return got

    def connect_string(self, secure: bool = False) -> str:
        """``host:port,...`` of every replica's ZooKeeper client port, voters and observers, in
        sid order: what kazoo's ``hosts=`` and zkCli.sh's ``-server`` take; with ``secure`` the
        TLS ports (``zk_secure_client_port``). A ``ConfigError`` if there are none."""
        status = sorted(self.status(), key=lambda r: r.sid)
        addrs = [a for a in ((r.zk_secure_client if secure else r.zk_client) for r in status) if a]
        if not addrs:
            if secure:
                raise ConfigError(f"ensemble {self.name!r} has no secure ZooKeeper port: set zk_secure_client_port")
            raise ConfigError(f"ensemble {self.name!r} serves no ZooKeeper clients: start it with service: zookeeper")
        return ",".join(f"{h}:{p}" for h, p in addrs)

    # -- membership ---------------------------------------------------------------------------------

    def add_replica(self, role: str = "participant", *, node: str | None = None, timeout: float = 120) -> int:
        """Add a replica: placed on a Ray node (the least loaded, or ``node``: an id prefix or
        address), started outside the configuration, synced as a follower without a vote, then
        made a member with ``role`` ("participant": a voter, or "observer") by a reconfiguration.
        Returns its sid. Needs ``reconfig_enabled``; a refusal raises ``ReconfigError``."""
        got = self._call("add_replica", role, node, timeout, timeout=timeout + 30)
        self._refresh_addresses()
        return int(got["sid"])

    def remove_replica(self, sid: int, *, timeout: float = 60) -> int:
        """Remove replica ``sid`` by a reconfiguration (the leader too: it hands over); the
        replica leaves, and is stopped once the new configuration is in force everywhere.
        Returns the new configuration's version."""
        got = self._call("remove_replica", int(sid), timeout, timeout=timeout + 30)
        self._refresh_addresses()
        return int(got["version"])

    def reconfigure(self, voters: list[int], observers: list[int] | None = None, *, timeout: float = 180) -> int:
        """Make the membership exactly ``voters`` and ``observers`` in one reconfiguration;
        replicas not running yet are placed, started and synced first. Returns the version."""
        got = self._call("reconfigure", [int(v) for v in voters], [int(o) for o in observers or ()], timeout,
                         timeout=timeout + 30)
        self._refresh_addresses()
        return int(got["version"])

    def reconfig(self, joining: str | None = None, leaving: str | None = None, members: str | None = None,
                 from_config: int = -1, *, timeout: float = 60) -> tuple[int, str]:
        """ZooKeeper's reconfig as it is (zkCli's ``reconfig``, kazoo's ``client.reconfig``):
        ``joining`` server specs and ``leaving`` sids, comma-separated, or ``members``; only if
        the configuration's version is ``from_config`` (-1: any). Returns (version, the new
        configuration as /zookeeper/config holds it). Nothing is started or stopped here but
        the replicas it removes."""
        got = self._call("reconfig", joining, leaving, members, int(from_config), timeout, timeout=timeout + 30)
        self._refresh_addresses()
        return int(got["version"]), str(got["config"])

    def leader(self) -> int | None:
        """The established leader with the highest epoch, or None."""
        best = None
        for s in self.status():
            if s.established_leader and (best is None or s.epoch > best.epoch):
                best = s
        return best.sid if best else None

    def wait_for_leader(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while True:
            sid = self.leader()
            if sid is not None:
                return sid
            if time.monotonic() > deadline:
                raise NoQuorumError(f"no leader established within {timeout} s: {self._brief()}")
            time.sleep(0.02)

    def _brief(self) -> str:
        return ", ".join(f"{s.sid}:{s.state}" for s in self.status())

    def histories(self, after: int = 0) -> dict[int, list[tuple[Zxid, str]]]:
        """Every live replica's delivered txns as (zxid, value digest), in delivery order."""
        raw = self._call("histories", after, timeout=120)
        return {int(s): [(Zxid(z), d) for z, d in h] for s, h in raw.items()}

    # -- faults (all through the fault injector) ---------------------------------------------------

    def _inject(self, method: str, *args: Any, timeout: float = 60) -> Any:
        return self._call(method, *args, timeout=timeout, actor=self._fault_injector())

    def prepare_faults(self) -> None:
        """Start the ensemble's fault injector now, unless a fault already did, and wait until
        it runs. The first fault starts it otherwise, and a Ray worker takes a second or so to
        start: call this before timing a first fault."""
        self._fault_injector(ready=True)

    def _fault_injector(self, ready: bool = False) -> Any:
        """The ensemble's fault injector actor, created by the first handle that needs it (on the
        controller's node: like the controller, it must outlive any node a user takes away);
        ``ready`` waits until it runs."""
        if self._injector is None:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            node = self.info.get("controller_node") or ray.get_runtime_context().get_node_id()
            from actors.faults import FaultInjector  # (only when faults are asked for: see start)

            self._injector = ray.remote(FaultInjector).options(
                name=injector_name(self.name), namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
                num_cpus=0, max_concurrency=100, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(self.name)
        if ready:
            self._call("__ray_ready__", actor=self._injector)
        return self._injector

    def kill(self, sid: int) -> None:
        """Crash replica ``sid`` (its process dies at once; its disk is kept)."""
        self._inject("kill", sid)

    def restart(self, sid: int, fresh: bool = False, crash_points: CrashPoints | None = None) -> None:
        """Recover ``sid`` from its disk on its node; ``fresh=True`` rebuilds it from the leader.

        ``crash_points`` (``[("recv:NEWLEADER", 1), ...]``, ``{"recv:NEWLEADER": 1}`` or names)
        are armed in the new process before it opens its disk or any connection, so it dies at
        the first of them it reaches, e.g. during its own recovery. ``ConfigError`` on an
        unknown name, before anything is restarted. Message holds on what ``sid`` sends are
        armed in the new process the same way (``zabray.replay.holds``)."""
        points = [(c.point, c.nth) for c in crash_points_of(crash_points)]
        self._inject("restart", sid, fresh, points or None)
        self._refresh_addresses()

    def pause(self, sid: int) -> None:
        """Freeze the replica's process (SIGSTOP); its sockets stay open."""
        self._inject("pause", sid)

    def resume(self, sid: int) -> None:
        self._inject("resume", sid)

    def partition(self, *groups: list[int] | tuple[int, ...]) -> None:
        """Cut the TCP links between groups, both ways: ``ens.partition([1], [2, 3])``. Replicas
        no group names form one more group (``ens.partition([1])`` cuts 1 off from the rest)."""
        self._inject("partition", [list(g) for g in groups])

    def partition_oneway(self, src: list[int], dst: list[int]) -> None:
        """Hold everything ``src`` sends to ``dst`` (``dst`` still reaches ``src``) until ``heal``."""
        self._inject("oneway", list(src), list(dst))

    def delay(self, src: list[int], dst: list[int], delay_ms: float) -> None:
        """Delay everything ``src`` sends to ``dst`` by ``delay_ms`` until ``heal``."""
        self._inject("delay", list(src), list(dst), float(delay_ms))

    def cut(self, src: list[int], dst: list[int]) -> int:
        """Close the current channels between ``src`` and ``dst`` mid-iteration."""
        return int(self._inject("cut", list(src), list(dst)))

    def heal(self) -> None:
        """Restore every link (partitions, one-way partitions, delays) and stop every message
        hold, releasing what it held."""
        self._inject("heal")

    def disk_fault(self, sid: int, kind: str, delay_ms: float = 0.0) -> None:
        """``fsync-fail`` (the next fsync fails: the replica stops), ``slow-fsync`` (each waits
        ``delay_ms``), ``lose-unsynced`` (a power cut), or ``clear``."""
        self._inject("disk", sid, kind, float(delay_ms))

    def arm_crash(self, sid: int, point: str, nth: int = 1) -> None:
        """Kill ``sid`` the ``nth`` time it passes crash ``point`` (`zabray faults points`);
        replaces whatever was armed on it."""
        self._inject("arm", sid, check_point(point), nth)

    def arm_crashes(self, sid: int, points: CrashPoints) -> None:
        """Arm several crash points on running ``sid`` at once, each with its own nth (same
        shapes as ``restart``'s ``crash_points``); the first reached kills it. Replaces what
        was armed; an empty list disarms."""
        self._inject("arm_many", sid, [(c.point, c.nth) for c in crash_points_of(points)])

    def run_schedule(self, schedule: str | os.PathLike[str] | dict[str, Any], seed: int | None = None,
                     wait: bool = True, timeout: float = 600) -> dict[str, Any]:
        """Run a fault schedule (a YAML path or mapping). Returns its progress: with ``wait``, once
        it has finished, healed everything and restarted every replica that was down."""
        data = schedule if isinstance(schedule, dict) else yamlfile.load(schedule, "schedule file")
        plan = self._inject("run_schedule", data, seed)
        if not wait:
            return {"plan": plan}
        deadline = time.monotonic() + timeout
        while True:
            prog = self._inject("progress")
            if not prog["running"]:
                break
            if time.monotonic() > deadline:
                raise RequestTimeoutError(f"schedule still running after {timeout} s")
            time.sleep(0.2)
        if prog["error"]:
            raise NotRunningError(f"the schedule stopped: {prog['error']}")
        self._refresh_addresses()
        return {"plan": plan, **prog}

    def schedule_progress(self) -> dict[str, Any]:
        return dict(self._inject("progress"))

    def stop(self, wipe: bool = False) -> list[str]:
        """Stop every replica and the controller. Data directories stay on disk (a replica
        preallocates 128 MB of log) unless ``wipe``; returns the directories wiped."""
        import ray

        wiped: list[str] = []
        try:
            wiped = list(self._call("stop", wipe, timeout=120) or [])
        finally:
            injector = self._injector or _named_injector(self.name)  # another handle may have made it
            for actor in (injector, self._controller):
                try:
                    if actor is not None:
                        ray.kill(actor)
                except Exception:  # already gone
                    pass
            self.close()
        return wiped

    def close(self) -> None:
        """Drop this handle's client connections (the ensemble keeps running)."""
        if self._client is not None and self._loop is not None:
            self._loop.loop.call_soon_threadsafe(self._client.close)
            self._loop.stop()
        self._client = None
        self._loop = None

    # -- data path (TCP) ---------------------------------------------------------------------------

    def _addresses(self) -> dict[int, tuple[str, int]]:
        return {int(s): (a[0], int(a[1])) for s, a in self.info["clients"].items()}

    def _refresh_addresses(self) -> None:
        self.info = self._call("describe")
        if self._client is not None and self._loop is not None:
            client, addrs = self._client, self._addresses()
            self._loop.loop.call_soon_threadsafe(client.update_addresses, addrs)

    def _ensure_client(self) -> tuple[LoopThread, EnsembleClient]:
        if self._client is None or self._loop is None:
            self._loop = LoopThread()

            def refresh() -> dict[int, tuple[str, int]]:
                self.info = self._call("describe", timeout=10)
                return self._addresses()

            self._client = EnsembleClient(self.name, self._addresses(), refresh, secret=self._secret,
                                          ssl=tls.driver_context(self.info.get("config", {})))
        return self._loop, self._client

    def _check_raw(self) -> None:
        """Raw values are refused on a ZooKeeper ensemble: its state machine reads every txn as a
        ZooKeeper request, so raw bytes would commit as an error txn that changes nothing, and an
        acknowledgement would claim a write that no check could ever find."""
        if self.info.get("config", {}).get("service") == "zookeeper":
            raise ConfigError(f"ensemble {self.name!r} runs service: zookeeper, which takes ZooKeeper "
                              f"requests, not raw values: write through a session (ens.session(), or `zabray create|set`)")

    def _check_replica(self, replica: int | None) -> None:
        """``ConfigError`` unless ``replica`` is None or a member (voter or observer)."""
        if replica is None:
            return
        members = [int(s) for s in self.info.get("voters", [])] + [int(s) for s in self.info.get("observers", [])]
        if isinstance(replica, bool) or not isinstance(replica, int) or replica not in members:
            raise ConfigError(f"no replica {replica!r} in ensemble {self.name!r} (replicas are {members})")

    def submit(self, value: bytes, timeout: float = 10.0, *, replica: int | None = None) -> Zxid:
        """Replicate ``value``; returns its zxid once committed. Raises ``UncertainOutcomeError``
        if the write may or may not have committed, ``NoQuorumError`` if nothing committed it.
        ``replica`` sends it to that replica (a follower or observer forwards it to the leader;
        a refusal is retried there until ``timeout``; ``NotRunningError`` if it cannot be reached)
        instead of the leader. ``service: broadcast`` only (``ConfigError`` on a ZooKeeper
        ensemble: use a session)."""
        self._check_raw()
        self._check_replica(replica)
        loop, client = self._ensure_client()
        return loop.run(client.submit(value, timeout, replica))

    async def submit_async(self, value: bytes, timeout: float = 10.0, *, replica: int | None = None) -> Zxid:
        """``submit`` for coroutines; many may be in flight at once."""
        self._check_raw()
        self._check_replica(replica)
        loop, client = self._ensure_client()
        fut = asyncio.run_coroutine_threadsafe(client.submit(value, timeout, replica), loop.loop)
        return await asyncio.wrap_future(fut)

    def submit_many(self, values: list[bytes], timeout: float = 30.0, *,
                    replica: int | None = None) -> list[Zxid | BaseException]:
        """Submit all at once (pipelined); one result or exception per value, in order. A value
        that is not bytes is a ``ConfigError`` before any is sent."""
        values = [as_value(v, f"submit_many: value {i}") for i, v in enumerate(values)]
        self._check_raw()
        self._check_replica(replica)
        loop, client = self._ensure_client()

        async def go() -> list[Any]:
            return await asyncio.gather(*(client.submit(v, timeout, replica) for v in values),
                                        return_exceptions=True)

        return loop.run(go())

    # -- ZooKeeper sessions (service: zookeeper) ------------------------------------------------

    def session(self, timeout: float = 10.0, *, connect_timeout: float = 30.0, replica: int | None = None,
                auth: list[tuple[str, str]] | None = None) -> Session:
        """A new ZooKeeper ``Session`` (``zabray.client.session``) with ``timeout`` seconds; needs an
        ensemble started with ``service="zookeeper"``. ``replica`` picks the first replica to try;
        ``auth``: (scheme, credential) pairs it authenticates with (``[("digest", "super:pw")]``)."""
        if self.info.get("config", {}).get("service", "zookeeper") != "zookeeper":
            raise ConfigError(f"ensemble {self.name!r} runs service: broadcast; start it with service='zookeeper'")

        def refresh() -> dict[int, tuple[str, int]]:
            import ray

            if not ray.is_initialized():  # never auto-start Ray from a session's background thread
                raise NotRunningError("Ray is not initialized")
            self.info = self._call("describe", timeout=10)
            return self._addresses()

        from zabray.client.session import Session  # (the ZooKeeper client's code: only when asked, see start)

        return Session(self.name, self._addresses(), timeout=timeout, refresh=refresh,
                       connect_timeout=connect_timeout, replica=replica, ssl=tls.driver_context(self.info.get("config", {})),
                       auth=auth or ())

    def session_actor(self, timeout: float = 10.0) -> Any:
        """A session owned by its own Ray actor (``actors.session_actor.SessionActor``): call its methods
        with ``.remote()``; ``ray.kill`` it to make the client vanish without closing."""
        import ray

        if self.info.get("config", {}).get("service", "zookeeper") != "zookeeper":
            raise ConfigError(f"ensemble {self.name!r} runs service: broadcast; start it with service='zookeeper'")
        from actors.session_actor import SessionActor  # (only when asked for: see start)

        handle: Any = ray.remote(SessionActor).options(num_cpus=0, namespace=NAMESPACE).remote(
            self.name, self._addresses(), timeout)
        ray.get(handle.session_id.remote(), timeout=60)  # connected
        return handle

    def inspect(self, sid: int) -> DiskView:
        """A read-only view of replica ``sid``'s disk (``storage.diskview``): its epochs,
        snapshots and logged txns (the tail past its newest snapshot is durable, but whether it
        committed is not recorded on disk).
        Works whether the replica runs or not: read here when its disk is on this node, else by
        a task on its node. A running replica's files may change while read, so that is retried."""
        import ray

        from storage.diskview import read_disk  # (only `inspect` reads disks: see start)

        self._check_replica(sid)
        self.info = self._call("describe")
        from actors import homes

        path = str(self.info["data_dirs"][sid])
        home = self.info["replicas"][sid].get("home") or f"node:{self.info['replicas'][sid]['node_id']}"
        found = homes.node_for(home, ray.nodes())  # its host, whichever Ray node runs there now
        if found is None:
            raise NotRunningError(f"{homes.describe(home)}, which holds replica {sid}'s disk, has no live Ray node")
        node = found
        for attempt in range(3):
            try:
                if node == ray.get_runtime_context().get_node_id():
                    return read_disk(path)
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                task: Any = ray.remote(read_disk).options(
                    num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
                try:
                    view: DiskView = ray.get(task.remote(path), timeout=120)
                    return view
                except ray.exceptions.RayTaskError as e:
                    raise actor_error(e) from None
                except ray.exceptions.GetTimeoutError:
                    raise RequestTimeoutError(f"reading replica {sid}'s disk took over 120 s") from None
            except StorageError:  # a CorruptionError too: a running replica may have moved files
                running = any(s.alive for s in self.status() if s.sid == sid)
                if attempt == 2 or not running:
                    raise
        raise AssertionError("unreachable")

    def snapshot(self, sid: int) -> dict[str, int]:
        """Ask replica ``sid`` to take a snapshot now."""
        return self._call("snapshot", sid)

    def __enter__(self) -> Ensemble:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
