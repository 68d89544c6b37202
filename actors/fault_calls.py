"""The link and hold faults the injector asks a replica to apply, as typed requests.

One Ray method (``ReplicaActor.fault``) takes any of them and dispatches with ``match``: a call
the replica has no hook for is a type error where it is written, not an ``AttributeError`` on the
replica at run time. A call deferred while its replica is paused is kept as one of these and
applied on resume.
"""

from __future__ import annotations

from dataclasses import dataclass

from zabray.replay.holds import HeldMessage, HoldPattern


@dataclass(frozen=True, slots=True)
class ShapeLinks:
    """Delay what the replica sends to ``peers`` by ``delay_ms``; None holds it (a one-way cut)."""
    peers: tuple[int, ...]
    delay_ms: float | None


@dataclass(frozen=True, slots=True)
class UnshapeLinks:
    """Send to ``peers`` at once again, releasing what shaping held."""
    peers: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CutLinks:
    """Close the current channels to ``peers`` mid-iteration; answers how many were closed."""
    peers: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AddHold:
    hold_id: int
    pattern: HoldPattern


@dataclass(frozen=True, slots=True)
class StopHold:
    """Stop hold ``hold_id`` (every hold if None) catching messages; what it held stays held."""
    hold_id: int | None


@dataclass(frozen=True, slots=True)
class ReleaseHeld:
    """Send the first ``count`` held messages (all if None) to ``dst`` (every peer if None);
    answers the messages sent."""
    hold_id: int | None
    count: int | None
    dst: int | None


@dataclass(frozen=True, slots=True)
class ListHeld:
    """Answers the messages held now, unreleased."""


FaultCall = ShapeLinks | UnshapeLinks | CutLinks | AddHold | StopHold | ReleaseHeld | ListHeld
FaultAnswer = int | list[HeldMessage] | None
