"""The simulated network: per-iteration FIFO channels and best-effort election links.

It mirrors what TCP gives the real replicas. A channel delivers in order or not at all past
a break; a partition delays traffic across the cut (TCP retransmits) rather than punching
holes in it, and the protocol's own timeouts close the channels it stops trusting. Closing
a channel lets what the closer already sent drain, then tells the peer; what was sent to the
closer is lost. A crashed replica's outgoing queues keep a random prefix (what reached the
wire), then close. Consecutive PROPOSALs (or REQUESTs) at the head of a queue arrive as one
PROPOSALS (REQUESTS) frame, as the replicas' transport sends a burst of them.

An election notification to a replica that is down is dropped (the simulator does not send
it), as the sender's connection to a dead peer is refused. Queued instead, the notifications of
a long outage (hundreds of resends) met the restarted replica in the final healing, drained at a
few per tick while each begot a reply, and held an election past its limits: a liveness
failure of the simulator, not of Zab, since a real replica reads such a backlog in microseconds.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from zabray.protocol.events import ChannelId
from zabray.protocol.messages import Message, Notification, Proposal, Proposals, Request, Requests

CLOSE = None  # queue marker: the sender closed the channel


@dataclass
class SimChannel:
    id: ChannelId
    # queues keyed by receiver sid; a None entry is the close marker
    to: dict[int, deque[Message | None]] = field(default_factory=dict)
    closed_by: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.to = {self.id.learner: deque(), self.id.leader: deque()}


class Network:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.channels: dict[ChannelId, SimChannel] = {}
        self.links: dict[tuple[int, int], deque[Notification]] = {}
        self.groups: list[frozenset[int]] | None = None
        self.drop_election = 0.0

    # -- topology ------------------------------------------------------------------------------

    def cut(self, a: int, b: int) -> bool:
        if self.groups is None:
            return False
        return not any(a in g and b in g for g in self.groups)

    def partition(self, groups: list[frozenset[int]]) -> None:
        self.groups = groups

    def heal(self) -> None:
        self.groups = None

    # -- channels -------------------------------------------------------------------------------

    def open(self, ch: ChannelId) -> None:
        self.channels.setdefault(ch, SimChannel(ch))

    def send(self, ch: ChannelId, sender: int, msg: Message) -> bool:
        c = self.channels.get(ch)
        if c is None or sender in c.closed_by:
            return False
        receiver = ch.peer_of(sender)
        if receiver in c.closed_by:
            return False
        c.to[receiver].append(msg)
        return True

    def close(self, ch: ChannelId, closer: int) -> None:
        c = self.channels.get(ch)
        if c is None or closer in c.closed_by:
            return
        c.closed_by.add(closer)
        c.to[closer].clear()
        peer = ch.peer_of(closer)
        if peer not in c.closed_by:
            c.to[peer].append(CLOSE)
        else:
            del self.channels[ch]

    def crash(self, sid: int) -> None:
        """``sid`` died: a random prefix of what it sent still arrives, then the close."""
        for ch in list(self.channels):
            if sid not in (ch.learner, ch.leader):
                continue
            c = self.channels[ch]
            peer = ch.peer_of(sid)
            q = c.to[peer]
            if q and q[-1] is not CLOSE:
                keep = self.rng.randint(0, len(q))
                while len(q) > keep:
                    q.pop()
            self.close(ch, sid)
        for key in [k for k in self.links if sid in k]:
            self.links[key].clear()

    def break_channel(self, ch: ChannelId) -> None:
        """The connection dies (a reset): in-flight data is lost, both ends are told."""
        c = self.channels.get(ch)
        if c is None:
            return
        for sid in (ch.learner, ch.leader):
            if sid not in c.closed_by:
                c.to[sid].clear()
                c.to[sid].append(CLOSE)

    # -- election links -------------------------------------------------------------------------

    def notify(self, frm: int, to: int, note: Notification) -> None:
        if self.cut(frm, to) or (self.drop_election and self.rng.random() < self.drop_election):
            return
        self.links.setdefault((frm, to), deque()).append(note)

    # -- what can be delivered now ------------------------------------------------------------------

    def deliverable(self, alive: set[int]) -> list[tuple[str, object, int]]:
        """(kind, key, receiver) for every queue whose head can be delivered now."""
        out: list[tuple[str, Any, int]] = []
        for ch, c in self.channels.items():
            for receiver, q in c.to.items():
                if q and receiver in alive and not self.cut(ch.learner, ch.leader):
                    out.append(("chan", ch, receiver))
        for key, notes in self.links.items():
            if notes and key[1] in alive:
                out.append(("link", key, key[1]))
        return out

    def ready(self, kind: str, key: Any, receiver: int) -> bool:
        """Is that queue still non-empty (a close earlier in the same pass may have emptied it)?"""
        if kind == "chan":
            c = self.channels.get(key)
            return c is not None and bool(c.to[receiver])
        return bool(self.links.get(key))

    def pop_channel(self, ch: ChannelId, receiver: int) -> Message | None:
        c = self.channels[ch]
        q = c.to[receiver]
        msg = q.popleft()
        if (type(msg) is Proposal or type(msg) is Request) and q and type(q[0]) is type(msg):
            run: list[Any] = [msg]
            while q and type(q[0]) is type(msg):
                run.append(q.popleft())
            if type(msg) is Proposal:
                return Proposals(tuple(m.txn for m in run))
            return Requests(msg.origin, tuple((m.request_id, m.value) for m in run))  # type: ignore[union-attr]
        if msg is CLOSE:
            c.closed_by.add(receiver)
            if c.closed_by >= {ch.learner, ch.leader} and not any(c.to.values()):
                del self.channels[ch]
        return msg

    def pop_link(self, key: tuple[int, int]) -> Notification:
        return self.links[key].popleft()

    def in_flight(self) -> int:
        return sum(len(q) for c in self.channels.values() for q in c.to.values()) + sum(
            len(q) for q in self.links.values()
        )
