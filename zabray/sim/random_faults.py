"""The simulator's random faults: one step's crash or restart, partition or heal, broken
channel, snapshot request, or wipe (a fresh restart: the replica's store emptied), drawn from the seed's generator (``Simulation._fault``).
Each real fault is also traced as the real ensemble's controller traces it, so a simulated
run's figures show it where it happened."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zabray.protocol.events import SnapshotRequested
from zabray.protocol.membership import Membership
from zabray.sim import reconfig
from zabray.sim.memstore import MemoryStore

if TYPE_CHECKING:
    from zabray.sim.simulator import Simulation


def inject(sim: Simulation) -> None:
    opt = sim.opt
    rng = sim.rng
    alive = sorted(sim.alive())
    dead = sim.restartable()
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
        config = sim.checker.config
        sid = rng.choice(sorted(sim.replicas))
        whole = {s for s, r in sim.replicas.items() if s != sid and not r.departed
                 and isinstance(r.store, MemoryStore) and not r.store.recover().rejoining}
        # A quorum of the committed configuration, and of any reconfiguration a replica holds
        # that may yet commit (a leader will need both); an observer votes in neither.
        voting = whole - config.observers
        if (isinstance(sim.replicas[sid].store, MemoryStore) and all(c.is_quorum(voting) for c in configs_at_stake(sim))
                and sid in config.sids and not sim.replicas[sid].departed):
            wipe(sim, sid)
    elif kind == "reconfig":
        reconfig.inject(sim)
    elif kind == "snapshot":
        if alive:
            sid = rng.choice(alive)
            sim.fault_counts["snapshot"] += 1
            sim._log(f"snapshot requested at {sid}")
            sim._step_node(sid, SnapshotRequested(), "snapshot request")


def configs_at_stake(sim: Simulation) -> list[Membership]:
    """The committed configuration, and every newer one in some replica's log or history."""
    top = sim.checker.config
    out = [top]
    seen = {top.version}
    for r in sim.replicas.values():
        txns = r.node.history.configs if r.node is not None else []
        logs = r.store.log if isinstance(r.store, MemoryStore) else []
        for t in [*txns, *(t for t in logs if t.config is not None)]:
            if t.config is not None and t.zxid > top.version and t.zxid not in seen:
                seen.add(t.zxid)
                out.append(t.config)
    return out


def wipe(sim: Simulation, sid: int) -> None:
    """Crash ``sid`` if it runs, throw its store away and start it on an empty one, as
    ``restart(fresh=True)`` does on a real ensemble: a wiped voter of several starts
    ``rejoining``."""
    if sim.replicas[sid].node is not None:
        sim._crash(sid)
    old = sim.replicas[sid].store
    if isinstance(old, MemoryStore):
        sim.replicas[sid].lost.append(old)  # what it acknowledged before: it did hold it
    store = MemoryStore()
    voters = sim.checker.config.voters
    store.rejoining = sid in voters and len(voters) > 1
    sim.replicas[sid].store = store
    if sim.reconfiguring:  # its static configuration may not list it: it joins again
        sim.replicas[sid].joining = True
    sim.fault_counts["wipe"] += 1
    sim._log(f"WIPE {sid}")
    sim._start(sid, "restart-fresh")
