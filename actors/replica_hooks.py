"""The fault-injector's hooks on a replica's send path, mixed into ``ReplicaServer``: message
holds (``actors.holds``), link shaping (delays, one-way partitions: ``actors.faultpoints``),
channel cuts, and ``message`` trace rows (``trace_messages: true``).

A channel message the core emits goes: hold stage (queued if its channel is held or a hold
catches it) -> shaping stage (queued per peer while the link is delayed or held) -> the socket.
Each stage keeps order, so a channel stays FIFO whatever is held, released or delayed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from actors.faultpoints import ReplicaFaults
from zabray.protocol.actions import Notify, Send
from zabray.protocol.events import ChannelClosed, ChannelId, Event, Received
from zabray.protocol.messages import Message, PeerState, Ping, Proposal, Touch
from zabray.replay.holds import HeldMessage, HoldPattern, carried_zxid
from zabray.trace import records as trace
from zabray.trace.writer import TraceWriter

if TYPE_CHECKING:
    from actors.transport import PeerTransport
    from zabray.protocol.node import Node

log = logging.getLogger(__name__)

UNTRACED = (Ping, Touch)
"""Heartbeats and session touches: too frequent to trace, never what a scenario is about."""


class FaultHooks:
    sid: int
    faults: ReplicaFaults
    transport: PeerTransport | None
    node: Node | None
    fatal: str | None
    loop: asyncio.AbstractEventLoop
    _trace: TraceWriter | None
    trace_msgs: bool

    def _step(self, event: Event) -> None:  # pragma: no cover (ReplicaServer's)
        raise NotImplementedError

    # -- message rows ------------------------------------------------------------------------------

    def msg_row(self, direction: str, peer: int, msg: Message) -> None:
        """A ``message`` trace row (only with ``trace_messages``; PING and TOUCH never)."""
        if self._trace is None or type(msg) in UNTRACED:
            return
        phase = self.node.role.phase_name() if self.node is not None else None
        self._trace.write(trace.PeerMessage(direction, msg.NAME, peer, carried_zxid(msg), phase), time.time())

    def planted_drop(self, event: Received) -> bool:
        """ZABRAY_PLANT_SYNC_PROPOSALS=drop (tests only): a follower drops a PROPOSAL received
        between NEWLEADER and UPTODATE, as if it never came; its later ACKs still claim it."""
        node = self.node
        return (type(event.msg) is Proposal and node is not None and node.state == PeerState.FOLLOWING
                and node.role.phase_name() == "synchronization")

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
                transport.send(a.channel, a.msg)
            elif type(a) is Notify:
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
        if self.node is None or self.transport is None:
            return 0
        cut = [ch for ch in self.node.role.channels() if ch.peer_of(self.sid) in peers]
        for ch in cut:
            self.transport.close(ch)
            self._step(ChannelClosed(ch))
        return len(cut)
