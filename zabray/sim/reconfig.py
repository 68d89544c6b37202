"""The simulator's reconfiguration steps (the ``reconfig`` fault kind).

One step, drawn from the seed's generator, does one of: start a spare replica joining the
ensemble (a non-voting learner, or an observer), or submit a reconfiguration request at a live
replica, as a client would: add a joining replica as a participant or an observer, remove a
member, turn a member from voter to observer or back, or replace the membership in bulk, with
the current version as ``from_config`` or none (and now and then a stale one). The ensemble
judges each request itself: refusals (a reconfiguration in progress, no synced quorum of the new
configuration, a stale version, no voter left) are expected, and counted.

Every address is made up (``address``): the simulated network routes by sid.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

from zabray.protocol.events import SubmitReconfig
from zabray.protocol.membership import OBSERVER, PARTICIPANT, ConfigChange, Membership
from zabray.protocol.role import Phase
from zabray.sim.memstore import MemoryStore

if TYPE_CHECKING:
    from zabray.sim.simulator import Simulation


def address(sid: int) -> str:
    """A simulated replica's made-up addresses, as ZooKeeper writes a server's."""
    return f"sim{sid}:{2000 + sid}:{3000 + sid};sim{sid}:{4000 + sid}"


def spec(sid: int, role: str) -> str:
    server, _, client = address(sid).partition(";")
    return f"server.{sid}={server}:{role};{client}"


def inject(sim: Simulation) -> None:
    rng = sim.rng
    config: Membership = sim.checker.config
    waiting = [s for s, r in sim.replicas.items() if r.incarnation < 0 or r.departed]
    if waiting and rng.random() < 0.3:
        join(sim, rng.choice(waiting))
        return
    alive = sorted(sim.alive())
    if not alive:
        return
    joiners = [s for s in alive if s not in config.sids and not sim.replicas[s].departed]
    x = rng.random()
    if x < 0.35 and joiners:
        sid = rng.choice(joiners)
        role = OBSERVER if rng.random() < 0.3 else PARTICIPANT
        change = ConfigChange(joining=spec(sid, role))
        what = f"add {sid} as {role}"
    elif x < 0.6 and len(config.sids) > 1:
        sid = rng.choice(sorted(config.sids))
        change = ConfigChange(leaving=str(sid))
        what = f"remove {sid}"
    elif x < 0.8:
        sid = rng.choice(sorted(config.sids))
        role = PARTICIPANT if sid in config.observers else OBSERVER
        change = ConfigChange(joining=spec(sid, role))
        what = f"make {sid} {'a voter' if role == PARTICIPANT else 'an observer'}"
    else:
        members = set(config.sids)
        if joiners:
            members.add(rng.choice(joiners))
        if len(members) > 2:
            members.discard(rng.choice(sorted(members)))
        lines = [spec(s, OBSERVER if s in config.observers else PARTICIPANT) for s in sorted(members)]
        change = ConfigChange(members=",".join(lines))
        what = f"members {sorted(members)}"
    y = rng.random()
    version = -1 if y < 0.6 else config.version if y < 0.9 else max(0, config.version - 1)
    change = ConfigChange(change.joining, change.leaving, change.members, version)
    # Mostly at a replica that is serving (elsewhere the request is refused at once: no leader).
    serving = [s for s in alive if sim.node(s).role.phase == Phase.BROADCAST]
    submit(sim, rng.choice(serving if serving and rng.random() < 0.9 else alive), change, what)


def join(sim: Simulation, sid: int) -> None:
    """Start ``sid`` joining the ensemble: outside its configuration, it learns the leader from
    the members and is synced as a follower that does not vote, until a reconfiguration makes
    it a voter or an observer."""
    r = sim.replicas[sid]
    if r.node is not None:
        sim._crash(sid)  # (one that left, still telling others its configuration)
    r.joining = True
    r.departed = False
    sim.fault_counts["join"] += 1
    sim._log(f"JOIN {sid}")
    sim._start(sid, "join")


def submit(sim: Simulation, at: int, change: ConfigChange, what: str) -> int:
    """Submit ``change`` at replica ``at`` as a client's request; its simulation request id."""
    rid = sim.next_request
    sim.next_request += 1
    value = change.encode()
    sim.pending_requests[(at, rid)] = value
    sim.invoked[(at, rid)] = sim._now()
    sim.reconfig_requests.add(rid)
    sim.fault_counts["reconfig"] += 1
    sim._log(f"client@{at} asks to reconfigure ({what}, from version {change.from_version:x}) as request {rid}")
    r = sim.replicas[at]
    core_rid = r.next_core_rid
    r.next_core_rid += 1
    r.core_rids[core_rid] = rid
    sim._step_node(at, SubmitReconfig(core_rid, value), "reconfig request")
    return rid


def holders(sim: Simulation, z: int) -> set[int]:
    """Replicas whose store holds ``z`` durably (in the synced log, or under a snapshot), or held
    it before a wipe threw that store away (an acknowledgement sent before the wipe counted,
    rightly): what the checker's quorum rule counts when ``z`` is first delivered."""
    out = set()
    for sid, r in sim.replicas.items():
        if not isinstance(r.store, MemoryStore):
            return set(sim.replicas)  # the on-disk store: not judged here
        for st in (r.store, *r.lost):
            if st.snapshot_zxid >= z:
                out.add(sid)
                break
            log = st.log
            i = bisect_left(log, z, key=lambda t: t.zxid)
            if i < len(log) and log[i].zxid == z:
                out.add(sid)
                break
    return out
