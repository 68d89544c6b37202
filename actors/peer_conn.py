"""One peer TCP connection as an asyncio protocol: frames in, Zab messages out, checked by direction.

A ``PeerConn`` belongs to one ``actors.transport.PeerTransport`` (its ``ConnOwner``) and changes
no state of its own accord beyond its buffers: handshakes, authentication, loss and malformed
input are handed to the owner, which decides. Invariants: once ``closed`` is set nothing more is
read or written; a message type that does not belong on the connection's side (``LEARNER_TO_LEADER``,
``LEADER_TO_LEARNER``, notifications only on an inbound election connection) is malformed input
and drops only this connection.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any, Protocol, cast

from zabray.errors import CodecError
from zabray.net.batching import Outbox
from zabray.protocol.codec import decode, encode
from zabray.protocol.events import ChannelId, Event, Notified, Received
from zabray.protocol.messages import (
    Ack,
    AckEpoch,
    AckNewLeader,
    Commit,
    Diff,
    FollowerInfo,
    Inform,
    LeaderInfo,
    Message,
    NewLeader,
    Notification,
    ObserverInfo,
    Ping,
    Proposal,
    Proposals,
    Request,
    Requests,
    Snap,
    Touch,
    Trunc,
    UpToDate,
)
from zabray.wire.auth import Acceptor, Connector
from zabray.wire.framing import FrameDecoder, FrameEncoder, Handshake

log = logging.getLogger(__name__)


class BatchEncoder:
    """Encodes a connection's held PROPOSALs (as PROPOSALS) or REQUESTs (as REQUESTS); one
    message alone stays itself. A leader sends the same run of PROPOSALs to every follower, so
    the last run's bytes are kept: zxids are unique, and a run's ends and length name it."""

    __slots__ = ("_key", "_payload")

    def __init__(self) -> None:
        self._key: tuple[int, int, int] | None = None
        self._payload = b""

    def encode(self, msgs: list[Message]) -> bytes:
        first = msgs[0]
        if type(first) is Request:  # a learner forwards only its own clients' requests: one origin
            if len(msgs) == 1:
                return encode(first)
            return encode(Requests(first.origin, tuple((m.request_id, m.value) for m in msgs)))  # type: ignore[attr-defined]
        key = (first.txn.zxid, msgs[-1].txn.zxid, len(msgs))  # type: ignore[attr-defined]
        if key != self._key:
            self._key = key
            self._payload = encode(first if len(msgs) == 1 else Proposals(tuple(m.txn for m in msgs)))  # type: ignore[attr-defined]
        return self._payload


class ConnOwner(Protocol):
    """What a connection needs of its transport."""

    loop: asyncio.AbstractEventLoop
    stats: dict[str, int]
    max_frame: int
    outbox: Outbox
    batches: BatchEncoder

    def emit(self, event: Event) -> None: ...
    def conn_accepted(self, conn: PeerConn) -> None: ...
    def await_challenge(self, conn: PeerConn) -> None: ...
    def conn_handshake(self, conn: PeerConn, payload: bytes) -> None: ...
    def conn_challenged(self, conn: PeerConn, payload: bytes) -> None: ...
    def conn_lost(self, conn: PeerConn, exc: BaseException | None) -> None: ...
    def conn_malformed(self, conn: PeerConn, err: CodecError) -> None: ...


LEARNER_TO_LEADER: frozenset[type[Message]] = frozenset(
    {FollowerInfo, ObserverInfo, AckEpoch, AckNewLeader, Ack, Ping, Request, Requests, Touch}
)
"""Packets a learner may send on a channel; anything else arriving at the leader drops it."""
LEADER_TO_LEARNER: frozenset[type[Message]] = frozenset(
    {LeaderInfo, Diff, Trunc, Snap, NewLeader, UpToDate, Proposal, Proposals, Commit, Inform, Ping}
)
"""Packets a leader may send on a channel; anything else arriving at the learner drops it."""

LINGER = 5.0
"""Seconds a connection we closed may spend flushing what was queued before it is aborted."""

# Connection roles.
PENDING = 0  # accepted, handshake not yet read
CHAN_LEARNER = 1  # outbound channel (we are the learner)
CHAN_LEADER = 2  # accepted channel (we are the leader)
ELECT_OUT = 3  # outbound election connection (we send notifications)
ELECT_IN = 4  # accepted election connection (we receive notifications)


class PeerConn(asyncio.Protocol):
    """One TCP connection. Owned by a ``PeerTransport``; all state changes go through it."""

    def __init__(self, owner: ConnOwner, role: int, peer: int = -1, channel: ChannelId | None = None):
        self.owner = owner
        self.role = role
        self.peer = peer  # sid of the other end; -1 until the handshake names it
        self.channel = channel
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder(owner.max_frame)
        self.out = FrameEncoder(owner.max_frame)
        self.closed = False  # set once, by whoever ends the connection first
        self.announced = False  # leader side: a Received was delivered for this channel
        self.flush_scheduled = False
        self.batch: list[Message] = []  # PROPOSALs or REQUESTs held for this burst's one frame
        self.batch_bytes = 0
        self.paused = False
        self.connect_task: asyncio.Task[Any] | None = None
        self.hs_timer: asyncio.TimerHandle | None = None
        self.hs: Handshake | None = None  # acceptor: the handshake read, admitted once authenticated
        self.auth: Connector | Acceptor | None = None  # the exchange in progress, if any
        self.authed = True  # connector: False until the acceptor proved it holds the secret
        self.greeting = b""  # connector: handshake and HELLO frames, written first

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport; not an asyncio.Transport instance under uvloop, hence the cast.
        transport = cast(asyncio.Transport, transport)
        if self.closed:
            transport.abort()
            return
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # not TCP (tests over other sockets) or already closing
                pass
        if self.role == PENDING:
            self.owner.conn_accepted(self)
            return
        if self.greeting:
            transport.write(self.greeting)
            self.greeting = b""
            self.owner.await_challenge(self)
        if self.has_output():
            self.owner.outbox.write_now(self)

    def data_received(self, data: bytes) -> None:
        self._received(data)
        # What the frames' handling queued, on any connection, leaves now rather than at the
        # next loop turn (after other sockets' reads): a PROPOSAL or an ACK does not wait.
        self.owner.outbox.flush()

    def _received(self, data: bytes) -> None:
        if self.closed:
            return
        owner = self.owner
        stats = owner.stats
        stats["bytes_in"] += len(data)
        try:
            payloads = self.decoder.feed(data)
        except CodecError as e:
            owner.conn_malformed(self, e)
            return
        if not payloads:
            return
        stats["frames_in"] += len(payloads)
        start = 0
        n = len(payloads)
        while self.role == PENDING and start < n:  # handshake, then HELLO and PROOF with a secret
            owner.conn_handshake(self, payloads[start])
            if self.closed:
                return
            start += 1
        if not self.authed and start < n:  # connector: the acceptor's CHALLENGE comes first
            owner.conn_challenged(self, payloads[start])
            if self.closed:
                return
            start += 1
        if start == n or self.role == PENDING:
            return
        role = self.role
        emit = owner.emit
        try:
            if role == CHAN_LEADER or role == CHAN_LEARNER:
                allowed = LEARNER_TO_LEADER if role == CHAN_LEADER else LEADER_TO_LEARNER
                channel = self.channel
                assert channel is not None
                for i in range(start, len(payloads)):
                    msg = decode(payloads[i])
                    if type(msg) not in allowed:
                        raise CodecError(f"{type(msg).NAME} does not belong on this side of a channel")
                    self.announced = True
                    emit(Received(channel, msg))
                    if self.closed:  # the handler closed it (or blocked the peer): stop here
                        return
            elif role == ELECT_IN:
                peer = self.peer
                for i in range(start, len(payloads)):
                    msg = decode(payloads[i])
                    if type(msg) is not Notification:
                        raise CodecError(f"{type(msg).NAME} does not belong on an election connection")
                    if msg.sender != peer:
                        raise CodecError(f"notification claims sender {msg.sender}, handshake said {peer}")
                    emit(Notified(peer, msg))
                    if self.closed:
                        return
            else:  # nothing is ever sent to the connecting side of an election connection
                raise CodecError("unexpected data on an outbound election connection")
        except CodecError as e:
            owner.conn_malformed(self, e)
        except Exception as e:  # a decoder bug must not take the loop down: treat as malformed
            log.exception("unexpected error decoding from sid %s", self.peer)
            owner.conn_malformed(self, CodecError(repr(e)))

    def eof_received(self) -> bool:
        if not self.closed:
            try:
                self.decoder.check_eof()
            except CodecError as e:
                self.owner.conn_malformed(self, e)
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.owner.conn_lost(self, exc)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.has_output() and not self.closed:
            self.owner.outbox.write_now(self)

    # -- output ----------------------------------------------------------------------------------

    def has_output(self) -> bool:
        return bool(self.batch) or len(self.out) > 0

    def put_batch(self) -> None:
        """Frame the held PROPOSALs or REQUESTs (``batch``, filled by the transport's ``send``) as
        one message. Called at the flush and ahead of any other message sent after them, so the
        order on the connection is the order of the sends."""
        msgs = self.batch
        self.batch = []
        self.batch_bytes = 0
        self.out.add_payload(self.owner.batches.encode(msgs))

    def schedule_flush(self) -> None:
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.owner.outbox.add(self)

    def flush(self) -> None:
        """Write everything queued in one ``write``; a no-op until connected or while paused."""
        self.flush_scheduled = False
        t = self.transport
        if self.closed or t is None or self.paused or not self.authed:
            return
        if self.batch:
            self.put_batch()
        n = self.out.pending_frames
        data = self.out.take()
        if data:
            t.write(data)
            stats = self.owner.stats
            stats["frames_out"] += n
            stats["bytes_out"] += len(data)
            stats["writes"] += 1

    def shut(self, graceful: bool) -> None:
        """End the connection without any event; ``graceful`` writes what is queued first."""
        if self.closed:
            return
        self.closed = True
        if self.hs_timer is not None:
            self.hs_timer.cancel()
        if self.connect_task is not None and not self.connect_task.done():
            self.connect_task.cancel()
        t = self.transport
        if t is not None:
            if graceful:
                if self.batch:
                    self.put_batch()
                data = self.out.take()
                if data:
                    t.write(data)
                t.close()
                # A peer that stops reading must not pin the connection (and its buffer) forever.
                self.owner.loop.call_later(LINGER, t.abort)
            else:
                t.abort()
