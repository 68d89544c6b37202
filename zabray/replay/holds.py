"""Message holds: what the fault injector may hold in a sending replica's shell, and the
driver API for it (pure; the replica side is ``actors.holds``).

A hold is a pattern over Zab channel messages: from sid(s), to sid(s), packet types (the
protocol's ``NAME``s: PROPOSAL, ACK, COMMIT, NEWLEADER, ACK_NEWLEADER, UPTODATE, ...) and an
inclusive zxid range for packets that carry one. Invariants:

- FIFO per channel is never broken: once a message on a channel (src -> dst, one iteration)
  is held, every later message on that channel queues behind it, matching or not.
- A hold catches new matches until it is stopped (``unhold``, ``release(stop=True)``, ``heal``);
  it survives restarts of the sending replica (it is armed in the new process at start).
- Held messages die with their channel: when the channel closes, its queue is dropped (the
  next iteration opens a fresh connection, as Zab's per-iteration channels require).
- Election NOTIFICATIONs travel outside channels and are never held.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from zabray.errors import ConfigError
from zabray.protocol.messages import ALL_MESSAGES, BATCHES, Message, Notification
from zabray.protocol.zxid import Zxid, fmt

HOLDABLE: tuple[str, ...] = tuple(m.NAME for m in ALL_MESSAGES if m is not Notification and m not in BATCHES)
"""Packet names a hold may name: every channel message."""


def parse_zxid(v: Any, where: str = "zxid") -> int:
    """A zxid from an int, a ``Zxid`` or ``"epoch:counter"``; ``ConfigError`` otherwise."""
    if isinstance(v, bool):
        raise ConfigError(f"{where}: expected a zxid (int or 'epoch:counter'), got {v!r}")
    if isinstance(v, int):
        if v < 0:
            raise ConfigError(f"{where}: a zxid is never negative, got {v}")
        return int(v)
    if isinstance(v, str):
        e, sep, c = v.partition(":")
        if sep and e.strip().isdigit() and c.strip().isdigit():
            return int(Zxid.of(int(e), int(c)))
    raise ConfigError(f"{where}: expected a zxid (int or 'epoch:counter'), got {v!r}")


def _sids(v: Any, key: str) -> frozenset[int] | None:
    if v is None:
        return None
    items = [v] if isinstance(v, int) and not isinstance(v, bool) else v
    if not isinstance(items, (list, tuple, set, frozenset)) or not items or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in items):
        raise ConfigError(f"hold {key}: expected a replica sid or a non-empty list of sids, got {v!r}")
    return frozenset(int(x) for x in items)


@dataclass(frozen=True, slots=True)
class HoldPattern:
    """Which channel messages a hold catches; None matches anything."""

    src: frozenset[int] | None = None
    dst: frozenset[int] | None = None
    types: frozenset[str] | None = None
    zxids: tuple[int, int] | None = None

    def matches(self, src: int, dst: int, name: str, zxid: int | None) -> bool:
        if self.src is not None and src not in self.src:
            return False
        if self.dst is not None and dst not in self.dst:
            return False
        if self.types is not None and name not in self.types:
            return False
        if self.zxids is not None:
            return zxid is not None and self.zxids[0] <= zxid <= self.zxids[1]
        return True

    def describe(self) -> str:
        def sids(s: frozenset[int] | None) -> str:
            return "*" if s is None else ",".join(map(str, sorted(s)))

        out = f"{sids(self.src)} -> {sids(self.dst)}"
        if self.types is not None:
            out += " " + ",".join(sorted(self.types))
        if self.zxids is not None:
            out += f" zxids {fmt(self.zxids[0])}..{fmt(self.zxids[1])}"
        return out


def pattern(src: Any = None, dst: Any = None, types: Any = None, zxids: Any = None) -> HoldPattern:
    """Validate a hold's arguments (``ConfigError`` naming the bad one) into a ``HoldPattern``.
    ``types`` is a name or a list of names from ``HOLDABLE``; ``zxids`` is one zxid or an
    inclusive ``[low, high]`` pair (ints or ``"epoch:counter"``)."""
    names: frozenset[str] | None = None
    if types is not None:
        items = [types] if isinstance(types, str) else types
        if not isinstance(items, (list, tuple, set, frozenset)) or not items or not all(isinstance(t, str) for t in items):
            raise ConfigError(f"hold types: expected a packet name or a list of them, got {types!r}")
        bad = sorted(t for t in items if t not in HOLDABLE)
        if bad:
            raise ConfigError(f"hold types: unknown packet {bad[0]!r}; channel packets are {', '.join(HOLDABLE)}")
        names = frozenset(items)
    rng: tuple[int, int] | None = None
    if zxids is not None:
        if isinstance(zxids, (list, tuple)):
            if len(zxids) != 2:
                raise ConfigError(f"hold zxids: expected one zxid or [low, high], got {zxids!r}")
            lo, hi = parse_zxid(zxids[0], "hold zxids"), parse_zxid(zxids[1], "hold zxids")
        else:
            lo = hi = parse_zxid(zxids, "hold zxids")
        if lo > hi:
            raise ConfigError(f"hold zxids: low {fmt(lo)} is above high {fmt(hi)}")
        rng = (lo, hi)
    return HoldPattern(_sids(src, "src"), _sids(dst, "dst"), names, rng)


def carried_zxid(msg: Message) -> int | None:
    """The zxid a packet carries: a PROPOSAL's txn, the last txn of a DIFF or INFORM, a
    FOLLOWERINFO's or ACKEPOCH's last zxid, else its ``zxid`` field; None for none."""
    z = getattr(msg, "zxid", None)
    if z is not None:
        return int(z)
    txn = getattr(msg, "txn", None)
    if txn is not None:
        return int(txn.zxid)
    txns = getattr(msg, "txns", None)
    if txns:
        return int(txns[-1].zxid)
    last = getattr(msg, "last_zxid", None)
    return int(last) if last is not None else None


@dataclass(frozen=True, slots=True)
class HeldMessage:
    """One message waiting in a sender's shell: ``hold`` is the id of the hold that caught it,
    None for a message only queued behind a held one (FIFO)."""

    src: int
    dst: int
    type: str
    zxid: int | None
    hold: int | None
    channel: str

    def describe(self) -> str:
        z = f" {fmt(self.zxid)}" if self.zxid is not None else ""
        why = f"held by #{self.hold}" if self.hold is not None else "queued behind"
        return f"{self.src}->{self.dst} {self.type}{z} ({why})"


def matching(held: Iterable[HeldMessage], want: HoldPattern, *, caught_only: bool = True) -> list[HeldMessage]:
    """The held messages ``want`` matches (only those a hold caught, unless ``caught_only`` is False)."""
    return [m for m in held if (m.hold is not None or not caught_only)
            and want.matches(m.src, m.dst, m.type, m.zxid)]


class HoldControl:
    """``Ensemble``'s hold API (mixed in); every call goes through the fault injector and lands
    in the run's trace as a ``fault`` row."""

    def _inject(self, method: str, *args: Any, timeout: float = 60) -> Any:  # pragma: no cover
        raise NotImplementedError

    def hold(self, src: int | Iterable[int] | None = None, dst: int | Iterable[int] | None = None,
             types: str | Iterable[str] | None = None, zxids: Any = None) -> int:
        """Hold, in the sending replicas' shells, every channel message matching the pattern
        (see ``pattern``); returns the hold's id. Later messages on a channel queue behind a held one."""
        p = pattern(_listed(src), _listed(dst), _listed(types), zxids)
        return int(self._inject("hold", p))

    def release(self, hold_id: int | None = None, count: int | None = None, src: int | None = None,
                dst: int | None = None, *, stop: bool = False) -> list[HeldMessage]:
        """Release held messages from the head of each selected channel (``src`` -> ``dst``, in
        (src, dst) order; one call per channel to choose the order across channels): the first
        ``count`` caught messages (all if None) with what queues behind them, stopping at a message
        caught by another hold than ``hold_id``. ``stop`` also stops the hold(s) catching.
        Returns what was released, in release order."""
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            raise ConfigError(f"release count must be a positive integer, got {count!r}")
        return list(self._inject("release", hold_id, count, src, dst, stop))

    def unhold(self, hold_id: int | None = None, release: bool = True) -> list[HeldMessage]:
        """Stop hold ``hold_id`` (every hold if None) catching messages; with ``release`` (the
        default) also release what it holds. Returns what was released."""
        return list(self._inject("unhold", hold_id, release))

    def held(self) -> list[HeldMessage]:
        """Every message waiting in a running replica's shell, per channel in queue order."""
        return list(self._inject("held"))

    def note(self, what: str, text: str) -> None:
        """A ``fault`` row ``what`` with ``text`` as its target in the run's trace (a scenario's steps)."""
        self._inject("note", str(what), str(text))


def _listed(v: Any) -> Any:
    if v is None or isinstance(v, (int, str)):
        return v
    return list(v)
