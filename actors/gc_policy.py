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
generation, which no later collection scans. Frozen objects are still freed by reference
counting (a deleted znode, the whole old tree after the next SNAP); only a reference cycle
frozen while alive and dropped later is never reclaimed, and at those two moments that is a few
connection objects at most.
"""

from __future__ import annotations

import gc
import logging
import time

log = logging.getLogger(__name__)

YOUNG = 20_000
"""Tracked allocations between young collections (CPython's default is 700)."""


def configure() -> None:
    """Called once a replica starts in this process; the older generations keep their ratios."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG, older, oldest)


def settle() -> None:
    """After a bulk load: collect what is garbage now, then freeze what is left (see above)."""
    t0 = time.monotonic()
    gc.collect()
    gc.freeze()
    log.debug("gc settled in %.3f s: %d objects frozen", time.monotonic() - t0, gc.get_freeze_count())
