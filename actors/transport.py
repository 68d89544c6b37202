"""Replica-to-replica network IO over asyncio TCP: per-iteration channels and election traffic.

Replicas speak Zab over their own connections (never Ray calls). Two kinds of connection:

- **Channel**: opened by a learner (``open``) to its leader for one iteration, identified by a
  ``ChannelId``; carries the phase 1-3 packets both ways, FIFO. Closed by either side when its
  iteration ends, so one connection never carries two iterations' messages and the receiver sees
  a prefix of what was sent (TCP plus ``framing``'s checksums).
- **Election**: one long-lived outbound connection per peer, created on demand by ``notify`` and
  re-created after it breaks; carries only ``Notification``s, one way (each side sends on its own
  outbound connection). Best effort: the election re-sends.

Every connection opens with a ``framing.Handshake`` frame from the connecting side. With an
ensemble secret (always, in a replica), the two sides then prove to each other that they hold it
(``zabray.auth``: HELLO, CHALLENGE, PROOF, keyed by the secret, bound to both nonces and to the
handshake's bytes) before either reads a Zab message: the connector writes nothing queued until
the acceptor's CHALLENGE checks out, and the acceptor registers nothing (no channel replaced, no
``_latest`` raised) until the PROOF does. A failure closes the connection, counts
``auth_failures`` and is logged once per peer host. The acceptor then
refuses (closes) a connection whose ensemble differs, whose channel names another leader or a
learner other than the sender, whose sender is blocked, or whose (incarnation, iteration) is not
newer than the highest it has seen from that learner; a newer channel from a learner replaces
(closes) that learner's older one.

Invariants the replica actor relies on:
- ``on_event`` is called synchronously on the loop, never re-entrantly from inside one of this
  class's methods called by the actor (events caused by ``open``/``block``/``send`` failures are
  delivered on a later loop turn); it may call back into the transport.
- No ``ChannelClosed`` for a channel the local side closed (``close``/``stop``), and at most one
  per channel. On the leader side, events for a channel start with its first ``Received``: a
  channel that broke before delivering anything is closed silently.
- Malformed input drops only the connection it arrived on; nothing raises out of a loop callback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
from collections.abc import Callable
from typing import Any

from zabray.auth import PEER, Acceptor, AuthFailed, Connector, Secret
from zabray.errors import CodecError, ConfigError
from zabray.framing import (
    DEFAULT_MAX_FRAME,
    KIND_CHANNEL,
    KIND_ELECTION,
    FrameDecoder,
    FrameEncoder,
    Handshake,
    decode_handshake,
    frame,
)
from zabray.protocol.codec import decode, encode
from zabray.protocol.events import ChannelClosed, ChannelId, Event, Notified, Received
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
    Request,
    Snap,
    Touch,
    Trunc,
    UpToDate,
)

log = logging.getLogger(__name__)

LEARNER_TO_LEADER: frozenset[type[Message]] = frozenset(
    {FollowerInfo, ObserverInfo, AckEpoch, AckNewLeader, Ack, Ping, Request, Touch}
)
"""Packets a learner may send on a channel; anything else arriving at the leader drops it."""
LEADER_TO_LEARNER: frozenset[type[Message]] = frozenset(
    {LeaderInfo, Diff, Trunc, Snap, NewLeader, UpToDate, Proposal, Commit, Inform, Ping}
)
"""Packets a leader may send on a channel; anything else arriving at the learner drops it."""

_ELECTION_BACKLOG = 1 << 20
"""Bytes of notifications buffered for one unwritable election connection before new ones drop."""
_LINGER = 5.0
"""Seconds a connection we closed may spend flushing what was queued before it is aborted."""

# Connection roles.
_PENDING = 0  # accepted, handshake not yet read
_CHAN_LEARNER = 1  # outbound channel (we are the learner)
_CHAN_LEADER = 2  # accepted channel (we are the leader)
_ELECT_OUT = 3  # outbound election connection (we send notifications)
_ELECT_IN = 4  # accepted election connection (we receive notifications)


class _Conn(asyncio.Protocol):
    """One TCP connection. Owned by a ``PeerTransport``; all state changes go through it."""

    def __init__(self, owner: PeerTransport, role: int, peer: int = -1, channel: ChannelId | None = None):
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
        self.paused = False
        self.connect_task: asyncio.Task[Any] | None = None
        self.hs_timer: asyncio.TimerHandle | None = None
        self.hs: Handshake | None = None  # acceptor: the handshake read, admitted once authenticated
        self.auth: Connector | Acceptor | None = None  # the exchange in progress, if any
        self.authed = True  # connector: False until the acceptor proved it holds the secret
        self.greeting = b""  # connector: handshake and HELLO frames, written first

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
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
        if self.role == _PENDING:
            self.owner._accepted(self)
            return
        if self.greeting:
            transport.write(self.greeting)
            self.greeting = b""
            self.owner._await_challenge(self)
        if len(self.out):
            self.flush()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        owner = self.owner
        stats = owner.stats
        stats["bytes_in"] += len(data)
        try:
            payloads = self.decoder.feed(data)
        except CodecError as e:
            owner._malformed(self, e)
            return
        if not payloads:
            return
        stats["frames_in"] += len(payloads)
        start = 0
        n = len(payloads)
        while self.role == _PENDING and start < n:  # handshake, then HELLO and PROOF with a secret
            owner._handshake(self, payloads[start])
            if self.closed:
                return
            start += 1
        if not self.authed and start < n:  # connector: the acceptor's CHALLENGE comes first
            owner._challenged(self, payloads[start])
            if self.closed:
                return
            start += 1
        if start == n or self.role == _PENDING:
            return
        role = self.role
        emit = owner._emit
        try:
            if role == _CHAN_LEADER or role == _CHAN_LEARNER:
                allowed = LEARNER_TO_LEADER if role == _CHAN_LEADER else LEADER_TO_LEARNER
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
            elif role == _ELECT_IN:
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
            owner._malformed(self, e)
        except Exception as e:  # a decoder bug must not take the loop down: treat as malformed
            log.exception("unexpected error decoding from sid %s", self.peer)
            owner._malformed(self, CodecError(repr(e)))

    def eof_received(self) -> bool:
        if not self.closed:
            try:
                self.decoder.check_eof()
            except CodecError as e:
                self.owner._malformed(self, e)
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.owner._lost(self, exc)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if len(self.out) and not self.closed:
            self.flush()

    # -- output ----------------------------------------------------------------------------------

    def schedule_flush(self) -> None:
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.owner._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write everything queued in one ``write``; a no-op until connected or while paused."""
        self.flush_scheduled = False
        t = self.transport
        if self.closed or t is None or self.paused or not self.authed:
            return
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
                data = self.out.take()
                if data:
                    t.write(data)
                t.close()
                # A peer that stops reading must not pin the connection (and its buffer) forever.
                self.owner._loop.call_later(_LINGER, t.abort)
            else:
                t.abort()


