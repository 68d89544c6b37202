"""ZooKeeper's client port on a replica: asyncio connections around ``zabray.wire.zkserver``.

Each connection feeds its bytes to a pure ``ZkServerConn``, hands the requests it yields to the
replica's hosted ZooKeeper service (``actors.zkservice.ZooKeeperService``), and writes the
frames the service's actions encode to. Writes go through the replica's ``Outbox``, as on the
bespoke client port and the peer channels: one write per connection per burst. Bad bytes
close that connection only and are counted (``bad_zk_frames``); the replica carries on.
A client that sends faster than it reads is held back (``actors.flow``): no more of its
requests are taken while ``zk_max_outstanding`` of them are unanswered or its replies wait
unread, and each time that happens counts in ``zk_throttled``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import TYPE_CHECKING

from actors.flow import OUT_HIGH, Held
from zabray.errors import CodecError
from zabray.wire import four_letter
from zabray.wire.four_letter import ConnInfo, Latency
from zabray.wire.zkserver import LAST_OP, ZkServerConn
from zabray.zk import messages as zm

if TYPE_CHECKING:
    from actors.replica import ReplicaServer

log = logging.getLogger(__name__)


class ZkClientConn(asyncio.Protocol):
    """One ZooKeeper client connection."""

    def __init__(self, server: ReplicaServer, key: bytes, words: frozenset[str]) -> None:
        self.server = server
        self.key = key
        self.words = words
        self.wire: ZkServerConn | None = None
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._out = bytearray()
        self._flush_pending = False
        self._close_after_flush = False
        self._arrived: dict[int, float] = {}  # request id -> when it was read (for its latency)
        # What ``cons`` tells of this connection (ZooKeeper's per-connection ServerCnxn stats).
        self.established_ms = int(time.time() * 1000)
        self.received = 0
        self.sent = 0
        self.latency = Latency()
        self.last_op = "NA"
        self.last_cxid = -1
        self.last_zxid = -1
        self.last_response_ms = 0
        self.admin = False  # a four-letter word's connection
        limit = server.cfg.zk_max_outstanding
        self.held: Held[tuple[int, zm.ClientOp, float]] = Held(
            self._take, lambda: len(self._arrived) >= limit or len(self._out) >= OUT_HIGH, server.outbox.flush,
            server.stats, "zk_throttled")

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "?"
        ip = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        self.wire = ZkServerConn(key=self.key, peer_ip=ip, max_frame=self.server.cfg.zk_max_frame, words=self.words,
                                 nonce=secrets.token_urlsafe(24))
        self.server._zk_clients.add(self)
        self.held.attach(transport)  # type: ignore[arg-type]

    def connection_lost(self, exc: Exception | None) -> None:
        self.server._zk_clients.discard(self)
        self.transport = None
        self.held.detach()
        self.server.service.conn_lost(self)

    def pause_writing(self) -> None:
        self.held.pause_writing()

    def resume_writing(self) -> None:
        self.held.resume_writing()

    def data_received(self, data: bytes) -> None:
        self._received(data)
        self.server.outbox.flush()  # replies (and a leader's PROPOSALs) leave now, not next turn

    def _received(self, data: bytes) -> None:
        wire = self.wire
        if wire is None or self.transport is None:
            return
        stats = self.server.stats
        stats["zk_bytes_in"] += len(data)
        try:
            fed = wire.feed(data)
        except CodecError as e:
            stats["bad_zk_frames"] += 1
            log.warning("replica %d: dropping ZooKeeper client %s: %s", self.server.sid, self.peer, e)
            self.close()
            return
        if fed.word is not None:
            self.admin = True
            self.received += 1
            text = four_letter.answer(fed.word, self.words, self.server.admin_view())
            self.transport.write(text.encode())
            if fed.word in four_letter.RESETS and fed.word in self.words:
                self.server.reset_admin_stats(fed.word)
            self._close_soon()
            return
        self.received += len(fed.requests)
        if fed.send:
            self._write(fed.send)
        if fed.close:
            self._close_soon()
            return
        if fed.requests:
            now = time.monotonic()
            self.held.extend((rid, op, now) for rid, op in fed.requests)

    def _take(self, request: tuple[int, zm.ClientOp, float]) -> None:
        rid, op, t = request
        self.server.stats["zk_requests"] += 1
        self._arrived[rid] = t
        zk = self.server.zk
        if zk is None:
            self.close()
            return
        self.server._run(zk.zk_request(self, rid, op))

    def deliver(self, action: zm.ServiceAction) -> None:
        """Carry one service action (a reply, a watch event, a session's end) to the client."""
        if self.wire is None or self.transport is None:
            return
        if type(action) is zm.Reply:
            now = time.monotonic()
            t0 = self._arrived.pop(action.xid, None)
            if t0 is not None:
                ms = int((now - t0) * 1000)
                self.server.zk_latency.add(ms)
                self.latency.add(ms)
            op = self.wire.pending_op(action.xid)
            if op is not None:
                self.last_op = LAST_OP.get(op[1], self.last_op)
                if op[0] >= 0:
                    self.last_cxid = op[0]
                self.last_zxid = action.zxid
                self.last_response_ms = int(now * 1000)
            self.held.soon()
        data, close = self.wire.encode(action)
        if data:
            self.server.stats["zk_frames_out"] += 1
            self.sent += 1
            self._write(data)
        if close:
            self._close_soon()

    def _write(self, data: bytes) -> None:
        self._out += data
        if not self._flush_pending:
            self._flush_pending = True
            self.server.outbox.add(self)

    def flush(self) -> None:
        self._flush_pending = False
        t = self.transport
        if t is None:
            return
        if self._out:
            t.write(bytes(self._out))  # may call pause_writing: the client is not keeping up
            self._out.clear()
            self.held.soon()  # if held back by this burst's replies alone, now handed over
        if self._close_after_flush:
            t.close()  # a graceful close: what was written still reaches the client

    def _close_soon(self) -> None:
        if self.wire is not None:
            self.wire.closed = True
        self._close_after_flush = True
        if not self._flush_pending:
            self._flush_pending = True
            self.server.outbox.add(self)

    def hang_up(self) -> None:
        """The service ends this connection: what was already written still goes out."""
        self._close_soon()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()
            self.transport = None
            self.held.detach()

    def reset_stats(self) -> None:
        """``crst``: this connection's counters start again (ZooKeeper's ServerCnxn.resetStats)."""
        self.received = self.sent = 0
        self.latency = Latency()
        self.last_op = "NA"
        self.last_cxid = self.last_zxid = -1
        self.last_response_ms = 0

    def info(self) -> ConnInfo:
        """This connection as ``stat`` and ``cons`` show it."""
        wire = self.wire
        lat = self.latency
        avg = lat.total // lat.count if lat.count else 0
        return ConnInfo(f"/{self.peer}", 0 if self.admin or not self.held.reading else 1, len(self._arrived), self.received,
                        self.sent, wire.session_id if wire is not None else 0, self.last_op, self.established_ms,
                        wire.timeout_ms if wire is not None else 0, self.last_cxid, self.last_zxid,
                        self.last_response_ms, (lat.last, lat.min, avg, lat.max))


__all__ = ["ZkClientConn"]
