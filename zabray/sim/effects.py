"""How the simulation carries out one replica's actions (``zabray.protocol.executor``).

A replica's persists wait as its own work (``zabray.sim.local_work``: write, fsync, tell), so a
crash can fall between any two of them. Its messages go through the simulated network, each
ACK checked first against what the in-memory store holds durably (the durability rule: nothing
acknowledged before it is on disk). Its trace records feed the checker, the timeline and the
trace rows. Deliveries and client outcomes go back to the simulation (``Simulation._delivered``,
``Simulation._reply``), which the ZooKeeper simulator extends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zabray.protocol.actions import (
    Close,
    Committed,
    DecodeSnapshot,
    Deliver,
    EncodeSnapshot,
    Failed,
    Notify,
    Open,
    PersistAction,
    Removed,
    Send,
    SessionsTouched,
    Trace,
    Yield,
)
from zabray.protocol.messages import Ack, AckEpoch, AckNewLeader, Message
from zabray.protocol.statemachine import ValueLog
from zabray.protocol.zxid import fmt
from zabray.sim.memstore import MemoryStore
from zabray.sim.replica import SimReplica
from zabray.trace import records as trace

if TYPE_CHECKING:
    from zabray.sim.simulator import Simulation


class SimEffects:
    """One replica's actions, carried out in the simulation (the module's docstring says how)."""

    __slots__ = ("sim", "sid", "r")

    def __init__(self, sim: Simulation, sid: int, r: SimReplica) -> None:
        self.sim, self.sid, self.r = sim, sid, r

    def send(self, a: Send) -> None:
        sim = self.sim
        msg = a.msg
        _check_ack(sim, self.sid, self.r, msg)
        if sim.net.send(a.channel, self.sid, msg):
            sim.stats["messages"] += 1
            sim.stats["sent:" + msg.NAME] += 1

    def notify(self, a: Notify) -> None:
        to = self.sim.replicas.get(a.to)
        if to is not None and to.node is not None:  # a down peer refuses the connection
            self.sim.net.notify(self.sid, a.to, a.note)

    def open(self, a: Open) -> None:
        self.sim.net.open(a.channel)

    def close(self, a: Close) -> None:
        self.sim.net.close(a.channel, self.sid)

    def persist(self, a: PersistAction) -> None:
        self.r.pending.append(a)

    def deliver(self, a: Deliver) -> None:
        self.sim._delivered(self.sid, self.r, a)

    def reply(self, a: Committed | Failed | SessionsTouched) -> None:
        self.sim._reply(self.sid, self.r, a)

    def trace(self, a: Trace) -> None:
        _on_trace(self.sim, self.sid, self.r, a.record)

    def encode_snapshot(self, a: EncodeSnapshot) -> None:
        self.r.encoding = a

    def decode_snapshot(self, a: DecodeSnapshot) -> None:
        self.r.decoding = a

    def resume(self, a: Yield) -> None:
        self.r.resume = True

    def removed(self, a: Removed) -> None:
        """The replica left the ensemble (its ``WriteConfig`` is durable): it serves nothing more
        but goes on telling looking replicas its configuration (``Departed``); a restart finds
        it left and does the same. It joins again only if started to join."""
        r = self.r
        if not r.departed:
            self.sim._log(f"DEPART {self.sid} (configuration {a.version:x} removed it)")
            self.sim.fault_counts["departed"] += 1
        r.departed = True
        r.joining = False


def _check_ack(sim: Simulation, sid: int, r: SimReplica, msg: Message) -> None:
    """The durability rule, checked against the store itself."""
    st = r.store
    if not isinstance(st, MemoryStore):
        return  # the durability rule is checked against the in-memory store's durable part
    match msg:
        case Ack() | AckNewLeader():
            z = msg.zxid
            durable_last = st.log[-1].zxid if st.log else st.snapshot_zxid
            if durable_last < z or not (st.snapshot_zxid >= z or any(x.zxid == z for x in st.log[-64:]) or
                                        any(x.zxid == z for x in st.log)):
                sim.checker.acked_unsafely(sid, f"{msg.NAME} {fmt(z)} with durable log at {fmt(durable_last)}")
            if isinstance(msg, AckNewLeader) and st.current_epoch != msg.epoch:
                sim.checker.acked_unsafely(sid, f"ACK of NEWLEADER {msg.epoch} with currentEpoch "
                                           f"{st.current_epoch}")
        case AckEpoch():
            node = r.node
            if node is not None and st.accepted_epoch != node.accepted_epoch:
                sim.checker.acked_unsafely(sid, f"ACKEPOCH with acceptedEpoch {st.accepted_epoch} on disk")


def _on_trace(sim: Simulation, sid: int, r: SimReplica, rec: object) -> None:
    node = r.node
    assert node is not None
    if isinstance(rec, trace.Proposed):
        sim.checker.proposed_txn(sid, rec.epoch, rec.zxid, rec.digest, r.incarnation)
        sim.stats["proposals"] += 1
    elif isinstance(rec, trace.SnapshotInstalled):
        app = node.app
        sim.checker.snapshot_installed(sid, r.incarnation, rec.zxid, getattr(app, "chain", None))
    elif isinstance(rec, trace.Established):
        hist = {t.zxid: trace.digest(t.value) for t in node.history.txns()}
        base = node.history.base
        chain = None
        if base and node.applied >= base and isinstance(node.app, ValueLog) and node.applied == base:
            chain = node.app.chain
        sim.checker.leader_established(sid, rec.epoch, {int(z): d for z, d in hist.items()}, base, chain)
        sim.stats["elections"] += 1
        sim._log(f"  {sid} ESTABLISHED epoch {rec.epoch} with history through {fmt(rec.zxid)}")
    elif isinstance(rec, trace.StateChange):
        sim._log(f"  {sid} -> {rec.state} epoch {rec.epoch} leader {rec.leader}")
    elif isinstance(rec, trace.ConfigActivated):
        sim.checker.config_activated(sid, r.incarnation, rec.epoch, rec.zxid, rec.members)
        sim._log(f"  {sid} config {rec.zxid:x} in force: {rec.members}")
    if sim.trace_writer is not None:
        sim.trace_writer(trace.row(rec, run=f"sim-{sim.seed}", src=f"replica-{sid}",
                                   replica=sid, inc=r.incarnation, t=sim._now()))