class PeerTransport:
    """One replica's TCP endpoint: accepts channels (as leader) and election connections, opens
    channels (as learner) and election connections to peers. All methods run on the loop thread."""

    def __init__(
        self,
        ensemble: str,
        sid: int,
        on_event: Callable[[Event], None],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_frame: int = DEFAULT_MAX_FRAME,
        connect_timeout: float = 3.0,
        handshake_timeout: float = 10.0,
        secret: Secret | None = None,
        ssl_server: ssl.SSLContext | None = None,
        ssl_client: ssl.SSLContext | None = None,
    ) -> None:
        if not isinstance(ensemble, str) or not ensemble:
            raise ConfigError("ensemble must be a non-empty string")
        if type(sid) is not int or sid < 0:
            raise ConfigError(f"sid must be a non-negative int, got {sid!r}")
        self.ensemble = ensemble
        self.sid = sid
        self.host = host
        self.port = port
        self.max_frame = max_frame
        self.connect_timeout = connect_timeout
        self.handshake_timeout = handshake_timeout
        self.secret = secret
        self.ssl_server = ssl_server
        self.ssl_client = ssl_client
        self._auth_logged: set[str] = set()  # peer hosts already logged for a failed proof
        self._on_event = on_event
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by start()
        self._server: asyncio.base_events.Server | None = None
        self._addrs: dict[int, tuple[str, int]] = {}
        self._blocked: set[int] = set()
        self._channels: dict[ChannelId, _Conn] = {}
        self._learner_channel: dict[int, ChannelId] = {}  # leader side: each learner's live channel
        self._latest: dict[int, tuple[int, int]] = {}  # leader side: highest (incarnation, iteration)
        self._elect_out: dict[int, _Conn] = {}
        self._elect_in: dict[int, _Conn] = {}
        self._pending: set[_Conn] = set()  # accepted, handshake not read yet
        self._closing: dict[ChannelId, ChannelClosed] = {}  # ChannelClosed owed on a later turn
        self._running = False
        self.stats: dict[str, int] = dict.fromkeys(
            (
                "frames_in",
                "frames_out",
                "bytes_in",
                "bytes_out",
                "writes",
                "bad_frames",
                "refused_handshakes",
                "auth_failures",
                "connects",
                "connect_failures",
                "accepted",
                "channels_opened",
                "channels_accepted",
                "channels_replaced",
                "channels_lost",
                "notes_sent",
                "notes_dropped",
                "sends_dropped",
            ),
            0,
        )

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> int:
        """Listen on (host, port); returns the bound port (useful with port 0)."""
        if self._running:
            raise ConfigError("transport already started")
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(
            lambda: _Conn(self, _PENDING), self.host, self.port, reuse_address=True, backlog=128,
            ssl=self.ssl_server, ssl_handshake_timeout=self.handshake_timeout if self.ssl_server else None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._running = True
        if self.secret is None:
            log.warning("sid %s: no ensemble secret, peers are not authenticated", self.sid)
        log.info("sid %s listening on %s:%s (ensemble %s, tls %s)", self.sid, self.host, self.port,
                 self.ensemble, "on" if self.ssl_server else "off")
        return self.port

    async def stop(self) -> None:
        """Stop listening and drop every connection; no events are delivered afterwards."""
        if not self._running:
            return
        self._running = False
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for conn in self._all_conns():
            conn.shut(graceful=False)
        self._channels.clear()
        self._closing.clear()
        self._learner_channel.clear()
        self._elect_out.clear()
        self._elect_in.clear()
        self._pending.clear()
        if server is not None:
            try:
                await asyncio.wait_for(server.wait_closed(), 5.0)
            except asyncio.TimeoutError:
                log.warning("sid %s: server did not close within 5 s", self.sid)

    def _all_conns(self) -> list[_Conn]:
        return [*self._channels.values(), *self._elect_out.values(), *self._elect_in.values(), *self._pending]

    # -- configuration and fault hooks -----------------------------------------------------------

    def set_peers(self, addrs: dict[int, tuple[str, int]]) -> None:
        """Replace the address book. A peer whose address changed loses its election connection
        (it pointed at the old process); channels are per iteration and are left alone."""
        new = {int(s): (str(h), int(p)) for s, (h, p) in addrs.items()}
        for s, conn in list(self._elect_out.items()):
            if new.get(s) != self._addrs.get(s):
                del self._elect_out[s]
                conn.shut(graceful=False)
        self._addrs = new

    def block(self, peers: set[int]) -> None:
        """Partition from ``peers``: drop every connection to or from them (the local side sees
        ``ChannelClosed`` on a later loop turn, like the peer does) and refuse new ones."""
        peers = set(peers)
        self._blocked |= peers
        doomed = [c for c in self._all_conns() if c.peer in peers]
        for conn in doomed:
            log.info("sid %s: blocking sid %s, dropping its connection", self.sid, conn.peer)
            self._unregister(conn)
            conn.shut(graceful=False)
            self._closed_later(conn)

    def unblock(self, peers: set[int]) -> None:
        self._blocked -= set(peers)

    # -- channels --------------------------------------------------------------------------------

    def open(self, channel: ChannelId) -> None:
        """Learner side: connect to ``channel.leader`` and send the handshake; ``send`` may be
        called at once (frames queue until connected). Failure to connect, or a refusal by the
        leader, shows up as ``ChannelClosed(channel)``."""
        if channel.learner != self.sid or channel.leader == self.sid:
            raise ConfigError(f"sid {self.sid} cannot open {channel}: it must be the learner, not the leader")
        if not self._running:
            raise ConfigError("transport not started")
        if channel in self._channels:
            log.warning("sid %s: %s is already open", self.sid, channel)
            return
        conn = _Conn(self, _CHAN_LEARNER, channel.leader, channel)
        self._greet(conn, Handshake(self.ensemble, self.sid, KIND_CHANNEL, channel).encode())
        self._channels[channel] = conn
        self.stats["channels_opened"] += 1
        addr = self._addrs.get(channel.leader)
        if channel.leader in self._blocked or addr is None:
            why = "blocked" if addr is not None else "no address"
            log.info("sid %s: cannot open %s (%s)", self.sid, channel, why)
            self._unregister(conn)
            conn.shut(graceful=False)
            self._closed_later(conn)
            return
        self._connect(conn, addr)

    def send(self, channel: ChannelId, msg: Message) -> None:
        """Queue ``msg`` on ``channel``; written with everything else queued this loop turn.
        Silently dropped if the channel is gone (its ``ChannelClosed`` is, or was, on its way)."""
        conn = self._channels.get(channel)
        if conn is None or conn.closed:
            self.stats["sends_dropped"] += 1
            return
        allowed = LEADER_TO_LEARNER if conn.role == _CHAN_LEADER else LEARNER_TO_LEADER
        if type(msg) not in allowed:
            raise ConfigError(f"{type(msg).__name__} cannot be sent on {channel} by sid {self.sid}")
        try:
            conn.out.add_payload(encode(msg))
        except CodecError as e:  # too large: the stream cannot stay a complete prefix, so end it
            log.error(
                "sid %s: cannot send %s on %s: %s; closing it", self.sid, type(msg).__name__, channel, e
            )
            self._unregister(conn)
            conn.shut(graceful=True)
            self._closed_later(conn)
            return
        conn.schedule_flush()

    def close(self, channel: ChannelId) -> None:
        """End ``channel`` (what is already queued is still written); no event follows."""
        self._closing.pop(channel, None)  # asked for: its pending ChannelClosed is no longer owed
        conn = self._channels.get(channel)
        if conn is None:
            return
        self._unregister(conn)
        conn.shut(graceful=True)

    # -- election --------------------------------------------------------------------------------

    def notify(self, to: int, note: Notification) -> None:
        """Send an election notification to ``to``; dropped if it cannot be delivered soon."""
        if not self._running or to in self._blocked:
            self.stats["notes_dropped"] += 1
            return
        if to == self.sid:  # loopback, on a later turn like any other delivery
            self._loop.call_soon(self._emit, Notified(self.sid, note))
            self.stats["notes_sent"] += 1
            return
        conn = self._elect_out.get(to)
        if conn is None or conn.closed:
            addr = self._addrs.get(to)
            if addr is None:
                self.stats["notes_dropped"] += 1
                return
            conn = _Conn(self, _ELECT_OUT, to)
            self._greet(conn, Handshake(self.ensemble, self.sid, KIND_ELECTION).encode())
            self._elect_out[to] = conn
            self._connect(conn, addr)
        elif len(conn.out) > _ELECTION_BACKLOG:
            self.stats["notes_dropped"] += 1
            return
        conn.out.add_payload(encode(note))
        self.stats["notes_sent"] += 1
        conn.schedule_flush()

    # -- internals -------------------------------------------------------------------------------

    def _emit(self, event: Event) -> None:
        if not self._running:
            return
        try:
            self._on_event(event)
        except Exception:
            log.exception("sid %s: on_event raised on %r", self.sid, type(event).__name__)

    def _connect(self, conn: _Conn, addr: tuple[str, int]) -> None:
        conn.connect_task = self._loop.create_task(self._do_connect(conn, addr))

    async def _do_connect(self, conn: _Conn, addr: tuple[str, int]) -> None:
        self.stats["connects"] += 1
        try:
            await asyncio.wait_for(
                self._loop.create_connection(lambda: conn, addr[0], addr[1], ssl=self.ssl_client),
                self.connect_timeout,
            )
        except asyncio.CancelledError:
            return
        except (OSError, asyncio.TimeoutError, ssl.SSLError) as e:
            if conn.closed:
                return
            self.stats["connect_failures"] += 1
            log.info(
                "sid %s: cannot connect to sid %s at %s:%s: %s", self.sid, conn.peer, addr[0], addr[1], e
            )
            self._lost(conn, e)

    def _accepted(self, conn: _Conn) -> None:
        self.stats["accepted"] += 1
        if not self._running:
            conn.shut(graceful=False)
            return
        self._pending.add(conn)
        conn.hs_timer = self._loop.call_later(self.handshake_timeout, self._handshake_timeout, conn)

    def _handshake_timeout(self, conn: _Conn) -> None:
        if conn.role == _PENDING and not conn.closed:
            self._refuse(conn, f"no handshake within {self.handshake_timeout:.1f} s", logging.WARNING)

    def _refuse(self, conn: _Conn, why: str, level: int) -> None:
        self.stats["refused_handshakes"] += 1
        peer = conn.transport.get_extra_info("peername") if conn.transport is not None else None
        log.log(level, "sid %s: refused connection from %s (sid %s): %s", self.sid, peer, conn.peer, why)
        self._pending.discard(conn)
        conn.shut(graceful=False)

    def _greet(self, conn: _Conn, handshake: bytes) -> None:
        """Connector: queue the handshake (and, with a secret, the HELLO; nothing else is
        written until the acceptor's CHALLENGE proves it holds the secret)."""
        if self.secret is None:
            conn.out.add_payload(handshake)
            return
        auth = Connector(self.secret, PEER + handshake, os.urandom(32))
        conn.auth = auth
        conn.authed = False
        conn.greeting = frame(handshake) + frame(auth.hello())

    def _await_challenge(self, conn: _Conn) -> None:
        conn.hs_timer = self._loop.call_later(self.handshake_timeout, self._challenge_timeout, conn)

    def _challenge_timeout(self, conn: _Conn) -> None:
        if not conn.authed and not conn.closed:
            self.stats["auth_failures"] += 1
            self._log_auth(conn, f"no auth challenge within {self.handshake_timeout:.1f} s")
            self._lost(conn, None)

    def _challenged(self, conn: _Conn, payload: bytes) -> None:
        """Connector: the acceptor's CHALLENGE; if it holds the secret, prove we do and send."""
        auth = conn.auth
        assert isinstance(auth, Connector)
        try:
            proof = auth.proof(payload)
        except AuthFailed as e:
            self.stats["auth_failures"] += 1
            self._log_auth(conn, str(e))
            self._lost(conn, None)
            return
        if conn.hs_timer is not None:
            conn.hs_timer.cancel()
            conn.hs_timer = None
        conn.auth = None
        conn.authed = True
        assert conn.transport is not None
        conn.transport.write(frame(proof))
        if len(conn.out):
            conn.flush()

    def _log_auth(self, conn: _Conn, why: str) -> None:
        """Log a failed proof once per peer host (a flood of attempts must not flood the log)."""
        peer = conn.transport.get_extra_info("peername") if conn.transport is not None else None
        host = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        level = logging.DEBUG if host in self._auth_logged else logging.WARNING
        self._auth_logged.add(host)
        log.log(level, "sid %s: authentication with %s (claims sid %s) failed: %s; further failures from "
                "this host are logged at debug level", self.sid, peer, conn.peer, why)

    def _handshake(self, conn: _Conn, payload: bytes) -> None:
        """A frame of an accepted connection before it has a role: the handshake, then (with a
        secret) the HELLO and the PROOF; only a proven connection is admitted."""
        if conn.hs is not None:
            auth = conn.auth
            assert isinstance(auth, Acceptor)
            try:
                if conn.transport is not None and not auth.challenged:
                    conn.transport.write(frame(auth.challenge(payload)))
                    return
                auth.verify(payload)
            except AuthFailed as e:
                self.stats["auth_failures"] += 1
                self._log_auth(conn, str(e))
                self._refuse(conn, f"authentication failed: {e}", logging.DEBUG)
                return
            conn.auth = None
            self._admit(conn, conn.hs)
            return
        try:
            hs = decode_handshake(payload)
        except CodecError as e:
            self.stats["bad_frames"] += 1
            self._refuse(conn, f"bad handshake: {e}", logging.WARNING)
            return
        conn.peer = hs.sid
        if hs.ensemble != self.ensemble:
            self._refuse(conn, f"ensemble {hs.ensemble!r} is not {self.ensemble!r}", logging.WARNING)
            return
        if self.secret is None:
            self._admit(conn, hs)
            return
        conn.hs = hs
        conn.auth = Acceptor(self.secret, PEER + payload, os.urandom(32))

    def _admit(self, conn: _Conn, hs: Handshake) -> None:
        """An (authenticated) handshake: check it against the rules and give the connection its role."""
        self._pending.discard(conn)
        if conn.hs_timer is not None:
            conn.hs_timer.cancel()
            conn.hs_timer = None
        if hs.sid in self._blocked:
            self._refuse(conn, "sender is blocked", logging.INFO)
            return
        if hs.sid == self.sid:
            self._refuse(conn, "sender claims our own sid", logging.WARNING)
            return
        if hs.kind == KIND_ELECTION:
            old = self._elect_in.pop(hs.sid, None)
            if old is not None:  # the peer reconnected: its previous connection is dead or stale
                old.shut(graceful=False)
            conn.role = _ELECT_IN
            self._elect_in[hs.sid] = conn
            return
        ch = hs.channel
        assert ch is not None
        if ch.leader != self.sid:
            self._refuse(conn, f"{ch} names leader {ch.leader}, this is sid {self.sid}", logging.WARNING)
            return
        if ch.learner != hs.sid:
            self._refuse(conn, f"{ch} names learner {ch.learner} but sender is sid {hs.sid}", logging.WARNING)
            return
        key = (ch.incarnation, ch.iteration)
        latest = self._latest.get(ch.learner)
        if latest is not None and key <= latest:
            self._refuse(
                conn,
                f"{ch} is not newer than (incarnation, iteration) {latest} already seen from sid {ch.learner}",
                logging.INFO,
            )
            return
        self._latest[ch.learner] = key
        old_id = self._learner_channel.get(ch.learner)
        old = self._channels.get(old_id) if old_id is not None else None
        # Register the new channel first, so that a handler reacting to the old one's
        # ChannelClosed (say, by blocking the learner) sees and can drop the new one too.
        conn.role = _CHAN_LEADER
        conn.channel = ch
        self._channels[ch] = conn
        self._learner_channel[ch.learner] = ch
        self.stats["channels_accepted"] += 1
        if old is not None and old_id is not None:
            log.info("sid %s: %s replaces %s", self.sid, ch, old_id)
            self.stats["channels_replaced"] += 1
            self._unregister(old)
            old.shut(graceful=False)
            if old.announced:  # synchronous: it must precede the new channel's first Received
                self._emit(ChannelClosed(old_id))

    def _unregister(self, conn: _Conn) -> None:
        """Forget ``conn`` in every table (idempotent)."""
        role = conn.role
        if role == _CHAN_LEADER or role == _CHAN_LEARNER:
            ch = conn.channel
            if ch is not None and self._channels.get(ch) is conn:
                del self._channels[ch]
                if role == _CHAN_LEADER and self._learner_channel.get(ch.learner) == ch:
                    del self._learner_channel[ch.learner]
        elif role == _ELECT_OUT:
            if self._elect_out.get(conn.peer) is conn:
                del self._elect_out[conn.peer]
        elif role == _ELECT_IN:
            if self._elect_in.get(conn.peer) is conn:
                del self._elect_in[conn.peer]
        else:
            self._pending.discard(conn)

    def _closed_event(self, conn: _Conn) -> ChannelClosed | None:
        """The event owed for a connection that ended without our asking, if any."""
        if conn.channel is None:
            return None
        if conn.role == _CHAN_LEARNER or (conn.role == _CHAN_LEADER and conn.announced):
            return ChannelClosed(conn.channel)
        return None

    def _closed_later(self, conn: _Conn) -> None:
        """Deliver ``conn``'s ChannelClosed on a later loop turn (we are inside an actor call)."""
        ev = self._closed_event(conn)
        if ev is not None:
            self.stats["channels_lost"] += 1
            self._closing[ev.channel] = ev
            self._loop.call_soon(self._emit_closing, ev.channel)

    def _emit_closing(self, channel: ChannelId) -> None:
        ev = self._closing.pop(channel, None)
        if ev is not None:
            self._emit(ev)

    def _lost(self, conn: _Conn, exc: BaseException | None) -> None:
        """The connection broke or the peer closed it (from a loop callback: deliver now)."""
        if conn.closed:
            return
        if conn.role == _PENDING and conn.hs is not None:  # it gave up on proving membership
            self.stats["auth_failures"] += 1
            self._log_auth(conn, "closed before the exchange completed")
        if exc is not None:
            log.debug("sid %s: connection to sid %s lost: %s", self.sid, conn.peer, exc)
        self._unregister(conn)
        conn.shut(graceful=False)
        ev = self._closed_event(conn)
        if ev is not None:
            self.stats["channels_lost"] += 1
            self._emit(ev)

    def _malformed(self, conn: _Conn, err: CodecError) -> None:
        """Bad bytes from the peer: drop this connection only."""
        if conn.closed:
            return
        self.stats["bad_frames"] += 1
        if conn.role == _PENDING:
            self._refuse(conn, f"malformed input before the handshake: {err}", logging.WARNING)
            return
        log.warning(
            "sid %s: dropping connection with sid %s (%s): %s", self.sid, conn.peer, conn.channel, err
        )
        self._lost(conn, None)
