"""The lab's state file, pure: what a lab made and what its nemesis has done to it.

``lab up`` writes it before it makes anything (so a ``lab up`` killed half-way leaves a record
of what it may have made), and every nemesis call updates it. The next ``lab up`` or ``lab
down`` reads it to remove exactly that lab.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from zabray.errors import ConfigError
from zabray.lab.plan import LabSpec


@dataclass(frozen=True, slots=True)
class Limit:
    rate_bps: int | None
    delay_ms: float | None


@dataclass(frozen=True, slots=True)
class LabState:
    spec: LabSpec
    owner_pid: int
    """The process that ran ``lab up`` (for a reader: a lab whose owner is gone is still a lab)."""
    created: float
    mountpoint_made: bool = False
    """Whether ``lab up`` created ``DISK_MOUNT`` in the root file system (then ``down`` removes it if empty)."""
    cut: tuple[int, ...] = ()
    crashed: tuple[int, ...] = ()
    blocked: tuple[tuple[int, tuple[str, ...]], ...] = ()
    """Per host, the addresses it cannot reach (partitions and one-way partitions)."""
    partition: str = ""
    """How the current partition was asked for, for ``status``."""
    limits: tuple[tuple[int, Limit], ...] = ()
    capabilities: dict[str, str] = field(default_factory=dict)
    """What the kernel offers the nemesis (``netem``: "yes" or why not)."""

    def blocked_of(self, host: int) -> tuple[str, ...]:
        return dict(self.blocked).get(host, ())

    def limit_of(self, host: int) -> Limit | None:
        return dict(self.limits).get(host)

    def with_cut(self, host: int, cut: bool) -> LabState:
        hosts = set(self.cut) | {host} if cut else set(self.cut) - {host}
        return replace(self, cut=tuple(sorted(hosts)))

    def with_crashed(self, host: int, crashed: bool) -> LabState:
        hosts = set(self.crashed) | {host} if crashed else set(self.crashed) - {host}
        return replace(self, crashed=tuple(sorted(hosts)))

    def with_blocked(self, routes: dict[int, list[str]], what: str) -> LabState:
        """Add ``routes`` to what is blocked already (a one-way cut on top of a partition)."""
        merged = {h: set(v) for h, v in self.blocked}
        for h, ips in routes.items():
            merged.setdefault(h, set()).update(ips)
        return replace(self, blocked=tuple((h, tuple(sorted(v))) for h, v in sorted(merged.items()) if v),
                       partition="; ".join(p for p in (self.partition, what) if p))

    def healed(self) -> LabState:
        return replace(self, blocked=(), partition="")

    def with_limit(self, host: int, limit: Limit | None) -> LabState:
        lim = {h: v for h, v in self.limits if h != host}
        if limit is not None:
            lim[host] = limit
        return replace(self, limits=tuple(sorted(lim.items())))

    def to_json(self) -> str:
        d: dict[str, Any] = {
            "spec": self.spec.to_dict(), "owner_pid": self.owner_pid, "created": self.created,
            "mountpoint_made": self.mountpoint_made, "cut": list(self.cut), "crashed": list(self.crashed),
            "blocked": {str(h): list(v) for h, v in self.blocked}, "partition": self.partition,
            "limits": {str(h): {"rate_bps": v.rate_bps, "delay_ms": v.delay_ms} for h, v in self.limits},
            "capabilities": self.capabilities,
        }
        return json.dumps(d, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> LabState:
        try:
            d = json.loads(text)
            return cls(
                spec=LabSpec.from_dict(d["spec"]), owner_pid=int(d["owner_pid"]), created=float(d["created"]),
                mountpoint_made=bool(d.get("mountpoint_made")), cut=tuple(int(h) for h in d.get("cut", [])),
                crashed=tuple(int(h) for h in d.get("crashed", [])),
                blocked=tuple((int(h), tuple(v)) for h, v in sorted(d.get("blocked", {}).items())),
                partition=str(d.get("partition", "")),
                limits=tuple((int(h), Limit(v.get("rate_bps"), v.get("delay_ms")))
                             for h, v in sorted(d.get("limits", {}).items())),
                capabilities=dict(d.get("capabilities", {})),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"lab state file {where} is damaged ({type(e).__name__}: {e}); "
                              f"remove the lab's namespaces (ip netns list) and the file by hand") from None
