"""One replica's IO shell: the Zab core driven by its disk, its TCP peers, its clients and a clock.

``ReplicaServer`` runs on an asyncio loop and has nothing Ray-specific; ``ReplicaActor`` wraps
it as a Ray actor, and Ray calls only reach it on the control plane (start, status, faults).

Data path: client frames -> ``Submit`` -> the core -> ``Send``s batched per loop turn by the
transport; ``Persist`` actions queue up and one worker thread makes each accumulated batch
durable with one fdatasync (group commit), then feeds ``Persisted(upto)`` back, which is what
releases ACKs. A storage failure stops the replica: it never goes on as if a write were durable.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from actors import clientproto as cp
from actors.faultpoints import PERSIST_KIND_OF, ReplicaFaults
from actors.framing import FrameDecoder, FrameEncoder
from actors.metrics import ReplicaMetrics
from actors.transport import PeerTransport
from storage.base import apply_persists
from storage.disk import DiskStore
from storage.fsutil import atomic_write, read_file
from zabray import trace
from zabray.config import EnsembleConfig
from zabray.errors import CodecError, StorageError, ZabError
from zabray.protocol.actions import (
    Close,
    Committed,
    Deliver,
    Failed,
    Notify,
    Open,
    Persist,
    Send,
    SessionsTouched,
    Trace,
)
from zabray.protocol.events import (
    ChannelClosed,
    Event,
    Notified,
    Persisted,
    Received,
    SnapshotRequested,
    Submit,
    Tick,
)
from zabray.protocol.messages import Diff, PeerState, Snap, Trunc
from zabray.protocol.node import Node

log = logging.getLogger(__name__)


_SYNC_TYPES = (Diff, Trunc, Snap)


def next_incarnation(data_dir: Path, at_least: int = 0) -> int:
    """Bump and durably record the incarnation: channel ids must never repeat across restarts,
    even for a replica rebuilt from an empty disk (the controller passes ``at_least``)."""
    path = data_dir / "incarnation"
    current = int(read_file(str(path)).decode()) if path.exists() else -1
    nxt = max(current + 1, at_least)
    atomic_write(str(data_dir), "incarnation", [str(nxt).encode()])
    return nxt


class ReplicaServer:
    def __init__(self, *, ensemble: str, sid: int, config: EnsembleConfig | dict[str, Any], voters: list[int],
                 observers: list[int], data_dir: str, run_dir: str | None = None,
                 min_incarnation: int = 0) -> None:
        self.ensemble = ensemble
        self.sid = sid
        self.cfg = config = EnsembleConfig.load(config)
        self.proto = config.protocol(frozenset(voters), frozenset(observers))
        self.data_dir = Path(data_dir)
        self.run_dir = Path(run_dir) if run_dir else None
        self.min_incarnation = min_incarnation
        self.node: Node | None = None
        self.transport: PeerTransport | None = None
        self.fatal: str | None = None
        self.stats: dict[str, int] = {"submitted": 0, "committed": 0, "failed": 0, "delivered": 0,
                                      "syncs": 0, "synced_actions": 0, "bad_client_frames": 0}
        self._pending: dict[int, tuple[_ClientConn, int]] = {}
        self._next_rid = 1
        self._pq: list[Persist] = []
        self._flushing = False
        self._flush_scheduled = False
        self._io = ThreadPoolExecutor(1, thread_name_prefix=f"zab-io-{sid}")
        self._tasks: list[asyncio.Task[None]] = []
        self._client_server: asyncio.base_events.Server | None = None
        self._clients: set[_ClientConn] = set()
        self._trace: trace.TraceWriter | None = None
        self._snap_due = self._snapshot_interval()
        self.faults = ReplicaFaults()
        self._dying = False
        self.metrics = ReplicaMetrics(ensemble, sid)
        self.zk: Any = None
        if config.service == "zookeeper":
            from actors.zkservice import ZkService

            self.zk = ZkService(self)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        self.loop = loop
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.incarnation = next_incarnation(self.data_dir, self.min_incarnation)
        self.store = DiskStore(self.data_dir / "store", keep_snapshots=self.cfg.keep_snapshots,
                               fsync=self.cfg.fsync)
        durable = await loop.run_in_executor(self._io, self.store.recover)
        self.node = Node(self.sid, self.proto, durable, incarnation=self.incarnation,
                         app=self.zk.tree if self.zk is not None else None)
        if self.run_dir is not None and self.cfg.trace:
            tdir = self.run_dir / "trace"
            tdir.mkdir(parents=True, exist_ok=True)
            fh = open(tdir / f"replica-{self.sid}-inc{self.incarnation}.jsonl", "a", buffering=1 << 16)
            self._trace = trace.TraceWriter(fh, run=self.ensemble, src=f"replica-{self.sid}",
                                            replica=self.sid, inc=self.incarnation)
            self._trace.write(trace.StateChange("STARTED", durable.current_epoch, -1), time.time())
        qport = self.cfg.quorum_port + self.sid if self.cfg.quorum_port else 0
        self.transport = PeerTransport(self.ensemble, self.sid, self._step, host=self.cfg.host, port=qport)
        qport = await self.transport.start()
        cport = self.cfg.client_port + self.sid if self.cfg.client_port else 0
        self._client_server = await loop.create_server(lambda: _ClientConn(self), self.cfg.host, cport)
        cport = self._client_server.sockets[0].getsockname()[1]
        self._tasks.append(loop.create_task(self._ticker()))
        log.info("replica %d (incarnation %d) up: quorum port %d, client port %d, last zxid %s",
                 self.sid, self.incarnation, qport, cport, durable.last_zxid)
        return {"sid": self.sid, "quorum": [self.cfg.host, qport], "client": [self.cfg.host, cport],
                "pid": os.getpid(), "incarnation": self.incarnation}

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self._client_server is not None:
            self._client_server.close()
        for c in list(self._clients):
            c.close()
        if self.transport is not None:
            await self.transport.stop()
        if self._trace is not None:
            self._trace.close()
            self._trace = None
        self._io.shutdown(wait=True)

    def _die(self, why: str) -> None:
        """Stop serving for good: the replica must not act on state it cannot trust."""
        if self.fatal is None:
            self.fatal = why
            log.critical("replica %d stops: %s", self.sid, why)
            for t in self._tasks:
                t.cancel()
            if self._client_server is not None:
                self._client_server.close()
            for c in list(self._clients):
                c.close()
            if self.transport is not None:
                self.loop.create_task(self.transport.stop())

    async def _ticker(self) -> None:
        period = self.cfg.tick_ms / 1000
        n = 0
        while True:
            await asyncio.sleep(period)
            self._step(Tick())
            if self.zk is not None:
                self.zk.tick()
            n += 1
            if self._trace is not None and n % 25 == 0:
                self._trace.flush()

    # -- the core's actions ------------------------------------------------------------------

    def _step(self, event: Event) -> None:
        if self.fatal is not None or self.node is None or self._dying:
            return
        faults = self.faults
        if faults.crash is not None and type(event) in (Received, Notified):
            name = event.msg.NAME if type(event) is Received else "NOTIFICATION"  # type: ignore[attr-defined]
            if faults.hit(f"recv:{name}", self.node.role.phase_name()):
                self._crash(f"recv:{name}")
                return
        try:
            actions = self.node.step(event)
        except ZabError as e:
            self._die(f"{type(e).__name__}: {e}")
            return
        self.metrics.after_step(self.node)
        transport = self.transport
        assert transport is not None
        for a in actions:
            t = type(a)
            if t is Send:
                msg = a.msg  # type: ignore[attr-defined]
                if faults.crash is not None and faults.hit(f"send-before:{msg.NAME}", self.node.role.phase_name()):
                    self._crash(f"send-before:{msg.NAME}")
                    return
                peer = a.channel.peer_of(self.sid)  # type: ignore[attr-defined]
                if faults.links.delay and faults.links.shaped(peer):
                    self._shape(peer, a)
                else:
                    transport.send(a.channel, msg)  # type: ignore[attr-defined]
                if type(msg) in _SYNC_TYPES:
                    self.stats[f"sent_{msg.NAME}"] = self.stats.get(f"sent_{msg.NAME}", 0) + 1
                if faults.crash is not None and faults.hit(f"send-after:{msg.NAME}", self.node.role.phase_name()):
                    # Die once this loop turn's socket writes are out: the message leaves, nothing after it.
                    self._dying = True
                    self.loop.call_soon(self._crash, f"send-after:{msg.NAME}")
                    return
            elif t is Trace:
                if self._trace is not None:
                    self._trace.write(a.record, time.time())  # type: ignore[attr-defined]
            elif t is Deliver:
                self._delivered()
                if self.zk is not None:
                    self.zk.delivered(a.result)  # type: ignore[attr-defined]
            elif t is Committed:
                if self.zk is not None and self.zk.committed(a.request_id, a.zxid, a.result):  # type: ignore[attr-defined]
                    self.stats["committed"] += 1
                    continue
                self._reply(a.request_id, cp.CommittedRep(0, int(a.zxid)))  # type: ignore[attr-defined]
            elif t is SessionsTouched:
                if self.zk is not None:
                    self.zk.touched_at_leader(a.sessions)  # type: ignore[attr-defined]
            elif t is Failed:
                if self.zk is not None and self.zk.failed(a.request_id, a.reason, a.uncertain):  # type: ignore[attr-defined]
                    self.stats["failed"] += 1
                    continue
                self._reply(a.request_id, cp.FailedRep(0, a.reason, a.uncertain))  # type: ignore[attr-defined]
            elif isinstance(a, Persist):
                self._pq.append(a)
                if not self._flushing and not self._flush_scheduled:
                    self._flush_scheduled = True
                    self.loop.call_soon(self._flush)
            elif t is Notify:
                if faults.links.delay and faults.links.shaped(a.to):  # type: ignore[attr-defined]
                    self._shape(a.to, a)  # type: ignore[attr-defined]
                else:
                    transport.notify(a.to, a.note)  # type: ignore[attr-defined]
            elif t is Open:
                transport.open(a.channel)  # type: ignore[attr-defined]
            elif t is Close:
                transport.close(a.channel)  # type: ignore[attr-defined]
        if self.zk is not None:
            self.zk.flush()

    # -- injected faults --------------------------------------------------------------------------

    def _crash(self, point: str) -> None:
        """Die now, like SIGKILL: nothing more is flushed, synced or sent."""
        log.warning("replica %d: crash point %s fired", self.sid, point)
        if self._trace is not None:
            self._trace.write(trace.Fault("crash-point", f"{self.sid}:{point}", time.time(), time.time()), time.time())
            self._trace.flush()
        os._exit(137)

    def _shape(self, peer: int, action: Send | Notify) -> None:
        due = self.faults.links.push(peer, self.loop.time(), action)
        if due != float("inf"):
            self.loop.call_at(due, self._release_due)

    def _release_due(self) -> None:
        self._send_now(self.faults.links.due(self.loop.time()))

    def _send_now(self, actions: list[object]) -> None:
        transport = self.transport
        if transport is None or self.fatal is not None:
            return
        for a in actions:
            if type(a) is Send:
                transport.send(a.channel, a.msg)  # type: ignore[attr-defined]
            elif type(a) is Notify:
                transport.notify(a.to, a.note)  # type: ignore[attr-defined]

    def shape_links(self, peers: list[int], delay_ms: float | None) -> None:
        """Delay (``delay_ms``) or hold (None: a one-way partition) what we send to ``peers``."""
        self.faults.links.set(peers, float("inf") if delay_ms is None else delay_ms / 1000)

    def unshape_links(self, peers: list[int]) -> None:
        self._send_now(self.faults.links.clear(peers))

    def cut_links(self, peers: list[int]) -> int:
        """Close our current channels to ``peers`` mid-iteration; both ends see them close."""
        if self.node is None or self.transport is None:
            return 0
        cut = [ch for ch in self.node.role.channels() if ch.peer_of(self.sid) in peers]
        for ch in cut:
            self.transport.close(ch)
            self._step(ChannelClosed(ch))
        return len(cut)

    def _io_apply(self, batch: list[Persist]) -> int:
        """Runs on the IO thread: the group commit, with any injected disk fault."""
        if self.faults.sync_delay_s:
            time.sleep(self.faults.sync_delay_s)
        if self.faults.fail_next_sync:
            self.faults.fail_next_sync = False
            raise StorageError("injected fault: fdatasync failed (EIO)")
        return apply_persists(self.store, batch)

    def _flush(self) -> None:
        """Group commit: everything persisted since the last flush, one fdatasync."""
        self._flush_scheduled = False
        if self._flushing or not self._pq or self.fatal is not None:
            return
        batch, self._pq = self._pq, []
        if self.faults.crash is not None:
            for kind in {PERSIST_KIND_OF[type(a).__name__] for a in batch}:
                if self.faults.hit(f"persist-before:{kind}", self.node.role.phase_name()):  # type: ignore[union-attr]
                    self._crash(f"persist-before:{kind}")
        self._flushing = True
        self._flush_t0 = time.monotonic()
        fut = self.loop.run_in_executor(self._io, self._io_apply, batch)
        fut.add_done_callback(lambda f: self._flushed(f, batch))

    def _flushed(self, fut: asyncio.Future[int], batch: list[Persist]) -> None:
        self._flushing = False
        n = len(batch)
        try:
            upto = fut.result()
        except (StorageError, OSError) as e:
            self._die(f"storage failed, nothing more is acknowledged: {e}")
            return
        if self.faults.crash is not None:
            for kind in {PERSIST_KIND_OF[type(a).__name__] for a in batch}:
                if self.faults.hit(f"persist-after:{kind}", self.node.role.phase_name()):  # type: ignore[union-attr]
                    self._crash(f"persist-after:{kind}")
        self.stats["syncs"] += 1
        self.stats["synced_actions"] += n
        self.metrics.fsync(time.monotonic() - self._flush_t0)
        self._step(Persisted(upto))
        if self._pq:
            self._flush()

    def _delivered(self) -> None:
        self.stats["delivered"] += 1
        if self.cfg.snapshot_actor:
            return  # the snapshot actor (actors/snapshots.py) asks for snapshots instead
        self._snap_due -= 1
        if self._snap_due <= 0:
            self._snap_due = self._snapshot_interval()
            self.loop.call_soon(self._step, SnapshotRequested())

    def _snapshot_interval(self) -> int:
        # Spread between half and all of snapshot_every so replicas do not snapshot together.
        every = self.cfg.snapshot_every
        return random.randint(max(1, every // 2), every)

    # -- clients ------------------------------------------------------------------------------

    def submit(self, conn: _ClientConn, client_rid: int, value: bytes) -> None:
        rid = self._next_rid
        self._next_rid += 1
        self._pending[rid] = (conn, client_rid)
        self.stats["submitted"] += 1
        self._step(Submit(rid, value))

    def _reply(self, rid: int, rep: cp.CommittedRep | cp.FailedRep) -> None:
        entry = self._pending.pop(rid, None)
        if entry is None:
            return
        conn, client_rid = entry
        self.stats["committed" if isinstance(rep, cp.CommittedRep) else "failed"] += 1
        if isinstance(rep, cp.CommittedRep):
            conn.send(cp.CommittedRep(client_rid, rep.zxid))
        else:
            conn.send(cp.FailedRep(client_rid, rep.reason, rep.uncertain))

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

    def status(self) -> dict[str, Any]:
        if self.node is None:
            return {"sid": self.sid, "state": "STARTING", "alive": True, "fatal": self.fatal}
        s = self.node.status()
        leader_role = getattr(self.node.role, "established", None)
        s.update(
            faults=self.faults.describe(),
            alive=self.fatal is None,
            fatal=self.fatal,
            established=bool(leader_role) if self.node.state == PeerState.LEADING else None,
            pid=os.getpid(),
            stats=dict(self.stats),
            transport=dict(self.transport.stats) if self.transport is not None else {},
        )
        if self.zk is not None:
            s["zk"] = self.zk.status()
        s["metrics"] = self.metrics.snapshot(self)
        return s

    def request_snapshot(self) -> dict[str, int]:
        """Take a snapshot of the delivered state now (the snapshot actor calls this)."""
        if self.node is not None and self.fatal is None:
            self._step(SnapshotRequested())
        return {"delivered": self.stats["delivered"],
                "applied": int(self.node.applied) if self.node is not None else 0}


class _ClientConn(asyncio.Protocol):
    """One client connection: a handshake frame, then pipelined requests answered out of order."""

    def __init__(self, server: ReplicaServer) -> None:
        self.server = server
        self.decoder = FrameDecoder()
        self.encoder = FrameEncoder()
        self.greeted = False
        self.transport: asyncio.Transport | None = None
        self._flush_pending = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server._clients.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server._clients.discard(self)
        self.transport = None
        if self.server.zk is not None:
            self.server.zk.conn_lost(self)

    def data_received(self, data: bytes) -> None:
        try:
            for payload in self.decoder.feed(data):
                if not self.greeted:
                    cp.check_handshake(payload, self.server.ensemble)
                    self.greeted = True
                    continue
                req = cp.decode_request(payload)
                if isinstance(req, cp.SubmitReq):
                    self.server.submit(self, req.rid, req.value)
                elif isinstance(req, cp.ZkReq):
                    if self.server.zk is None:
                        self.send(cp.ZkRep(req.rid, 0, ["BAD_ARGUMENTS", "this ensemble runs service: broadcast",
                                                        None, None], None))
                    else:
                        self.server.zk.handle(self, req)
                else:
                    self.send(cp.StatusRep(req.rid, self.server.status()))
                if self.transport is None:
                    return
        except CodecError as e:
            self.server.stats["bad_client_frames"] += 1
            log.warning("replica %d: dropping client connection: %s", self.server.sid, e)
            self.close()

    def eof_received(self) -> bool:
        return False

    def send(self, msg: Any) -> None:
        if self.transport is None:
            return
        self.encoder.add_payload(cp.encode(msg))
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if self.transport is not None and len(self.encoder):
            self.transport.write(bytes(self.encoder.take()))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()
            self.transport = None


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

    async def status(self) -> dict[str, Any]:
        return self.server.status()

    async def request_snapshot(self) -> dict[str, int]:
        return self.server.request_snapshot()

    async def history(self, after: int = 0) -> list[tuple[int, str]]:
        return self.server.history(after)

    async def block(self, peers: list[int]) -> None:
        self.server.block(peers)

    async def arm_crash(self, point: str, nth: int = 1) -> None:
        self.server.faults.arm(point, nth)

    async def disk_fault(self, kind: str, delay_ms: float = 0.0) -> None:
        f = self.server.faults
        if kind == "fsync-fail":
            f.fail_next_sync = True
        elif kind == "slow-fsync":
            f.sync_delay_s = delay_ms / 1000
        elif kind == "lose-unsynced":
            # A power cut: everything not yet fdatasync'ed is gone. Appends sit in memory until
            # the group commit writes and syncs them together, so dying before the next one is it.
            self.server._crash("lose-unsynced")
        elif kind == "clear":
            f.fail_next_sync, f.sync_delay_s = False, 0.0
        else:
            from zabray.errors import ConfigError

            raise ConfigError(f"unknown disk fault {kind!r}: fsync-fail, slow-fsync, lose-unsynced or clear")

    async def shape_links(self, peers: list[int], delay_ms: float | None) -> None:
        self.server.shape_links(peers, delay_ms)

    async def unshape_links(self, peers: list[int]) -> None:
        self.server.unshape_links(peers)

    async def cut_links(self, peers: list[int]) -> int:
        return self.server.cut_links(peers)

    async def unblock(self, peers: list[int]) -> None:
        self.server.unblock(peers)

    async def stop(self) -> None:
        await self.server.stop()
