"""A replica's own work in the simulation, each piece one step of its own (``Simulation._work``).

Persisting, syncing and hearing about it are three separate steps: ``write`` applies the
replica's next pending persist to its store (unsynced, lost on a crash), ``fsync`` makes
everything written durable, ``tell`` tells the core what is durable. So a crash can fall between
receiving a message and writing it, between writing and fsyncing, and between fsyncing and
acknowledging. ``encode`` and ``decode`` take one slice of a snapshot image or of a SNAP being
installed, as a replica's loop does between other work; ``resume`` continues a core step that
yielded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zabray.protocol.events import Persisted, Resumed, SnapshotDecoded, SnapshotEncoded
from zabray.protocol.store import apply_one

if TYPE_CHECKING:
    from zabray.sim.simulator import Simulation


def write(sim: Simulation, sid: int) -> None:
    r = sim.replicas[sid]
    a = r.pending.popleft()
    dirty = apply_one(r.store, a, r.dirty)
    r.dirty = dirty
    r.written = a.token
    if not dirty:  # an epoch/snapshot write: durable, and it synced the log first
        r.synced = a.token
    sim._log(f"disk {sid}: write {type(a).__name__} (token {a.token})")


def fsync(sim: Simulation, sid: int) -> None:
    r = sim.replicas[sid]
    r.store.sync()
    r.dirty = False
    r.synced = r.written
    sim._log(f"disk {sid}: fsync (durable through token {r.synced})")


def tell(sim: Simulation, sid: int) -> None:
    r = sim.replicas[sid]
    r.told = r.synced
    sim._step_node(sid, Persisted(r.synced), "durable")


def encode(sim: Simulation, sid: int, budget: int) -> None:
    """One slice of a snapshot image, as a replica's loop encodes it between other work (the
    tree goes on applying txns meanwhile: the image's copy-on-write must keep it fixed)."""
    r = sim.replicas[sid]
    enc = r.encoding
    assert enc is not None
    if enc.image.stale:  # the core restored a SNAP since and has dropped this image
        r.encoding = None
        return
    data = enc.image.encode(budget)
    if data is not None:
        r.encoding = None
        sim._step_node(sid, SnapshotEncoded(enc.image, enc.zxid, data), "snapshot encoded")


def decode(sim: Simulation, sid: int, budget: int) -> None:
    """One slice of a SNAP being decoded, as a learner's loop decodes it between other work
    (the leader's later messages wait in the core until it is installed)."""
    r = sim.replicas[sid]
    dec = r.decoding
    assert dec is not None
    if dec.restore.stale:  # the core finished it itself when its iteration ended
        r.decoding = None
        return
    if dec.restore.decode(budget):
        r.decoding = None
        sim._step_node(sid, SnapshotDecoded(dec.restore), "snapshot decoded")


def resume(sim: Simulation, sid: int) -> None:
    sim.replicas[sid].resume = False
    sim._step_node(sid, Resumed(), "resumed")
