"""Message holds inside one replica's shell: the sending side of ``zabray.replay.holds``.

Queues are per channel (one iteration's connection to one peer), not per peer, so a held
message blocks only the rest of its own channel and dies with it; a new iteration's channel
starts empty. Holds are a stage before link shaping (``actors.faultpoints.LinkShaper``): a
released message then goes through any delay or one-way partition on its link, in order.

Invariants: a channel's queue is non-empty iff its head was caught by a hold; messages leave
a queue only from its head; ``active`` is True iff some pattern or queue exists (the shell's
hot send path tests only ``ReplicaFaults.gated``, which includes it).
"""

from __future__ import annotations

from collections import deque

from zabray.protocol.actions import Send
from zabray.protocol.events import ChannelId
from zabray.replay.holds import HeldMessage, HoldPattern, carried_zxid


def _channel_text(ch: ChannelId) -> str:
    return f"{ch.learner}<->{ch.leader} inc{ch.incarnation} it{ch.iteration}"


class ChannelHolds:
    def __init__(self, sid: int) -> None:
        self.sid = sid
        self.patterns: dict[int, HoldPattern] = {}
        self.queues: dict[ChannelId, deque[tuple[int | None, Send]]] = {}
        self.active = False

    def _refresh(self) -> None:
        self.active = bool(self.patterns or self.queues)

    def add(self, hold_id: int, p: HoldPattern) -> None:
        self.patterns[hold_id] = p
        self._refresh()

    def stop(self, hold_id: int | None) -> None:
        """Stop ``hold_id`` (every hold if None) catching; what it holds stays queued."""
        if hold_id is None:
            self.patterns.clear()
        else:
            self.patterns.pop(hold_id, None)
        self._refresh()

    def gate(self, peer: int, action: Send) -> tuple[bool, int | None]:
        """(queued, hold id): queue ``action`` if a hold catches it (id) or its channel is
        already held (None: it only waits behind, FIFO)."""
        ch = action.channel
        q = self.queues.get(ch)
        hid = self._catch(peer, action)
        if q is None:
            if hid is None:
                return False, None
            self.queues[ch] = q = deque()
            self.active = True
        q.append((hid, action))
        return True, hid

    def _catch(self, peer: int, action: Send) -> int | None:
        msg = action.msg
        z: int | None = None
        zknown = False
        for hid, p in self.patterns.items():
            if p.zxids is not None and not zknown:
                z, zknown = carried_zxid(msg), True
            if p.matches(self.sid, peer, msg.NAME, z):
                return hid
        return None

    def release(self, hold_id: int | None, count: int | None, dst: int | None) -> list[Send]:
        """Pop from the heads of the queues to ``dst`` (all peers if None), in (peer, channel)
        order: ``count`` caught messages (all if None) and what queues behind them, stopping
        at a message caught by a hold other than ``hold_id`` (when given)."""
        out: list[Send] = []
        for ch in sorted(self.queues, key=lambda c: (c.peer_of(self.sid), c.incarnation, c.iteration)):
            if dst is not None and ch.peer_of(self.sid) != dst:
                continue
            q = self.queues[ch]
            caught = 0
            while q:
                hid, a = q[0]
                if hid is not None:
                    if (hold_id is not None and hid != hold_id) or (count is not None and caught >= count):
                        break
                    caught += 1
                out.append(q.popleft()[1])
            if not q:
                del self.queues[ch]
        self._refresh()
        return out

    def drop(self, ch: ChannelId) -> list[Send]:
        """The channel closed: what waited on it dies with it."""
        q = self.queues.pop(ch, None)
        self._refresh()
        return [a for _, a in q] if q else []

    def held(self) -> list[HeldMessage]:
        out: list[HeldMessage] = []
        for ch, q in self.queues.items():
            peer = ch.peer_of(self.sid)
            for hid, a in q:
                out.append(HeldMessage(self.sid, peer, a.msg.NAME, carried_zxid(a.msg), hid, _channel_text(ch)))
        return out
