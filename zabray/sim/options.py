"""What a simulation run is asked to do (``SimOptions``) and what it found (``SimResult``).

``FAULTS`` names the kinds of fault a run may inject; ``zabray sim --faults`` takes them.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: `zabray` commands other than `sim` need not import the core
    from zabray.protocol.node import Node
    from zabray.sim.checker import Violation

FAULTS = ("crash", "partition", "break", "snapshot", "drop", "wipe", "reconfig")
"""``reconfig`` turns reconfiguration on: spare replicas join, and random steps add, remove and
change the role of members (``zabray.sim.reconfig``). Off by default, so that every seed run
without it keeps its schedule."""


@dataclass
class SimOptions:
    voters: int = 3
    observers: int = 0
    steps: int = 3000
    faults: tuple[str, ...] = ("crash", "partition", "break", "snapshot")
    fault_rate: float = 0.01
    client_rate: float = 0.08
    tick_rate: float = 0.04
    max_crashed: int | None = None  # default: any number, even all
    liveness_ticks: int = 200
    stop_on_violation: bool = True
    """False lets a run go on past a violation (to see what a broken core does downstream)."""
    config: dict[str, int] = field(default_factory=dict)
    node_factory: Callable[..., Node] | None = None  # tests plant broken cores here
    value_factory: Callable[[random.Random, int], bytes] | None = None
    """Makes the nth client request (default: a unique opaque value)."""
    app_factory: Callable[[], Any] | None = None
    """Makes each replica's state machine (default ``ValueLog``), e.g. ``zabray.tree.DataTree``."""
    spares: int = 2
    """With the ``reconfig`` fault: replicas beyond the static configuration that may join."""
    store_factory: Callable[[int], Any] | None = None
    """Makes a replica's store (default ``MemoryStore``). A store other than ``MemoryStore``
    (the on-disk one) must drop unsynced writes on ``close()``; the simulator then crashes a
    replica by closing its store and recovers it by opening a new one."""


@dataclass
class SimResult:
    seed: int
    steps: int
    ticks: int
    violations: list[Violation]
    crash_points: Counter[str]
    faults: Counter[str]
    proposals: int
    deliveries: int
    committed: int
    acked: int
    elections: int
    timeline: list[str]
    service: dict[str, int] = field(default_factory=dict)
    """What the hosted service did (``zabray.sim.zksim``: calls, watches, moves, expiries)."""

    @property
    def ok(self) -> bool:
        return not self.violations
