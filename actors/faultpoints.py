"""Fault hooks inside one replica's IO shell: named crash points, disk faults, link shaping.

Crash points are where Zab bugs hide: after one write and before the next, between receiving a
message and acknowledging it. A point is named by what the replica is about to do or has just
done (``recv:NEWLEADER``, ``send-before:ACK_NEWLEADER``, ``persist-after:current-epoch``);
arming one with ``nth`` kills the process (``os._exit``, nothing flushed) the nth time the
replica passes it. Disk faults make the next fsync fail or every fsync slow. Link shaping holds
or delays everything this replica sends to given peers (in order, as a stalled TCP connection
would), or cuts the current channels to them.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from actors.holds import ChannelHolds
from zabray.protocol.actions import Notify, Send
from zabray.replay.crashpoints import PERSIST_KIND_OF, crash_points  # noqa: F401 (PERSIST_KIND_OF: for the replica)
from zabray.replay.holds import HoldPattern


@dataclass
class ArmedCrash:
    point: str
    remaining: int


class LinkShaper:
    """Per-peer send shaping: ``delay_s`` (finite: each message waits that long; inf: held
    until released). Order per peer is kept, so channels stay FIFO."""

    def __init__(self) -> None:
        self.delay: dict[int, float] = {}
        self.queues: dict[int, deque[tuple[float, Send | Notify]]] = {}

    def shaped(self, peer: int) -> bool:
        return peer in self.delay

    def set(self, peers: list[int], delay_s: float) -> None:
        for p in peers:
            self.delay[p] = delay_s
            self.queues.setdefault(p, deque())

    def clear(self, peers: list[int]) -> list[Send | Notify]:
        """Stop shaping; returns what was waiting, in order, to be sent now."""
        out: list[Send | Notify] = []
        for p in peers:
            self.delay.pop(p, None)
            out.extend(item for _, item in self.queues.pop(p, deque()))
        return out

    def push(self, peer: int, now: float, item: Send | Notify) -> float:
        """Queue ``item``; returns when it is due (inf while held)."""
        due = now + self.delay[peer]
        self.queues[peer].append((due, item))
        return due

    def due(self, now: float) -> list[Send | Notify]:
        out: list[Send | Notify] = []
        for q in self.queues.values():
            while q and q[0][0] <= now and not math.isinf(q[0][0]):
                out.append(q.popleft()[1])
        return out


class ReplicaFaults:
    """A replica's injected faults. ``crash`` is None when no crash point is armed (the shell's
    hot paths test only that), else the armed points: the first to reach its nth pass fires."""

    def __init__(self, crash_points: Sequence[tuple[str, int]] = (), sid: int = -1,
                 holds: Sequence[tuple[int, HoldPattern]] = ()) -> None:
        self.crash: list[ArmedCrash] | None = None
        self.fail_next_sync = False
        self.sync_delay_s = 0.0
        self.links = LinkShaper()
        self.holds = ChannelHolds(sid)
        self.gated = False
        """True while a hold or a shaped link exists, or every message is traced: the one test
        on the shell's hot send path."""
        self.trace_messages = False
        if crash_points:
            self.arm_all(crash_points)
        for hid, p in holds:
            self.holds.add(hid, p)
        self.regate()

    def regate(self) -> None:
        """Recompute ``gated`` after holds or link shaping changed."""
        self.gated = bool(self.holds.active or self.links.delay or self.trace_messages)

    def arm(self, point: str, nth: int = 1) -> None:
        """Arm ``point`` alone (whatever was armed before is disarmed)."""
        self.arm_all([(point, nth)])

    def arm_all(self, points: Sequence[tuple[str, int]]) -> None:
        """Arm every ``(point, nth)`` at once, replacing what was armed; empty disarms."""
        armed = [ArmedCrash(c.point, c.nth) for c in crash_points(points)]
        self.crash = armed or None

    def hit(self, point: str, phase: str) -> bool:
        """Count a pass through ``point``; True when an armed crash fires now (it is then spent,
        and so are the others: the process dies)."""
        armed = self.crash
        if armed is None:
            return False
        fire = False
        for c in armed:
            base, _, want_phase = c.point.partition("@")
            if base != point or (want_phase and want_phase != phase):
                continue
            c.remaining -= 1
            fire = fire or c.remaining <= 0
        if fire:
            self.crash = None
        return fire

    def armed(self) -> tuple[tuple[str, int], ...]:
        """The armed crash points, each with the passes left before it fires."""
        return tuple((c.point, c.remaining) for c in self.crash or ())

    def describe(self) -> FaultsView:
        return FaultsView(
            crash_points=self.armed(), fail_next_sync=self.fail_next_sync, sync_delay_ms=self.sync_delay_s * 1000,
            links={p: ("held" if math.isinf(d) else f"{d * 1000:.0f} ms") for p, d in self.links.delay.items()},
            holds={hid: p.describe() for hid, p in self.holds.patterns.items()})


@dataclass(frozen=True, slots=True)
class FaultsView:
    """The faults in force inside one running replica."""

    crash_points: tuple[tuple[str, int], ...]
    """Armed crash points: (point, passes left before it fires)."""
    fail_next_sync: bool
    sync_delay_ms: float
    links: dict[int, str]
    """Per peer shaped: "held" or the delay ("50 ms")."""
    holds: dict[int, str]
    """Message holds by id, each as its pattern reads."""
