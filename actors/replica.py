"""One replica's IO shell: the Zab core driven by its disk, its TCP peers, its clients and a clock.

``ReplicaServer`` runs on an asyncio loop and has nothing Ray-specific; ``ReplicaActor`` wraps
it as a Ray actor, and Ray calls only reach it on the control plane (start, status, faults).

Data path: client frames -> ``Submit`` -> the core -> ``Send``s batched in the replica's
``Outbox`` and written when the callback that queued them returns, after the trace rows that
record them; ``Persist`` actions queue up and one worker thread makes each accumulated batch
durable with one fdatasync (group commit, ``actors/group_commit.py``), then feeds
``Persisted(upto)`` back, which is what releases ACKs. A storage failure stops the replica: it never goes on as if a write were durable.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors import gc_policy
from actors.clientport import ClientConn
from actors.effects import ReplicaEffects
from actors.fault_gate import FaultGate
from actors.faultpoints import ReplicaFaults
from actors.group_commit import GroupCommit
from actors.metrics import ReplicaMetrics
from actors.reconfig_admin import AdminReconfigs
from actors.services import BroadcastService, HostedService
from actors.stall_watch import StallWatch
from actors.status import ReplicaReport
from actors.transport import PeerTransport
from storage.disk import DiskStore
from storage.fsutil import atomic_write, read_file
from zabray.config import EnsembleConfig
from zabray.errors import ConfigError, NotRunningError, RequestTimeoutError, ZabError
from zabray.net import tls
from zabray.net.batching import Outbox
from zabray.protocol.actions import DecodeSnapshot, EncodeSnapshot, Outcome
from zabray.protocol.events import ChannelId, Event, SnapshotDecoded, SnapshotEncoded, SnapshotRequested, Tick
from zabray.protocol.executor import Effects, StopStep, execute
from zabray.protocol.leader import Leader
from zabray.protocol.learner_handle import Stage
from zabray.protocol.membership import ConfigChange
from zabray.protocol.messages import PeerState
from zabray.protocol.node import Node
from zabray.protocol.role import Phase
from zabray.replay.holds import HoldPattern
from zabray.trace import records as trace
from zabray.trace.writer import TraceWriter
from zabray.wire.auth import AuthFailed, Secret
from zabray.wire.four_letter import AdminView, Latency, allowed_words

if TYPE_CHECKING:  # a broadcast replica starts without the ZooKeeper service's modules
    from actors.zkport import ZkClientConn
    from actors.zkservice import ZooKeeperService

log = logging.getLogger(__name__)

# Znodes per slice of a snapshot being encoded (``_encode_slice``): 2-4 ms of CPU for 1 KB values
# on this project's 2-core machine; a slice also stops at ``zabray.tree.image.SLICE_BYTES``.
_SNAPSHOT_SLICE = 500
# Znodes per slice of a SNAP being decoded (``_decode_slice``): 15-30 ms of CPU for 1 KB values there.
_RESTORE_SLICE = 2000


def advertised_host(bind: str) -> str:
    """The address peers and clients dial: the bind address, or for a wildcard bind (0.0.0.0,
    ::, "") this node's own IP as Ray knows it, since other hosts cannot dial a wildcard."""
    if bind not in ("0.0.0.0", "::", ""):
        return bind
    import ray

    return str(ray.util.get_node_ip_address())


def next_incarnation(data_dir: Path, at_least: int = 0) -> int:
    """Bump and durably record the incarnation: channel ids must never repeat across restarts,
    even for a replica rebuilt from an empty disk (the controller passes ``at_least``)."""
    path = data_dir / "incarnation"
    current = int(read_file(str(path)).decode()) if path.exists() else -1
    nxt = max(current + 1, at_least)
    atomic_write(str(data_dir), "incarnation", [str(nxt).encode()])
    return nxt


