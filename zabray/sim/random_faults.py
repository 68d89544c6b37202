"""The simulator's random faults: one step's crash or restart, partition or heal, broken
channel, snapshot request, or wipe (a fresh restart: the replica's store emptied), drawn from the seed's generator (``Simulation._fault``).
Each real fault is also traced as the real ensemble's controller traces it, so a simulated
run's figures show it where it happened."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zabray.protocol.events import SnapshotRequested
from zabray.sim.memstore import MemoryStore

if TYPE_CHECKING:
    from zabray.sim.simulator import Simulation


def inject(sim: Simulation) -> None:
    opt = sim.opt
    rng = sim.rng
    alive = sorted(sim.alive())
    dead = sorted(set(sim.replicas) - set(alive))
    kinds = [f for f in opt.faults if f != "drop"]
    if not kinds:
        return
    kind = rng.choice(kinds)
    if kind == "crash":
        if dead and (len(dead) >= sim.max_crashed or rng.random() < 0.5):
            sid = rng.choice(dead)
            sim.fault_counts["restart"] += 1
            sim._start(sid)
        elif alive:
            sim._crash(rng.choice(alive))
    elif kind == "partition":
        if len(sim.replicas) < 2:
            return  # nothing to cut apart
        if sim.net.groups is not None and rng.random() < 0.5:
            sim.heal()
            sim.fault_counts["heal"] += 1
            sim._log("HEAL")
        else:
            sids = sorted(sim.replicas)
            rng.shuffle(sids)
            cut = rng.randint(1, len(sids) - 1)
            groups = [frozenset(sids[:cut]), frozenset(sids[cut:])]
            sim.partition(groups)
            sim.fault_counts["partition"] += 1
            sim._log(f"PARTITION {sorted(groups[0])} | {sorted(groups[1])}")
    elif kind == "break":
        chans = list(sim.net.channels)
        if chans:
            ch = rng.choice(chans)
            sim.net.break_channel(ch)
            sim._fault_row("cut", f"{ch.learner} x {ch.leader}", sim._now(), sim._now())
            sim.fault_counts["break"] += 1
            sim._log(f"BREAK channel {ch}")
    elif kind == "wipe":
        # As a careful operator would: only while the other voters that hold their data form a
        # quorum. Below that, a wiped voter waits for them for ever (rightly: they may hold
        # acknowledged writes nobody else has), and the run could not end with a leader.
        sid = rng.choice(sorted(sim.replicas))
        whole = {s for s, r in sim.replicas.items() if s != sid and s in sim.cfg.voters
                 and isinstance(r.store, MemoryStore) and not r.store.recover().rejoining}
        if isinstance(sim.replicas[sid].store, MemoryStore) and sim.cfg.is_quorum(whole):
            wipe(sim, sid)
    elif kind == "snapshot":
        if alive:
            sid = rng.choice(alive)
            sim.fault_counts["snapshot"] += 1
            sim._log(f"snapshot requested at {sid}")
            sim._step_node(sid, SnapshotRequested(), "snapshot request")


def wipe(sim: Simulation, sid: int) -> None:
    """Crash ``sid`` if it runs, throw its store away and start it on an empty one, as
    ``restart(fresh=True)`` does on a real ensemble: a wiped voter of several starts
    ``rejoining``."""
    if sim.replicas[sid].node is not None:
        sim._crash(sid)
    store = MemoryStore()
    store.rejoining = sid in sim.cfg.voters and len(sim.cfg.voters) > 1
    sim.replicas[sid].store = store
    sim.fault_counts["wipe"] += 1
    sim._log(f"WIPE {sid}")
    sim._start(sid, "restart-fresh")
