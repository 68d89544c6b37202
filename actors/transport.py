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
(``zabray.wire.auth``: HELLO, CHALLENGE, PROOF, keyed by the secret, bound to both nonces and to the
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
import ssl
from collections.abc import Callable

from actors.peer_conn import (
    CHAN_LEADER,
    CHAN_LEARNER,
    ELECT_IN,
    ELECT_OUT,
    LEADER_TO_LEARNER,
    LEARNER_TO_LEADER,
    PENDING,
    BatchEncoder,
    PeerConn,
)
from zabray.errors import CodecError, ConfigError
from zabray.net.batching import Outbox
from zabray.protocol.codec import encode
from zabray.protocol.events import ChannelClosed, ChannelId, Event, Notified
from zabray.protocol.messages import (
    Message,
    Notification,
    Proposal,
    Request,
)
from zabray.wire.auth import PEER, Acceptor, AuthFailed, Connector, Secret
from zabray.wire.framing import (
    DEFAULT_MAX_FRAME,
    KIND_CHANNEL,
    KIND_ELECTION,
    Handshake,
    decode_handshake,
    frame,
)

log = logging.getLogger(__name__)

_ELECTION_BACKLOG = 1 << 20
"""Bytes of notifications buffered for one unwritable election connection before new ones drop."""
_BATCH_BYTES = 1 << 20
"""A PROPOSALS or REQUESTS frame holds at most this much (or half the frame limit): a burst of
large values still streams in pieces of a bounded size."""
_BATCH_ENTRY = 64  # a txn's or request's encoding beyond its value, at most

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
        outbox: Outbox | None = None,
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
        self.outbox = outbox if outbox is not None else Outbox()  # shared with the replica's client ports
        self._last_msg: Message | None = None  # messages are immutable: encode each once
        self._last_payload = b""
        self._batch_cap = min(_BATCH_BYTES, max_frame // 2)
        self.batches = BatchEncoder()
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by start()
        self._server: asyncio.base_events.Server | None = None
        self._addrs: dict[int, tuple[str, int]] = {}
        self._blocked: set[int] = set()
        self._channels: dict[ChannelId, PeerConn] = {}
        self._learner_channel: dict[int, ChannelId] = {}  # leader side: each learner's live channel
        self._latest: dict[int, tuple[int, int]] = {}  # leader side: highest (incarnation, iteration)
        self._elect_out: dict[int, PeerConn] = {}
        self._elect_in: dict[int, PeerConn] = {}
        self._pending: set[PeerConn] = set()  # accepted, handshake not read yet
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
        self.loop = asyncio.get_running_loop()
        self._server = await self.loop.create_server(
            lambda: PeerConn(self, PENDING), self.host, self.port, reuse_address=True, backlog=128,
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
            except TimeoutError:
                log.warning("sid %s: server did not close within 5 s", self.sid)

    def _all_conns(self) -> list[PeerConn]:
        return [*self._channels.values(), *self._elect_out.values(), *self._elect_in.values(), *self._pending]

    # -- configuration and fault hooks -----------------------------------------------------------

    @property
    def peers(self) -> dict[int, tuple[str, int]]:
        """The address book: each peer's (host, quorum port)."""
        return dict(self._addrs)

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
        conn = PeerConn(self, CHAN_LEARNER, channel.leader, channel)
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
        allowed = LEADER_TO_LEARNER if conn.role == CHAN_LEADER else LEARNER_TO_LEADER
        if type(msg) not in allowed:
            raise ConfigError(f"{type(msg).__name__} cannot be sent on {channel} by sid {self.sid}")
        t = type(msg)
        if t is Proposal or t is Request:  # batched: one frame per burst (PROPOSALS, REQUESTS)
            size = len(msg.txn.value if t is Proposal else msg.value) + _BATCH_ENTRY  # type: ignore[attr-defined]
            cap = self._batch_cap
            if size <= cap:  # held for the burst's frame, which never exceeds cap
                if conn.batch_bytes + size > cap:
                    conn.put_batch()
                conn.batch.append(msg)
                conn.batch_bytes += size
                conn.schedule_flush()
                return
        if conn.batch:
            conn.put_batch()
        try:
            if msg is not self._last_msg:  # a leader sends each PROPOSAL/COMMIT to every learner
                self._last_payload = encode(msg)
                self._last_msg = msg
            conn.out.add_payload(self._last_payload)
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
            self.loop.call_soon(self.emit, Notified(self.sid, note))
            self.stats["notes_sent"] += 1
            return
        conn = self._elect_out.get(to)
        if conn is None or conn.closed:
            addr = self._addrs.get(to)
            if addr is None:
                self.stats["notes_dropped"] += 1
                return
            conn = PeerConn(self, ELECT_OUT, to)
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

    def emit(self, event: Event) -> None:
        if not self._running:
            return
        try:
            self._on_event(event)
        except Exception:
            log.exception("sid %s: on_event raised on %r", self.sid, type(event).__name__)

    def _connect(self, conn: PeerConn, addr: tuple[str, int]) -> None:
        conn.connect_task = self.loop.create_task(self._do_connect(conn, addr))

    async def _do_connect(self, conn: PeerConn, addr: tuple[str, int]) -> None:
        self.stats["connects"] += 1
        try:
            await asyncio.wait_for(
                self.loop.create_connection(lambda: conn, addr[0], addr[1], ssl=self.ssl_client),
                self.connect_timeout,
            )
        except asyncio.CancelledError:
            return
        except (TimeoutError, OSError, ssl.SSLError) as e:
            if conn.closed:
                return
            self.stats["connect_failures"] += 1
            log.info(
                "sid %s: cannot connect to sid %s at %s:%s: %s", self.sid, conn.peer, addr[0], addr[1], e
            )
            self.conn_lost(conn, e)

    def conn_accepted(self, conn: PeerConn) -> None:
        self.stats["accepted"] += 1
        if not self._running:
            conn.shut(graceful=False)
            return
        self._pending.add(conn)
        conn.hs_timer = self.loop.call_later(self.handshake_timeout, self._handshake_timeout, conn)

    def _handshake_timeout(self, conn: PeerConn) -> None:
        if conn.role == PENDING and not conn.closed:
            self._refuse(conn, f"no handshake within {self.handshake_timeout:.1f} s", logging.WARNING)

    def _refuse(self, conn: PeerConn, why: str, level: int) -> None:
        self.stats["refused_handshakes"] += 1
        peer = conn.transport.get_extra_info("peername") if conn.transport is not None else None
        log.log(level, "sid %s: refused connection from %s (sid %s): %s", self.sid, peer, conn.peer, why)
        self._pending.discard(conn)
        conn.shut(graceful=False)

    def _greet(self, conn: PeerConn, handshake: bytes) -> None:
        """Connector: queue the handshake (and, with a secret, the HELLO; nothing else is
        written until the acceptor's CHALLENGE proves it holds the secret)."""
        if self.secret is None:
            conn.out.add_payload(handshake)
            return
        auth = Connector(self.secret, PEER + handshake, os.urandom(32))
        conn.auth = auth
        conn.authed = False
        conn.greeting = frame(handshake) + frame(auth.hello())

    def await_challenge(self, conn: PeerConn) -> None:
        conn.hs_timer = self.loop.call_later(self.handshake_timeout, self._challenge_timeout, conn)

    def _challenge_timeout(self, conn: PeerConn) -> None:
        if not conn.authed and not conn.closed:
            self.stats["auth_failures"] += 1
            self._log_auth(conn, f"no auth challenge within {self.handshake_timeout:.1f} s")
            self.conn_lost(conn, None)

    def conn_challenged(self, conn: PeerConn, payload: bytes) -> None:
        """Connector: the acceptor's CHALLENGE; if it holds the secret, prove we do and send."""
        auth = conn.auth
        assert isinstance(auth, Connector)
        try:
            proof = auth.proof(payload)
        except AuthFailed as e:
            self.stats["auth_failures"] += 1
            self._log_auth(conn, str(e))
            self.conn_lost(conn, None)
            return
        if conn.hs_timer is not None:
            conn.hs_timer.cancel()
            conn.hs_timer = None
        conn.auth = None
        conn.authed = True
        assert conn.transport is not None
        conn.transport.write(frame(proof))
        if conn.has_output():
            self.outbox.write_now(conn)

    def _log_auth(self, conn: PeerConn, why: str) -> None:
        """Log a failed proof once per peer host (a flood of attempts must not flood the log)."""
        peer = conn.transport.get_extra_info("peername") if conn.transport is not None else None
        host = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        level = logging.DEBUG if host in self._auth_logged else logging.WARNING
        self._auth_logged.add(host)
        log.log(level, "sid %s: authentication with %s (claims sid %s) failed: %s; further failures from "
                "this host are logged at debug level", self.sid, peer, conn.peer, why)

    def conn_handshake(self, conn: PeerConn, payload: bytes) -> None:
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

    def _admit(self, conn: PeerConn, hs: Handshake) -> None:
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
            conn.role = ELECT_IN
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
        conn.role = CHAN_LEADER
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
                self.emit(ChannelClosed(old_id))

    def _unregister(self, conn: PeerConn) -> None:
        """Forget ``conn`` in every table (idempotent)."""
        role = conn.role
        if role == CHAN_LEADER or role == CHAN_LEARNER:
            ch = conn.channel
            if ch is not None and self._channels.get(ch) is conn:
                del self._channels[ch]
                if role == CHAN_LEADER and self._learner_channel.get(ch.learner) == ch:
                    del self._learner_channel[ch.learner]
        elif role == ELECT_OUT:
            if self._elect_out.get(conn.peer) is conn:
                del self._elect_out[conn.peer]
        elif role == ELECT_IN:
            if self._elect_in.get(conn.peer) is conn:
                del self._elect_in[conn.peer]
        else:
            self._pending.discard(conn)

    def _closed_event(self, conn: PeerConn) -> ChannelClosed | None:
        """The event owed for a connection that ended without our asking, if any."""
        if conn.channel is None:
            return None
        if conn.role == CHAN_LEARNER or (conn.role == CHAN_LEADER and conn.announced):
            return ChannelClosed(conn.channel)
        return None

    def _closed_later(self, conn: PeerConn) -> None:
        """Deliver ``conn``'s ChannelClosed on a later loop turn (we are inside an actor call)."""
        ev = self._closed_event(conn)
        if ev is not None:
            self.stats["channels_lost"] += 1
            self._closing[ev.channel] = ev
            self.loop.call_soon(self._emit_closing, ev.channel)

    def _emit_closing(self, channel: ChannelId) -> None:
        ev = self._closing.pop(channel, None)
        if ev is not None:
            self.emit(ev)

    def conn_lost(self, conn: PeerConn, exc: BaseException | None) -> None:
        """The connection broke or the peer closed it (from a loop callback: deliver now)."""
        if conn.closed:
            return
        if conn.role == PENDING and conn.hs is not None:  # it gave up on proving membership
            self.stats["auth_failures"] += 1
            self._log_auth(conn, "closed before the exchange completed")
        if exc is not None:
            log.debug("sid %s: connection to sid %s lost: %s", self.sid, conn.peer, exc)
        self._unregister(conn)
        conn.shut(graceful=False)
        ev = self._closed_event(conn)
        if ev is not None:
            self.stats["channels_lost"] += 1
            self.emit(ev)

    def conn_malformed(self, conn: PeerConn, err: CodecError) -> None:
        """Bad bytes from the peer: drop this connection only."""
        if conn.closed:
            return
        self.stats["bad_frames"] += 1
        if conn.role == PENDING:
            self._refuse(conn, f"malformed input before the handshake: {err}", logging.WARNING)
            return
        log.warning(
            "sid %s: dropping connection with sid %s (%s): %s", self.sid, conn.peer, conn.channel, err
        )
        self.conn_lost(conn, None)