class ReplicaServer:
    """One replica: its core, its disk (``commits``), its peers (``transport``), its clients
    (``service`` and the client ports), and the faults injected into it (``gate``)."""

    def __init__(self, *, ensemble: str, sid: int, config: EnsembleConfig | dict[str, Any], voters: list[int],
                 observers: list[int], data_dir: str, run_dir: str | None = None,
                 min_incarnation: int = 0, secret: Secret | None = None,
                 crash_points: Sequence[tuple[str, int]] = (),
                 holds: Sequence[tuple[int, HoldPattern]] = (),
                 ports: dict[str, int] | None = None, rejoining: bool = False,
                 servers: dict[int, str] | None = None, joining: bool = False) -> None:
        """``crash_points`` and message ``holds`` are armed here, before ``start`` opens its disk
        or any socket, so a replica can die at (or be held in) the first matching step of its
        own recovery. ``ports`` ({"quorum", "client", "zk_client"}: port) are where a previous
        incarnation listened, taken again where the config says 0 ("pick one"). ``rejoining``:
        its data directory was just wiped while the ensemble went on (``DurableState.rejoining``).
        ``voters``/``observers`` (and ``servers``, their addresses as ZooKeeper writes them) are
        the configuration it starts from unless its disk holds a newer one; ``joining``: it is
        being added, and may be outside that configuration (``Node``'s ``join``)."""
        self.ensemble = ensemble
        self.secret = secret  # proves membership to peers and broadcast clients; never logged
        self.sid = sid
        self.cfg = config = EnsembleConfig.load(config)
        self.proto = config.protocol(frozenset(voters), frozenset(observers),
                                     tuple(sorted((int(k), str(v)) for k, v in (servers or {}).items())))
        self.joining = joining
        self.admin = AdminReconfigs(config.service == "zookeeper")
        self.data_dir = Path(data_dir)
        self.run_dir = Path(run_dir) if run_dir else None
        self.min_incarnation = min_incarnation
        self.previous_ports = dict(ports or {})
        self.rejoining = rejoining
        self.node: Node | None = None
        self.transport: PeerTransport | None = None
        self.fatal: str | None = None
        self.stats: dict[str, int] = {"submitted": 0, "committed": 0, "failed": 0, "delivered": 0,
                                      "syncs": 0, "synced_actions": 0, "bad_client_frames": 0,
                                      "client_auth_failures": 0, "zk_requests": 0, "zk_frames_out": 0, "zk_bytes_in": 0,
                                      "bad_zk_frames": 0, "zk_throttled": 0, "client_throttled": 0,
                                      "snapshots_encoded": 0, "snapshot_slices": 0,
                                      "snaps_decoded": 0, "snap_decode_slices": 0}
        self._auth_logged: set[str] = set()
        self._events: deque[Event] = deque()  # core events waiting for the current step to end
        self._stepping = False
        self.commits: GroupCommit | None = None  # the disk's group commit, once start() opened it
        self.effects: ReplicaEffects | None = None  # how the core's actions are carried out, once started
        # Peer channels and client connections, written when the callback that queued frames
        # returns, after the trace rows of that callback reach the kernel; then the group
        # commit waiting for its turn starts (a leader's PROPOSALs are on the wire before its
        # own fdatasync, as with the call_soon below).
        self.outbox = Outbox(then=self._sync_now, before=self._trace_out)
        self._io = ThreadPoolExecutor(1, thread_name_prefix=f"zab-io-{sid}")
        self._tasks: list[asyncio.Task[None]] = []
        self._client_server: asyncio.base_events.Server | None = None
        self._clients: set[ClientConn] = set()
        self._zk_server: asyncio.base_events.Server | None = None
        self._zk_secure_server: asyncio.base_events.Server | None = None
        self._zk_clients: set[ZkClientConn] = set()
        self.zk_latency = Latency()  # of ZooKeeper-port requests, for srvr and mntr
        self.admin_base = (0, 0)  # zk_requests and zk_frames_out when srst last reset them
        self.started_at = time.monotonic()
        self._trace: TraceWriter | None = None
        self._snap_due = self._snapshot_interval()
        self.faults = ReplicaFaults(crash_points, sid, holds)
        self.gate = FaultGate(self, self.faults)
        self.dying = False  # a crash point fired after a send: the process dies at the next turn
        self.departed: int | None = None  # the configuration that removed this replica
        self.stopped = False  # stop() began: no group commit starts or releases anything
        self.zk: ZooKeeperService | None = None
        if config.service == "zookeeper":
            # Imported here, not at the top: a broadcast replica never loads the ZooKeeper
            # service's modules (tests/actors/test_replica_imports.py), a load-cost choice, no cycle.
            from actors.zkservice import ZooKeeperService

            self.zk = ZooKeeperService(sid, self.stats, config)
        self.service: HostedService = self.zk if self.zk is not None else BroadcastService(self.stats)
        self._service_role = (False, False, False)  # (serving, leading, looking) as the service last heard it
        self.metrics = ReplicaMetrics(ensemble, sid)
        self.stall_watch = StallWatch(f"replica {sid}", self.stats, config.sync_limit * config.tick_ms / 4000)
        self._logged_state: PeerState | None = None

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        self.loop = loop
        if os.nice(0) > 0:
            log.warning("replica %d runs at nice %d: a busy machine will starve it (start Ray with "
                        "RAY_worker_niceness=0 in its environment)", self.sid, os.nice(0))
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.incarnation = next_incarnation(self.data_dir, self.min_incarnation)
            self.store = DiskStore(self.data_dir / "store", keep_snapshots=self.cfg.keep_snapshots,
                                   fsync=self.cfg.fsync)
        except OSError as e:  # a path on this node that cannot be made or written: the operator's to fix
            raise ConfigError(f"replica {self.sid} cannot use its data directory {self.data_dir} (data_dir): "
                              f"{e.strerror or e}; set data_dir to a writable directory on its node") from None
        if self.zk is not None:  # the SASL users, from the operator's file on this node (never logged)
            self.zk.svc.sasl_users = self.cfg.sasl_users()
        if self.rejoining:  # before anything else: a crash from here on still comes back rejoining
            await loop.run_in_executor(self._io, self.store.mark_rejoining)
        durable = await loop.run_in_executor(self._io, self.store.recover)
        if durable.rejoining:
            log.warning("replica %d lost its disk: it counts in no quorum (votes, epochs, acks) until "
                        "a leader has synced it", self.sid)
        self.node = Node(self.sid, self.proto, durable, incarnation=self.incarnation,
                         app=self.service.app, tracing=self.run_dir is not None and self.cfg.trace,
                         join=self.joining)
        gc_policy.configure()
        gc_policy.settle()  # the recovered state, out of every later full collection
        if self.run_dir is not None and self.cfg.trace:
            tdir = self.run_dir / "trace"
            try:
                tdir.mkdir(parents=True, exist_ok=True)
                fh = open(tdir / f"replica-{self.sid}-inc{self.incarnation}.jsonl", "a", buffering=1 << 16)
            except OSError as e:
                raise ConfigError(f"replica {self.sid} cannot write its trace in {tdir} (run_dir): "
                                  f"{e.strerror or e}; set run_dir to a writable directory") from None
            self._trace = TraceWriter(fh, run=self.ensemble, src=f"replica-{self.sid}",
                                            replica=self.sid, inc=self.incarnation)
            self._trace.write(trace.StateChange("STARTED", durable.current_epoch, -1), time.time())
            self.gate.trace_msgs = self.faults.trace_messages = self.cfg.trace_messages
            self.faults.regate()
        self.commits = GroupCommit(self, self.store, self._io)

        async def start_transport(port: int) -> int:
            self.transport = PeerTransport(self.ensemble, self.sid, self.step, host=self.cfg.host, port=port,
                                           secret=self.secret, ssl_server=tls.server_context(self.cfg),
                                           ssl_client=tls.client_context(self.cfg), outbox=self.outbox)
            return await self.transport.start()

        qport = await self._listen("quorum", start_transport)
        assert self.transport is not None
        transport = self.transport
        eport = await self._listen("election", transport.listen_also)
        self.effects = ReplicaEffects(self, self.transport, self.commits, self._trace)
        self.gate.attach(self.effects)
        client_ssl = tls.server_context(self.cfg, require_client_cert=self.cfg.tls_client_certs)

        async def start_clients(port: int) -> int:
            self._client_server = await loop.create_server(
                lambda: ClientConn(self), self.cfg.host, port,
                ssl=client_ssl, ssl_handshake_timeout=10 if client_ssl else None)
            return int(self._client_server.sockets[0].getsockname()[1])

        cport = await self._listen("client", start_clients)
        host = advertised_host(self.cfg.host)
        zk_addr = zk_secure_addr = None
        if self.zk is not None:
            from actors.zkport import ZkClientConn
            from zabray.wire.zkserver import password_key

            key = password_key(self.secret.key if self.secret is not None else None, self.ensemble)
            words = allowed_words(self.cfg.zk_four_letter_words, read_only=self.cfg.zk_read_only)

            async def start_zk(port: int) -> int:
                self._zk_server = await loop.create_server(
                    lambda: ZkClientConn(self, key, words), self.cfg.host, port,
                    ssl=client_ssl, ssl_handshake_timeout=10 if client_ssl else None)
                return int(self._zk_server.sockets[0].getsockname()[1])

            zk_addr = [host, await self._listen("zk_client", start_zk)]
            secure = tls.zk_secure_context(self.cfg)
            if secure is not None:
                async def start_zk_secure(port: int) -> int:
                    self._zk_secure_server = await loop.create_server(
                        lambda: ZkClientConn(self, key, words), self.cfg.host, port, ssl=secure,
                        ssl_handshake_timeout=10)
                    return int(self._zk_secure_server.sockets[0].getsockname()[1])

                zk_secure_addr = [host, await self._listen("zk_secure_client", start_zk_secure)]
        self._tasks.append(loop.create_task(self._ticker()))
        self.stall_watch.start(loop)
        log.info("replica %d (incarnation %d) up: quorum port %d, client port %d, ZooKeeper port %s, last zxid %s",
                 self.sid, self.incarnation, qport, cport, zk_addr[1] if zk_addr else "-", durable.last_zxid)
        return {"sid": self.sid, "quorum": [host, qport], "election": [host, eport], "client": [host, cport],
                "zk_client": zk_addr, "zk_secure_client": zk_secure_addr,
                "pid": os.getpid(), "incarnation": self.incarnation, "data_dir": str(self.data_dir.resolve())}

    async def _listen(self, kind: str, start: Callable[[int], Awaitable[int]]) -> int:
        """Start listening with ``start(port)`` for the config's ``{kind}_port``; returns the
        bound port. A configured base gives port base + sid. Otherwise the port the previous
        incarnation had, so that clients holding a connect string (kazoo, zkCli.sh, the Java
        client) find the restarted replica where ZooKeeper's servers would be; if something took
        that port meanwhile, any free port, with a warning (``status`` shows it). A port or
        host that cannot be had is a ``ConfigError`` naming the key to change."""
        key = f"{kind}_port"
        base: int = getattr(self.cfg, key)
        previous = 0 if base else self.previous_ports.get(kind, 0)
        if previous:
            try:
                return await start(previous)
            except OSError as e:  # taken meanwhile (or, on another node, not to be had)
                log.warning("replica %d: cannot listen on its previous %s %d (%s); listening on a new one",
                            self.sid, key.replace("_", " "), previous, os.strerror(e.errno) if e.errno else e)
        port = base + self.sid if base else 0
        try:
            return await start(port)
        except OSError as e:
            hint = (f"set {key} to another base (replica sid listens on base + sid), or 0 for free ports"
                    if base and e.errno == errno.EADDRINUSE else "`host` must be an address of this node, or 0.0.0.0")
            raise ConfigError(f"replica {self.sid} cannot listen on {self.cfg.host}:{port} ({key}): "
                              f"{os.strerror(e.errno) if e.errno else e}; {hint}") from None

    def _close_clients(self) -> None:
        for srv in (self._client_server, self._zk_server, self._zk_secure_server):
            if srv is not None:
                srv.close()
        for c in list(self._clients):
            c.close()
        for z in list(self._zk_clients):
            z.close()

    async def stop(self) -> None:
        self.stopped = True
        self.stall_watch.stop()
        for t in self._tasks:
            t.cancel()
        self._close_clients()
        if self.transport is not None:
            await self.transport.stop()
        if self._trace is not None:
            self._trace.close()
            self._trace = None
        self._io.shutdown(wait=True)
        store = getattr(self, "store", None)
        if store is not None:  # the IO thread is done with it: release the directory's lock
            store.close()

    def _sync_now(self) -> None:
        if self.commits is not None:
            self.commits.sync_now()

    # -- what the replica's parts ask of it -------------------------------------------------------

    def phase(self) -> Phase | None:
        return self.node.role.phase if self.node is not None else None

    def node_state(self) -> PeerState | None:
        return self.node.state if self.node is not None else None

    def channels(self) -> list[ChannelId]:
        """The current iteration's channels (the fault gate cuts them)."""
        return self.node.role.channels() if self.node is not None else []

    def _trace_out(self) -> None:
        """Hand buffered trace rows to the kernel: a frame never leaves ahead of the rows that
        record it, so a replica killed right after a PROPOSAL (or a reply) left does not leave
        a trace in which nobody proposed (or delivered) it."""
        t = self._trace
        if t is not None and t.pending:
            t.flush()

    def die(self, why: str) -> None:
        """Stop serving for good: the replica must not act on state it cannot trust."""
        if self.fatal is None:
            self.fatal = why
            log.critical("replica %d stops: %s", self.sid, why)
            for t in self._tasks:
                t.cancel()
            self._close_clients()
            if self.transport is not None:
                self.loop.create_task(self.transport.stop())

    async def _ticker(self) -> None:
        period = self.cfg.tick_ms / 1000
        n = 0
        while True:
            await asyncio.sleep(period)
            self.step(Tick())
            gc_policy.tick()
            node = self.node
            if node is not None and self.fatal is None:
                self._run(self.service.tick(*_role(node)))
            self.outbox.flush()
            n += 1
            if self._trace is not None and n % 25 == 0:
                self._trace.flush()

    # -- the core's actions ------------------------------------------------------------------

    def _run(self, events: list[Event]) -> None:
        for e in events:
            self.step(e)

    def step(self, event: Event) -> None:
        """Run ``event`` through the core, then whatever the hosted service asks in turn. A step
        never runs inside another: events raised meanwhile wait in ``_events``."""
        self._events.append(event)
        if self._stepping:
            return
        self._stepping = True
        try:
            while self._events:
                self._one_step(self._events.popleft())
        finally:
            self._stepping = False

    def _one_step(self, event: Event) -> None:
        if self.fatal is not None or self.node is None or self.dying:
            self._events.clear()
            return
        gate = self.gate
        if gate.active:  # a fault armed or every message traced: the gate sees events and actions
            for e in gate.admit(event):
                if self.dying:
                    return
                self._core_step(e, gate)
        else:
            assert self.effects is not None
            self._core_step(event, self.effects)

    def _core_step(self, event: Event, fx: Effects) -> None:
        node = self.node
        effects = self.effects
        assert node is not None and effects is not None and self.commits is not None
        try:
            actions = node.step(event)
        except ZabError as e:
            self.die(f"{type(e).__name__}: {e}")
            return
        self.metrics.after_step(node)
        if node.state is not self._logged_state:
            self._log_state(node)
        for_service: list[Outcome] = []
        effects.for_service = for_service
        try:
            execute(actions, fx)
        except StopStep:  # a crash point fired: nothing more of this step happens
            return
        self.commits.schedule()
        if for_service:
            for_service = self.admin.take(for_service)
        role = _role(node)
        if for_service or role != self._service_role:
            # A step with nothing for the service and no role change is nothing to it: the
            # service would only end an empty step (2 us, several times per write).
            self._service_role = role
            self._events.extend(self.service.core(for_service, *role))

    def _log_state(self, node: Node) -> None:
        """Each change of role, at INFO, with why the replica went looking: an election is the
        first thing a user asks about after a run."""
        self._logged_state = state = node.state
        if state is PeerState.LOOKING:
            log.info("replica %d looking for a leader (epoch %d)%s", self.sid, node.current_epoch,
                     f": {node.ended_why}" if node.ended_why else "")
        else:
            log.info("replica %d %s, leader %d", self.sid, state.name.lower(), node.leader_sid)

    # -- injected faults --------------------------------------------------------------------------

    def crash(self, point: str) -> None:
        """Die now, like SIGKILL: nothing more is flushed, synced or sent."""
        log.warning("replica %d: crash point %s fired", self.sid, point)
        if self._trace is not None:
            self._trace.write(trace.Fault("crash-point", f"{self.sid}:{point}", time.time(), time.time()), time.time())
            self._trace.flush()
        os._exit(137)

    def delivered(self) -> None:
        self.stats["delivered"] += 1
        if self.cfg.snapshot_actor:
            return  # the snapshot actor (actors/snapshot_actor.py) asks for snapshots instead
        self._snap_due -= 1
        if self._snap_due <= 0:
            self._snap_due = self._snapshot_interval()
            self.loop.call_soon(self.step, SnapshotRequested())

    def encode_slice(self, enc: EncodeSnapshot) -> None:
        """Encode a slice of a snapshot image per loop turn, so that a large tree never holds the
        loop (peers, clients, the group commit) for longer than one slice."""
        if self.stopped or self.fatal is not None or self.node is None or enc.image.stale:
            return
        data = enc.image.encode(_SNAPSHOT_SLICE)
        self.stats["snapshot_slices"] += 1
        if data is None:
            self.loop.call_soon(self.encode_slice, enc)
        else:
            self.stats["snapshots_encoded"] += 1
            self.step(SnapshotEncoded(enc.image, enc.zxid, data))

    def decode_slice(self, dec: DecodeSnapshot) -> None:
        """Decode a slice of a SNAP per loop turn, so that a learner rebuilt from a large tree
        answers its leader's pings meanwhile (in one go, 300,000 znodes held it for 8 s, and its
        leader dropped it). The collector is paused in a slice: what it decodes all stays alive."""
        if self.stopped or self.fatal is not None or self.node is None or dec.restore.stale:
            return
        try:
            with gc_policy.paused():
                done = dec.restore.decode(_RESTORE_SLICE)
        except ZabError as e:  # the leader sent a snapshot that does not check out
            self.die(f"{type(e).__name__}: {e}")
            return
        self.stats["snap_decode_slices"] += 1
        if done:
            self.stats["snaps_decoded"] += 1
            self.step(SnapshotDecoded(dec.restore))
        else:
            self.loop.call_soon(self.decode_slice, dec)

    async def reconfigure(self, change: ConfigChange, timeout: float) -> dict[str, Any]:
        """Submit ``change`` here as the superuser; once committed here, the zxid and the
        configuration in force (``ReconfigError`` for a refusal, ``NoQuorumError`` with no
        leader to take it, ``UncertainOutcomeError`` if its fate was lost)."""
        if self.node is None or self.fatal is not None or self.departed is not None:
            raise NotRunningError(f"replica {self.sid} is not serving")
        event, fut = self.admin.request(change)
        self.step(event)
        self.outbox.flush()
        try:
            zxid = await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise RequestTimeoutError(f"reconfiguration not answered within {timeout} s") from None
        assert self.node is not None
        return {"zxid": zxid, "config": self.node.config.text(), "version": self.node.config.version}

    def left(self, version: int) -> None:
        """The configuration ``version`` (durable here) removed this replica: it serves no client
        any more; its core goes on only telling looking peers that configuration, until the
        controller stops it (``Departed``)."""
        if self.departed is None:
            self.departed = version
            log.warning("replica %d left the ensemble: configuration %x does not include it", self.sid, version)
            self._close_clients()

    def _snapshot_interval(self) -> int:
        # Spread between half and all of snapshot_every so replicas do not snapshot together.
        every = self.cfg.snapshot_every
        return random.randint(max(1, every // 2), every)

    # -- clients ------------------------------------------------------------------------------

    # -- control plane -------------------------------------------------------------------------

    def set_peers(self, addrs: dict[int, tuple[str, int]]) -> None:
        if self.transport is not None:
            self.transport.set_peers({int(k): (v[0], int(v[1])) for k, v in addrs.items()})

    def block(self, peers: list[int]) -> None:
        if self.transport is not None:
            self.transport.block(set(peers))

    def unblock(self, peers: list[int]) -> None:
        if self.transport is not None:
            self.transport.unblock(set(peers))

    def history(self, after: int = 0) -> list[tuple[int, str]]:
        """(zxid, value digest) of every delivered txn after ``after`` still held in memory."""
        if self.node is None:
            return []
        n = self.node
        return [(int(t.zxid), trace.digest(t.value)) for t in n.history.after(max(after, n.history.base), n.applied)]

    def client_auth_failed(self, conn: ClientConn, err: AuthFailed) -> None:
        """Count a client that failed to prove the secret; log it once per host."""
        self.stats["client_auth_failures"] += 1
        peer = conn.transport.get_extra_info("peername") if conn.transport is not None else None
        host = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        level = logging.DEBUG if host in self._auth_logged else logging.WARNING
        self._auth_logged.add(host)
        log.log(level, "replica %d: client %s failed authentication: %s; further failures from this host "
                "are logged at debug level", self.sid, peer, err)

    @property
    def established(self) -> bool:
        """Leading an epoch a quorum acknowledged (NEWLEADER): it takes writes."""
        n = self.node
        return n is not None and n.state == PeerState.LEADING and bool(getattr(n.role, "established", False))

    def status(self) -> ReplicaReport:
        if self.node is None:
            return ReplicaReport(self.sid, self.fatal)
        return ReplicaReport(
            self.sid, self.fatal, node=self.node.status(),
            established=self.established,
            pid=os.getpid(), nice=os.nice(0), stats=dict(self.stats),
            transport=dict(self.transport.stats) if self.transport is not None else {},
            config=self.node.config.text(), departed=self.departed, synced=_synced(self.node),
            zk=self.service.status(), metrics=self.metrics.snapshot(self), faults=self.faults.describe())

    def admin_view(self) -> AdminView:
        """What the four-letter words tell about this replica (``actors.zkadmin``)."""
        from actors.zkadmin import admin_view

        return admin_view(self)

    def reset_admin_stats(self, word: str) -> None:
        from actors.zkadmin import reset

        reset(self, word)

    def zk_port(self) -> int:
        """The ZooKeeper client port this replica listens on (0 without one)."""
        srv = self._zk_server
        return int(srv.sockets[0].getsockname()[1]) if srv is not None and srv.sockets else 0

    def zk_secure_port(self) -> int:
        """The TLS ZooKeeper client port (ZooKeeper's secureClientPort), -1 without one."""
        srv = self._zk_secure_server
        return int(srv.sockets[0].getsockname()[1]) if srv is not None and srv.sockets else -1

    def tree_digest(self) -> tuple[str, int] | None:
        """(digest of the whole data tree, its last zxid) for the ZooKeeper service, else None.
        It walks every znode on this replica's loop, which takes seconds for a large tree: for
        tests and checks that compare replicas, never for polling."""
        if self.zk is None:
            return None
        tree = self.zk.svc.tree
        return tree.digest(), tree.last_zxid

    def request_snapshot(self) -> dict[str, int]:
        """Take a snapshot of the delivered state now (the snapshot actor calls this)."""
        if self.node is not None and self.fatal is None:
            self.step(SnapshotRequested())
        return {"delivered": self.stats["delivered"],
                "applied": int(self.node.applied) if self.node is not None else 0}


def _synced(node: Node) -> tuple[int, ...] | None:
    """On a leader, its learners synced and following (acknowledged NEWLEADER): the replicas a
    reconfiguration may count on (ZooKeeper's ``isQuorumSynced``); None elsewhere."""
    role = node.role
    if not isinstance(role, Leader) or not role.established:
        return None
    return tuple(sorted(s for s, h in role.learners.items() if h.stage == Stage.ACTIVE))


def _role(node: Node) -> tuple[bool, bool, bool]:
    """(serving, leading, looking) for the hosted service: serving is being in broadcast as
    leader, follower or observer; leading, as the established leader; looking, in election with
    its disk's state (not rejoining, not departed: one a reconfiguration removed serves nothing),
    when read-only mode may serve."""
    state = node.state  # checked first: a step's role test runs on every step
    serving = state in _SERVING_STATES and node.role.phase is Phase.BROADCAST
    return (serving, serving and state is PeerState.LEADING,
            state is PeerState.LOOKING and not node.rejoining and not node.left)


_SERVING_STATES = frozenset({PeerState.LEADING, PeerState.FOLLOWING, PeerState.OBSERVING})
