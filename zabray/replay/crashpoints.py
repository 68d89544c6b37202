"""The named crash points of a replica: what a fault schedule or ``arm_crash`` may name.

A point is named by what the replica is about to do or has just done (``recv:NEWLEADER``,
``send-before:ACK_NEWLEADER``, ``persist-after:current-epoch``). Pure data shared by the driver
(validating schedules and arguments) and the replica shell (``actors.faultpoints``, which fires them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from zabray.errors import ConfigError
from zabray.protocol.messages import ALL_MESSAGES, BATCHES

LEARNER_RECEIVES = ("LEADERINFO", "DIFF", "TRUNC", "SNAP", "NEWLEADER", "UPTODATE", "PROPOSAL", "COMMIT",
                    "INFORM", "PING")
LEADER_RECEIVES = ("FOLLOWERINFO", "OBSERVERINFO", "ACKEPOCH", "ACK_NEWLEADER", "ACK", "REQUEST", "PING")
PERSIST_KINDS = {
    "txns": "AppendTxns",
    "truncate": "TruncateLog",
    "accepted-epoch": "WriteAcceptedEpoch",
    "current-epoch": "WriteCurrentEpoch",
    "snapshot": "PersistSnapshot",
    "snap-install": "InstallSnapshot",
}
PERSIST_KIND_OF = {v: k for k, v in PERSIST_KINDS.items()}


def all_points() -> dict[str, str]:
    """Every crash point with a one-line description."""
    names = [m.NAME for m in ALL_MESSAGES if m not in BATCHES]
    out: dict[str, str] = {}
    for n in names:
        out[f"recv:{n}"] = f"on receiving {n}, before the core sees it"
    for n in names:
        out[f"send-before:{n}"] = f"about to send {n} (it never leaves)"
        out[f"send-after:{n}"] = f"right after {n} is written to the socket"
    for kind, action in PERSIST_KINDS.items():
        out[f"persist-before:{kind}"] = f"before a group commit holding {action} is written (it is lost)"
        out[f"persist-after:{kind}"] = f"after {action} is durable, before the core hears it (no ACK leaves)"
    return out


def check_point(point: str) -> str:
    base = point.split("@", 1)[0]
    if base not in all_points():
        raise ConfigError(f"unknown crash point {point!r}; `zabray faults points` lists them")
    if "@" in point and point.split("@", 1)[1] not in ("discovery", "synchronization", "broadcast", "election"):
        raise ConfigError(f"crash point phase must be discovery, synchronization, broadcast or election: {point!r}")
    return point


@dataclass(frozen=True, slots=True)
class CrashPoint:
    """One armed crash point: the replica dies the ``nth`` time (>= 1) it passes ``point``
    (a name from ``all_points``, optionally narrowed with ``@phase``)."""

    point: str
    nth: int = 1

    def __post_init__(self) -> None:
        check_point(self.point)
        if isinstance(self.nth, bool) or not isinstance(self.nth, int) or self.nth < 1:
            raise ConfigError(f"crash point {self.point!r}: nth must be an integer >= 1, got {self.nth!r}")

    def describe(self) -> str:
        return f"{self.point}#{self.nth}"


CrashPoints: TypeAlias = "Mapping[str, int] | Iterable[str | tuple[str, int] | CrashPoint]"
"""What the API takes for several crash points: ``{"recv:NEWLEADER": 1}``, or an iterable of
names (nth 1), ``(point, nth)`` pairs or ``CrashPoint``s."""


def crash_points(spec: CrashPoints | None) -> tuple[CrashPoint, ...]:
    """Validate and normalize ``spec`` (``ConfigError`` on an unknown name, a bad nth, or the
    same point named twice); None and empty give ``()``: nothing armed."""
    if spec is None:
        return ()
    if isinstance(spec, (str, bytes)):
        raise ConfigError(f"crash points must be a list or a mapping, not the single string {spec!r}: "
                          f"write [{spec!r}]")
    items: list[CrashPoint] = []
    pairs = spec.items() if isinstance(spec, Mapping) else spec
    for item in pairs:
        if isinstance(item, CrashPoint):
            items.append(item)
        elif isinstance(item, str):
            items.append(CrashPoint(item))
        elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
            items.append(CrashPoint(item[0], item[1]))
        else:
            raise ConfigError(f"a crash point is a name, a (name, nth) pair or a CrashPoint, not {item!r}")
    seen: set[str] = set()
    for c in items:
        if c.point in seen:
            raise ConfigError(f"crash point {c.point!r} is named twice")
        seen.add(c.point)
    return tuple(items)
