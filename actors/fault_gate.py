"""The fault injector's gate around a replica's effects: crash points, message holds
(``actors.holds``), link shaping (delays, one-way partitions: ``actors.faultpoints``), channel
cuts, and ``message`` trace rows (``trace_messages: true``).

The replica steps its core through the gate (``admit`` for events, the ``Effects`` methods for
actions) only while a fault is armed or every message is traced; otherwise it uses its plain
``ReplicaEffects``, and nothing here costs anything. A channel message the core emits goes:
hold stage (queued if its channel is held or a hold catches it) -> shaping stage (queued per
peer while the link is delayed or held) -> the socket. Each stage keeps order, so a channel
stays FIFO whatever is held, released or delayed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol

from actors.effects import ReplicaEffects
from actors.faultpoints import ReplicaFaults
from zabray.protocol.actions import (
    Close,
    Committed,
    DecodeSnapshot,
    Deliver,
    EncodeSnapshot,
    Failed,
    Notify,
    Open,
    PersistAction,
    Send,
    SessionsTouched,
    Trace,
    Yield,
)
from zabray.protocol.events import ChannelClosed, ChannelId, Event, Notified, Received
from zabray.protocol.executor import StopStep
from zabray.protocol.messages import (
    Diff,
    Message,
    PeerState,
    Ping,
    Proposals,
    Requests,
    Snap,
    Touch,
    Trunc,
    unbatch,
)
from zabray.protocol.role import Phase
from zabray.replay.holds import HeldMessage, HoldPattern, carried_zxid
from zabray.trace import records as trace

if TYPE_CHECKING:
    from actors.transport import PeerTransport
    from zabray.trace.writer import TraceWriter

log = logging.getLogger(__name__)

_SYNC_TYPES = (Diff, Trunc, Snap)

UNTRACED = (Ping, Touch)
"""Heartbeats and session touches: too frequent to trace, never what a scenario is about."""


class GateHost(Protocol):
    """What the gate needs of its replica."""

    sid: int
    loop: asyncio.AbstractEventLoop
    fatal: str | None
    dying: bool

    def step(self, event: Event) -> None: ...
    def crash(self, point: str) -> None: ...
    def phase(self) -> Phase | None: ...
    def node_state(self) -> PeerState | None: ...
    def channels(self) -> list[ChannelId]: ...


class FaultGate:
    """Wraps a replica's ``ReplicaEffects`` with the faults in ``faults``; an ``Effects`` itself."""

    def __init__(self, host: GateHost, faults: ReplicaFaults) -> None:
        self.host = host
        self.sid = host.sid
        self.faults = faults
        self.inner: ReplicaEffects | None = None  # set once the replica's transport is up
        self.transport: PeerTransport | None = None
        self.trace_writer: TraceWriter | None = None
        self.trace_msgs = False

    def attach(self, inner: ReplicaEffects) -> None:
        self.inner = inner
        self.transport = inner.transport
        self.trace_writer = inner.trace_writer

    @property
    def active(self) -> bool:
        """Whether steps must go through the gate: something is held, shaped or traced, or a
        crash point is armed (the one test on the replica's hot path)."""
        return self.faults.gated or self.faults.crash is not None

    # -- events on their way into the core -------------------------------------------------------

    def admit(self, event: Event) -> list[Event]:
        """What of ``event`` the core takes: a burst counts as its messages (holds, message rows
        and crash points count messages, not frames); a crash point on receipt fires here."""
        faults = self.faults
        if type(event) is Received and isinstance(event.msg, (Proposals, Requests)):
            return [e for m in unbatch(event.msg) for e in self.admit(Received(event.channel, m))]
        if faults.gated:
            if type(event) is ChannelClosed:
                self.channel_gone(event.channel)
            elif type(event) is Received and self.trace_msgs:
                self.msg_row("recv", event.channel.peer_of(self.sid), event.msg)
        if faults.crash is not None and (type(event) is Received or type(event) is Notified):
            name = event.msg.NAME if type(event) is Received else "NOTIFICATION"
            if faults.hit(f"recv:{name}", self._phase()):
                self.host.crash(f"recv:{name}")
                return []
        return [event]

    def _phase(self) -> str:
        phase = self.host.phase()
        return phase.value if phase is not None else ""

    # -- Effects -----------------------------------------------------------------------------------

    def send(self, a: Send) -> None:
        inner = self.inner
        assert inner is not None
        faults = self.faults
        name = a.msg.NAME
        if faults.crash is not None and faults.hit(f"send-before:{name}", self._phase()):
            self.host.crash(f"send-before:{name}")
            raise StopStep
        if faults.gated:  # a hold, a shaped link or message tracing: the slow path
            self.gate(a.channel.peer_of(self.sid), a)
            if type(a.msg) in _SYNC_TYPES:
                inner.count_sync(name)
        else:
            inner.send(a)
        if faults.crash is not None and faults.hit(f"send-after:{name}", self._phase()):
            # Die once this loop turn's socket writes are out: the message leaves, nothing after it.
            self.host.dying = True
            self.host.loop.call_soon(self.host.crash, f"send-after:{name}")
            raise StopStep

    def notify(self, a: Notify) -> None:
        links = self.faults.links
        if links.delay and links.shaped(a.to):
            self._shape(a.to, a)
        else:
            assert self.inner is not None
            self.inner.notify(a)

    def close(self, a: Close) -> None:
        assert self.inner is not None
        self.inner.close(a)
        if self.faults.gated:
            self.channel_gone(a.channel)

    def open(self, a: Open) -> None:
        assert self.inner is not None
        self.inner.open(a)

    def persist(self, a: PersistAction) -> None:
        assert self.inner is not None
        self.inner.persist(a)

    def deliver(self, a: Deliver) -> None:
        assert self.inner is not None
        self.inner.deliver(a)

    def reply(self, a: Committed | Failed | SessionsTouched) -> None:
        assert self.inner is not None
        self.inner.reply(a)

    def trace(self, a: Trace) -> None:
        assert self.inner is not None
        self.inner.trace(a)

    def encode_snapshot(self, a: EncodeSnapshot) -> None:
        assert self.inner is not None
        self.inner.encode_snapshot(a)

    def decode_snapshot(self, a: DecodeSnapshot) -> None:
        assert self.inner is not None
        self.inner.decode_snapshot(a)

    def resume(self, a: Yield) -> None:
        assert self.inner is not None
        self.inner.resume(a)

    # -- message rows ------------------------------------------------------------------------------

    def msg_row(self, direction: str, peer: int, msg: Message) -> None:
        """A ``message`` trace row (only with ``trace_messages``; PING and TOUCH never)."""
        if self.trace_writer is None or type(msg) in UNTRACED:
            return
        phase = self.host.phase()
        self.trace_writer.write(trace.PeerMessage(direction, msg.NAME, peer, carried_zxid(msg),
                                                  phase.value if phase is not None else None), time.time())

    # -- the send path -------------------------------------------------------------------------------

    def gate(self, peer: int, action: Send) -> None:
        """A channel message while something is held or shaped: hold, shape or send it."""
        queued, _ = self.faults.holds.gate(peer, action)
        if self.trace_msgs:
            self.msg_row("hold" if queued else "send", peer, action.msg)
        if queued:
            self.faults.regate()
        else:
            self.after_hold(peer, action)

    def after_hold(self, peer: int, action: Send | Notify) -> None:
        links = self.faults.links
        if links.delay and links.shaped(peer):
            self._shape(peer, action)
        else:
            self._send_now([action])

    def channel_gone(self, ch: ChannelId) -> None:
        """A channel closed (either side): what was held on it dies with it."""
        dropped = self.faults.holds.drop(ch)
        if dropped:
            self.faults.regate()
            log.info("replica %d: %d held message(s) died with channel %s", self.sid, len(dropped), ch)
            if self.trace_msgs:
                for a in dropped:
                    self.msg_row("drop", ch.peer_of(self.sid), a.msg)

    def _shape(self, peer: int, action: Send | Notify) -> None:
        loop = self.host.loop
        due = self.faults.links.push(peer, loop.time(), action)
        if due != float("inf"):
            loop.call_at(due, self._release_due)

    def _release_due(self) -> None:
        self._send_now(self.faults.links.due(self.host.loop.time()))

    def _send_now(self, actions: list[Send | Notify]) -> None:
        transport = self.transport
        if transport is None or self.host.fatal is not None:
            return
        for a in actions:
            match a:
                case Send():
                    transport.send(a.channel, a.msg)
                case Notify():
                    transport.notify(a.to, a.note)

    # -- control (Ray calls) -------------------------------------------------------------------------

    def add_hold(self, hold_id: int, p: HoldPattern) -> None:
        self.faults.holds.add(hold_id, p)
        self.faults.regate()

    def stop_hold(self, hold_id: int | None) -> None:
        self.faults.holds.stop(hold_id)
        self.faults.regate()

    def release_held(self, hold_id: int | None, count: int | None, dst: int | None) -> list[HeldMessage]:
        """Release from the channels' heads (``ChannelHolds.release``), then send on in order."""
        out = self.faults.holds.release(hold_id, count, dst)
        self.faults.regate()
        released: list[HeldMessage] = []
        for a in out:
            peer = a.channel.peer_of(self.sid)
            released.append(HeldMessage(self.sid, peer, a.msg.NAME, carried_zxid(a.msg), None, str(a.channel)))
            if self.trace_msgs:
                self.msg_row("release", peer, a.msg)
            self.after_hold(peer, a)
        return released

    def held(self) -> list[HeldMessage]:
        return self.faults.holds.held()

    def shape_links(self, peers: list[int], delay_ms: float | None) -> None:
        """Delay (``delay_ms``) or hold (None: a one-way partition) what we send to ``peers``."""
        self.faults.links.set(peers, float("inf") if delay_ms is None else delay_ms / 1000)
        self.faults.regate()

    def unshape_links(self, peers: list[int]) -> None:
        out = self.faults.links.clear(peers)
        self.faults.regate()
        self._send_now(out)

    def cut_links(self, peers: list[int]) -> int:
        """Close our current channels to ``peers`` mid-iteration; both ends see them close."""
        if self.transport is None:
            return 0
        cut = [ch for ch in self.host.channels() if ch.peer_of(self.sid) in peers]
        for ch in cut:
            self.transport.close(ch)
            self.host.step(ChannelClosed(ch))
        return len(cut)
