"""The replica process's garbage collector: rare young collections, and a loaded tree kept out of
full ones.

Almost everything a replica allocates per message (frames, events, actions, records) is freed by
reference counting the moment it is done with; CPython's cyclic collector still runs a young
collection every 700 tracked allocations, and a full one, which scans every tracked object,
whenever the long-lived heap has grown by a quarter. Measured with ``benchmarks/cpu.py`` (three
replicas on one thread, 1,000 in flight, four runs of 20,000 writes): 2,657 collections took
1.6 s of the run for setData, and 3,839 took 3.7-4.8 s for sequential creates, whose growing
tree every full collection walks again. With the young threshold at ``YOUNG``: 29 collections
(0.26 s) and 70 (0.9-1.0 s), none of them full. Creates then cost 186 and 191 us of CPU against
246 and 224 in alternating runs; setData's gain is within that machine's noise. A full
collection of a tree of 300,000 znodes takes ~150 ms here: on a large tree it is also a stall
that peers see.

``settle`` runs after a bulk load (recovery at start, a SNAP installed): one full collection,
then ``gc.freeze`` moves every live object, the loaded tree above all, to the permanent
generation, which no later collection scans. A tree grown by writes since is frozen the same
way once a full collection of it takes longer than ``FREEZE_AFTER_S``: the collector's hook
marks the freeze due and the replica's next tick makes it (``tick``), so the next full
collection again scans only what is new. Frozen objects are still freed by reference counting
(a deleted znode, the whole old tree after the next SNAP; znodes hold no reference cycles); only
a reference cycle frozen while alive and dropped later is never reclaimed, and at those moments
that is a few connection objects at most.

The middle generation is collected every ``OLDER`` young collections rather than CPython's 10:
each such collection scans what survived the young ones since the last, up to ten times
``YOUNG`` objects at CPython's ratio, which held a replica growing its tree by creates for
0.15-0.38 s (``actors.stall_watch`` logged them) with nothing to collect. An object is scanned
there once either way before it moves on, so the work is the same in pauses a fifth as long.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)

YOUNG = 20_000
"""Tracked allocations between young collections (CPython's default is 700)."""


OLDER = 2
"""Young collections between collections of the middle generation (CPython's default is 10)."""

FREEZE_AFTER_S = 0.05
"""A full collection slower than this is followed by a freeze of everything alive."""

_full_started = 0.0
_freeze_due = False


def configure() -> None:
    """Called once a replica starts in this process; the oldest generation keeps its ratio."""
    oldest = gc.get_threshold()[2]
    gc.set_threshold(YOUNG, OLDER, oldest)
    if _on_collection not in gc.callbacks:
        gc.callbacks.append(_on_collection)


def _on_collection(phase: str, info: dict[str, int]) -> None:
    global _full_started, _freeze_due
    if info.get("generation") != 2:
        return
    if phase == "start":
        _full_started = time.perf_counter()
    elif time.perf_counter() - _full_started > FREEZE_AFTER_S:
        _freeze_due = True  # not here: the collector is still running its callbacks


def tick() -> None:
    """On the replica's loop, every tick: freeze what a slow full collection had to scan."""
    global _freeze_due
    if _freeze_due:
        _freeze_due = False
        gc.freeze()
        log.info("a full garbage collection took over %.0f ms: %d objects frozen out of later ones",
                 FREEZE_AFTER_S * 1000, gc.get_freeze_count())


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No collection while a bulk load builds a large structure that will all stay alive (a
    tree restored from a snapshot): every collection meanwhile would scan it for nothing. A 300,000
    znode tree decoded in 6.4 s with the collector running, 4.5 s without."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def settle() -> None:
    """After a bulk load: collect what is garbage now, then freeze what is left (see above)."""
    t0 = time.monotonic()
    gc.collect()
    gc.freeze()
    log.debug("gc settled in %.3f s: %d objects frozen", time.monotonic() - t0, gc.get_freeze_count())
