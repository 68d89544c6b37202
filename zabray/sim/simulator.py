"""A deterministic simulation of a whole ensemble in one process.

Every replica runs the real core over a ``MemoryStore`` that loses unsynced writes on a crash.
One seeded scheduler picks each step: deliver the head of some channel or election link,
write or fsync a replica's pending persists, tell a replica its writes are durable, tick
time, submit a client write, ask for a snapshot, or inject a fault (crash, restart,
partition, heal, channel break). Because persisting, syncing and hearing about it are three
separate steps, a crash can fall between any two of them: between receiving a message and
writing it, between writing and fsyncing, and between fsyncing and acknowledging.

The checker runs after every step. Same seed, same run: the run depends on nothing but the
seed and the options (no wall clock, no hash order, no global random).
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Iterator

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
    Send,
    SessionsTouched,
    Trace,
    Yield,
)
from zabray.protocol.events import (
    ChannelClosed,
    Event,
    Notified,
    Persisted,
    Received,
    Resumed,
    SnapshotDecoded,
    SnapshotEncoded,
    Submit,
    Tick,
)
from zabray.protocol.executor import execute
from zabray.protocol.leader import Leader
from zabray.protocol.messages import Ack, AckEpoch, AckNewLeader, Message, PeerState
from zabray.protocol.node import Node
from zabray.protocol.protocol_config import ProtocolConfig
from zabray.protocol.statemachine import ValueLog
from zabray.protocol.store import apply_one
from zabray.protocol.zxid import fmt
from zabray.sim import random_faults
from zabray.sim.checker import Checker
from zabray.sim.liveness import heal_and_check_liveness
from zabray.sim.memstore import MemoryStore
from zabray.sim.network import CLOSE, Network
from zabray.sim.options import FAULTS as FAULTS
from zabray.sim.options import SimOptions as SimOptions
from zabray.sim.options import SimResult as SimResult
from zabray.sim.replica import LOCAL_WORK, SimReplica
from zabray.trace import records as trace


class Simulation:
    FIRST_CORE_RID = 1
    """Where each incarnation's request ids start (the ZooKeeper simulator keeps those below it
    for its services)."""

    def __init__(self, seed: int, options: SimOptions | None = None, *, timeline: bool = False,
                 trace_writer: Callable[[dict[str, object]], None] | None = None) -> None:
        self.seed = seed
        self.opt = opt = options or SimOptions()
        self.rng = random.Random(seed)
        self.net = Network(self.rng)
        if "drop" in opt.faults:
            self.net.drop_election = 0.05
        voters = frozenset(range(1, opt.voters + 1))
        observers = frozenset(range(opt.voters + 1, opt.voters + opt.observers + 1))
        params = dict(
            init_limit=10, sync_limit=5, ping_interval=1, finalize_wait=1, election_resend=2,
            election_resend_max=8, max_outstanding=self.rng.choice([1, 3, 10, 50]),
            diff_window=self.rng.choice([0, 2, 10, 1000]), diff_chunk=self.rng.choice([1, 3, 100]),
            # SNAPs in parts as well as whole (from the seed: the rng's sequence stays as it was).
            # A data tree's state is kilobytes: its parts are larger, so that a SNAP stays a few
            # messages and can arrive within init_limit, as 16 MiB parts of a real tree do.
            snap_chunk=(16, 200, 1 << 24)[seed % 3] if opt.app_factory is None else (512, 2048, 1 << 24)[seed % 3],
        )
        # One part a tick, so that a SNAP in parts spans ticks, as a large tree's does.
        params["snap_tick_bytes"] = params["snap_chunk"]
        # Learners deliver a backlog a few txns per step in some schedules, as a real one
        # delivers a long DIFF's (also from the seed).
        params["deliver_chunk"] = (2, 20, 1 << 30)[seed // 3 % 3]
        params.update(opt.config)
        self.cfg = ProtocolConfig(voters=voters, observers=observers, **params)
        self.replicas = {sid: SimReplica(sid, opt.store_factory) for sid in sorted(self.cfg.members)}
        self.checker = Checker()
        self.want_timeline = timeline
        self.timeline: list[str] = []
        self.trace_writer = trace_writer
        self._partition: tuple[str, float] | None = None  # (groups, start) of the current partition
        self.step_no = 0
        self.ticks = 0
        self.next_request = 1
        self.pending_requests: dict[tuple[int, int], bytes] = {}
        self.invoked: dict[tuple[int, int], float] = {}
        self.committed_at: dict[tuple[int, int], int] = {}  # (replica, request) -> zxid
        self.crash_points: Counter[str] = Counter()
        self.fault_counts: Counter[str] = Counter()
        self.stats: Counter[str] = Counter()
        self.max_crashed = opt.max_crashed if opt.max_crashed is not None else len(self.replicas)
        for sid in self.replicas:
            self._start(sid)

    # -- bookkeeping ---------------------------------------------------------------------------

    def _log(self, text: str) -> None:
        if self.want_timeline:
            self.timeline.append(f"{self.step_no:6d} t={self.ticks:<4d} {text}")

    def alive(self) -> set[int]:
        return {s for s, r in self.replicas.items() if r.node is not None}

    def _start(self, sid: int, fault: str = "restart") -> None:
        r = self.replicas[sid]
        r.incarnation += 1
        durable = r.store.recover()
        factory = self.opt.node_factory or Node
        app = self.opt.app_factory() if self.opt.app_factory else None
        r.node = factory(sid, self.cfg, durable, incarnation=r.incarnation, app=app)
        r.pending.clear()
        r.encoding = r.decoding = None
        r.resume = False
        r.written = r.synced = r.told = 0
        r.core_rids.clear()
        r.next_core_rid = self.FIRST_CORE_RID
        chain = None
        if durable.snapshot is not None and isinstance(r.node.app, ValueLog):
            chain = r.node.app.chain
        self.checker.start_incarnation(sid, r.incarnation, durable.snapshot_zxid, chain)
        if r.incarnation > 0:
            self._fault_row(fault, str(sid), self._now(), self._now())
        self._log(f"start {sid} (incarnation {r.incarnation}, last zxid {fmt(durable.last_zxid)}, "
                  f"epochs {durable.accepted_epoch}/{durable.current_epoch})")

    def _crash(self, sid: int) -> None:
        r = self.replicas[sid]
        node = r.node
        assert node is not None
        unsynced = [type(a).__name__ for a in r.pending]
        if r.dirty:
            unsynced.insert(0, "written-not-synced")
        if r.told < r.synced:
            unsynced.append("durable-not-acknowledged")
        role = {PeerState.LEADING: "leader", PeerState.FOLLOWING: "follower",
                PeerState.OBSERVING: "observer", PeerState.LOOKING: "looking"}[node.state]
        point = f"{role}/{node.role.phase}/after {r.last_event}/" + (",".join(unsynced) or "clean")
        self.crash_points[point] += 1
        if isinstance(r.store, MemoryStore):
            r.store.crash()
        else:  # the on-disk store: closing drops unsynced writes; reopen from what is on disk
            r.store.close()
            assert r.factory is not None
            r.store = r.factory(sid)
        r.dirty = False
        r.pending.clear()
        r.encoding = r.decoding = None
        r.resume = False
        r.node = None
        self.net.crash(sid)
        self.fault_counts["crash"] += 1
        for key in [k for k in self.pending_requests if k[0] == sid]:
            # The client's replica died: the write's fate is unknown to it.
            self._client_row(sid, key[1], self.pending_requests.pop(key), "unknown", None)
        self._fault_row("kill", str(sid), self._now(), self._now())
        self._log(f"CRASH {sid} at {point}")

    # -- feeding the core ---------------------------------------------------------------------------

    def _step_node(self, sid: int, event: Event, label: str) -> None:
        r = self.replicas[sid]
        node = r.node
        assert node is not None
        r.last_event = label
        execute(node.step(event), SimEffects(self, sid, r))

    # -- what the executor asks of the simulation (``SimEffects``) ---------------------------------

    def _send(self, sid: int, r: SimReplica, a: Send) -> None:
        msg = a.msg
        self._check_ack(sid, r, msg)
        if self.net.send(a.channel, sid, msg):
            self.stats["messages"] += 1
            self.stats["sent:" + msg.NAME] += 1

    def _notify(self, sid: int, a: Notify) -> None:
        to = self.replicas.get(a.to)
        if to is not None and to.node is not None:  # a down peer refuses the connection
            self.net.notify(sid, a.to, a.note)

    def _delivered(self, sid: int, r: SimReplica, a: Deliver) -> None:
        txn = a.txn
        self.checker.delivered(sid, r.incarnation, txn.zxid, trace.digest(txn.value), txn.value)
        self.stats["deliveries"] += 1

    def _reply(self, sid: int, r: SimReplica, a: Committed | Failed | SessionsTouched) -> None:
        """A client's outcome; the broadcast simulation has no session tracker for touches."""
        match a:
            case Committed():
                rid = r.core_rids.pop(a.request_id, None)
                value = self.pending_requests.pop((sid, rid), None) if rid is not None else None
                if value is not None:
                    assert rid is not None
                    self.committed_at[(sid, rid)] = a.zxid
                    self._client_row(sid, rid, value, "ok", a.zxid)
                    # (With an app, what commits is what the app made of the request: no digest.)
                    digest = trace.digest(value) if self.opt.app_factory is None else None
                    self.checker.client_acked(a.zxid, digest)
                    self.stats["acked"] += 1
                    self._log(f"  client@{sid} request {rid} committed as {fmt(a.zxid)}")
            case Failed():
                rid = r.core_rids.pop(a.request_id, None)
                value = self.pending_requests.pop((sid, rid), None) if rid is not None else None
                if value is not None:
                    assert rid is not None
                    self._client_row(sid, rid, value, "unknown" if a.uncertain else "failed", None)
            case SessionsTouched():
                pass

    def _check_ack(self, sid: int, r: SimReplica, msg: Message) -> None:
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
                    self.checker.acked_unsafely(sid, f"{msg.NAME} {fmt(z)} with durable log at {fmt(durable_last)}")
                if isinstance(msg, AckNewLeader) and st.current_epoch != msg.epoch:
                    self.checker.acked_unsafely(sid, f"ACK of NEWLEADER {msg.epoch} with currentEpoch "
                                                     f"{st.current_epoch}")
            case AckEpoch():
                node = r.node
                if node is not None and st.accepted_epoch != node.accepted_epoch:
                    self.checker.acked_unsafely(sid, f"ACKEPOCH with acceptedEpoch {st.accepted_epoch} on disk")

    def _now(self) -> float:
        return self.ticks + self.step_no * 1e-6

    def _client_row(self, sid: int, rid: int, value: bytes, outcome: str, zxid: int | None) -> None:
        invoked = self.invoked.pop((sid, rid), self._now())
        if self.trace_writer is not None:
            # With an app (the data tree), the leader commits what the app makes of a request,
            # not its bytes: such a row carries no digest, and the check asks only for its zxid
            # (as for a ZooKeeper write of a real workload).
            digest = trace.digest(value) if self.opt.app_factory is None else None
            rec = trace.ClientOp(session=sid, op="write", invoke_t=invoked, complete_t=self._now(),
                                 outcome=outcome, zxid=zxid, digest=digest)
            self.trace_writer(trace.row(rec, run=f"sim-{self.seed}", src=f"client-{sid}", replica=-1, inc=0,
                                        t=self._now()))

    def _fault_row(self, fault: str, target: str, start: float, end: float | None) -> None:
        """A fault as the real ensemble's controller traces it (figures draw it where it was)."""
        if self.trace_writer is not None:
            rec = trace.Fault(fault, target, start, end)
            self.trace_writer(trace.row(rec, run=f"sim-{self.seed}", src="sim", replica=-1, inc=0,
                                        t=start if end is None else end))

    def partition(self, groups: list[frozenset[int]]) -> None:
        """Cut the links between ``groups``; it replaces any partition before it, in the trace too."""
        self._partition_over()
        self.net.partition(groups)
        self._partition = (" | ".join(",".join(map(str, sorted(g))) for g in groups), self._now())
        self._fault_row("partition", *self._partition, None)

    def heal(self) -> None:
        """Restore every link; the partition, if any, is traced as ended now."""
        self.net.heal()
        self._partition_over()

    def _partition_over(self) -> None:
        if self._partition is not None:
            self._fault_row("partition", *self._partition, self._now())
            self._partition = None

    def _on_trace(self, sid: int, r: SimReplica, rec: object) -> None:
        node = r.node
        assert node is not None
        if isinstance(rec, trace.Proposed):
            self.checker.proposed_txn(sid, rec.epoch, rec.zxid, rec.digest)
            self.stats["proposals"] += 1
        elif isinstance(rec, trace.SnapshotInstalled):
            app = node.app
            self.checker.snapshot_installed(sid, r.incarnation, rec.zxid, getattr(app, "chain", None))
        elif isinstance(rec, trace.Established):
            hist = {t.zxid: trace.digest(t.value) for t in node.history.txns()}
            base = node.history.base
            chain = None
            if base and node.applied >= base and isinstance(node.app, ValueLog) and node.applied == base:
                chain = node.app.chain
            self.checker.leader_established(sid, rec.epoch, {int(z): d for z, d in hist.items()}, base, chain)
            self.stats["elections"] += 1
            self._log(f"  {sid} ESTABLISHED epoch {rec.epoch} with history through {fmt(rec.zxid)}")
        elif isinstance(rec, trace.StateChange):
            self._log(f"  {sid} -> {rec.state} epoch {rec.epoch} leader {rec.leader}")
        if self.trace_writer is not None:
            self.trace_writer(trace.row(rec, run=f"sim-{self.seed}", src=f"replica-{sid}",
                                        replica=sid, inc=r.incarnation, t=self._now()))

    # -- the step kinds ---------------------------------------------------------------------------

    def _deliver(self, kind: str, key: object, receiver: int) -> None:
        if kind == "chan":
            msg = self.net.pop_channel(key, receiver)  # type: ignore[arg-type]
            if msg is CLOSE:
                self._log(f"{receiver} sees channel {key} closed")
                self._step_node(receiver, ChannelClosed(key), "channel closed")  # type: ignore[arg-type]
            else:
                sender = key.peer_of(receiver)  # type: ignore[attr-defined]
                self._log(f"{sender}->{receiver} {_show(msg)}")
                self._step_node(receiver, Received(key, msg), f"receiving {msg.NAME}")  # type: ignore[arg-type]
        else:
            note = self.net.pop_link(key)  # type: ignore[arg-type]
            self._step_node(receiver, Notified(key[0], note), "receiving NOTIFICATION")  # type: ignore[index]

    def _write(self, sid: int) -> None:
        r = self.replicas[sid]
        a = r.pending.popleft()
        dirty = apply_one(r.store, a, r.dirty)
        r.dirty = dirty
        r.written = a.token
        if not dirty:  # an epoch/snapshot write: durable, and it synced the log first
            r.synced = a.token
        self._log(f"disk {sid}: write {type(a).__name__} (token {a.token})")

    def _fsync(self, sid: int) -> None:
        r = self.replicas[sid]
        r.store.sync()
        r.dirty = False
        r.synced = r.written
        self._log(f"disk {sid}: fsync (durable through token {r.synced})")

    def _tell(self, sid: int) -> None:
        r = self.replicas[sid]
        r.told = r.synced
        self._step_node(sid, Persisted(r.synced), "durable")

    def _encode(self, sid: int, budget: int) -> None:
        """One slice of a snapshot image, as a replica's loop encodes it between other work (the
        tree goes on applying txns meanwhile: the image's copy-on-write must keep it fixed)."""
        r = self.replicas[sid]
        enc = r.encoding
        assert enc is not None
        if enc.image.stale:  # the core restored a SNAP since and has dropped this image
            r.encoding = None
            return
        data = enc.image.encode(budget)
        if data is not None:
            r.encoding = None
            self._step_node(sid, SnapshotEncoded(enc.image, enc.zxid, data), "snapshot encoded")

    def _decode(self, sid: int, budget: int) -> None:
        """One slice of a SNAP being decoded, as a learner's loop decodes it between other work
        (the leader's later messages wait in the core until it is installed)."""
        r = self.replicas[sid]
        dec = r.decoding
        assert dec is not None
        if dec.restore.stale:  # the core finished it itself when its iteration ended
            r.decoding = None
            return
        if dec.restore.decode(budget):
            r.decoding = None
            self._step_node(sid, SnapshotDecoded(dec.restore), "snapshot decoded")

    def _resume(self, sid: int) -> None:
        self.replicas[sid].resume = False
        self._step_node(sid, Resumed(), "resumed")

    def _tick(self) -> None:
        self.ticks += 1
        for sid in sorted(self.alive()):
            self._step_node(sid, Tick(), "tick")

    def _submit(self, sid: int) -> None:
        rid = self.next_request
        self.next_request += 1
        vf = self.opt.value_factory
        value = vf(self.rng, rid) if vf else f"s{self.seed}-r{rid}".encode()
        self.pending_requests[(sid, rid)] = value
        self.invoked[(sid, rid)] = self._now()
        self._log(f"client@{sid} submits request {rid}")
        r = self.replicas[sid]
        core_rid = r.next_core_rid
        r.next_core_rid += 1
        r.core_rids[core_rid] = rid
        self._step_node(sid, Submit(core_rid, value), "client request")

    def _fault(self) -> None:
        random_faults.inject(self)

    # -- running ---------------------------------------------------------------------------------

    def step(self) -> None:
        """One randomly chosen step."""
        self.step_no += 1
        self.checker.step = self.step_no
        rng = self.rng
        opt = self.opt
        x = rng.random()
        if x < opt.fault_rate:
            self._fault()
            return
        x -= opt.fault_rate
        if x < opt.tick_rate:
            self._tick()
            return
        x -= opt.tick_rate
        alive = self.alive()
        if x < opt.client_rate:
            if alive:
                self._submit(rng.choice(sorted(alive)))
            return
        choices = self.net.deliverable(alive) + self._local_choices(alive)
        if not choices:
            self._tick()
            return
        kind, key, sid = choices[rng.randrange(len(choices))]
        if kind in ("chan", "link"):
            self._deliver(kind, key, sid)
        else:
            self._work(kind, sid)

    def _local_choices(self, alive: set[int]) -> list[tuple[str, object, int]]:
        return [(kind, None, sid) for sid in sorted(alive) for kind in LOCAL_WORK if self.replicas[sid].ready(kind)]

    def _work(self, kind: str, sid: int, rows: int | None = None) -> None:
        """Do ``sid``'s work of ``kind``; ``rows``: a snapshot slice's size, else drawn (1-8)."""
        match kind:
            case "write":
                self._write(sid)
            case "fsync":
                self._fsync(sid)
            case "tell":
                self._tell(sid)
            case "encode":
                self._encode(sid, rows or self.rng.randint(1, 8))
            case "decode":
                self._decode(sid, rows or self.rng.randint(1, 8))
            case "resume":
                self._resume(sid)
            case _:
                raise ValueError(f"no such work: {kind!r}")

    def run(self) -> SimResult:
        for _ in range(self.opt.steps):
            self.step()
            if self.checker.violations and self.opt.stop_on_violation:
                return self._result()
        return self.finish()

    def _micro_steps(self) -> Iterator[None]:
        """Fair progress, one action at a time: passes in which every ready queue delivers one
        message and every replica finishes its disk work; a tick after every third pass.
        Round-robin, so no chatty pair starves the rest."""
        while True:
            for _ in range(3):
                self.step_no += 1
                self.checker.step = self.step_no
                for kind, key, sid in self.net.deliverable(self.alive()):
                    if self.replicas[sid].node is not None and self.net.ready(kind, key, sid):
                        self._deliver(kind, key, sid)
                        yield
                for sid in sorted(self.alive()):
                    r = self.replicas[sid]
                    while r.pending and r.node is not None:
                        self._write(sid)
                        yield
                    for kind in LOCAL_WORK[1:]:  # after "write", drained above: one of each
                        if r.node is not None and r.ready(kind):
                            self._work(kind, sid, 64)
                            yield
                yield from self._more_micro_steps()
            self._tick()
            yield

    def _more_micro_steps(self) -> Iterator[None]:
        """What a subclass adds to each fair pass (the ZooKeeper simulator: its client links)."""
        yield from ()

    def _calm_round(self) -> None:
        start = self.ticks
        for _ in self._micro_steps():
            if self.ticks > start:
                return

    # -- scripted control, for scenario tests and teaching --------------------------------------

    def settle(self, until: Callable[[], bool], max_ticks: int = 200) -> bool:
        """Run fairly, checking ``until`` after every single action; False if it never held."""
        deadline = self.ticks + max_ticks
        if until():
            return True
        for _ in self._micro_steps():
            if until():
                return True
            if self.ticks >= deadline or self.checker.violations:
                return False
        return False  # pragma: no cover

    def submit(self, sid: int) -> int:
        rid = self.next_request
        self._submit(sid)
        return rid

    def crash(self, sid: int, *, in_flight_arrives: bool | None = None) -> None:
        """Crash ``sid``. ``in_flight_arrives``: True/False to deliver all/none of what it
        already sent; None for a random prefix (the default fault)."""
        if in_flight_arrives is not None:
            for ch, c in self.net.channels.items():
                if sid in (ch.learner, ch.leader):
                    q = c.to[ch.peer_of(sid)]
                    if not in_flight_arrives:
                        q.clear()
            old = self.net.rng
            self.net.rng = _AllOrNothing(in_flight_arrives)  # type: ignore[assignment]
            try:
                self._crash(sid)
            finally:
                self.net.rng = old
        else:
            self._crash(sid)

    def finish(self) -> SimResult:
        """Heal, restart everyone, require a leader and a new commit everywhere; the result."""
        if not self.checker.violations or not self.opt.stop_on_violation:
            self._check_liveness()
        return self._result()

    def restart(self, sid: int) -> None:
        self._start(sid)

    def node(self, sid: int) -> Node:
        n = self.replicas[sid].node
        assert n is not None, f"replica {sid} is down"
        return n

    def leader(self) -> int | None:
        """The established leader of the highest epoch, if any."""
        return self._established_leader()

    def delivered(self, sid: int) -> list[int]:
        """Zxids ``sid`` delivered in its current incarnation (after its snapshot, if any)."""
        n = self.node(sid)
        return [t.zxid for t in n.history.after(n.history.base, n.applied)]

    def _check_liveness(self) -> None:
        """Heal everything and restart everyone: a leader must emerge and commit a new write."""
        heal_and_check_liveness(self)

    def _established_leader(self) -> int | None:
        best: tuple[int, int] | None = None
        for sid, r in self.replicas.items():
            node = r.node
            if node is not None and isinstance(node.role, Leader) and node.role.established:
                if best is None or node.current_epoch > best[0]:
                    best = (node.current_epoch, sid)
        return best[1] if best else None

    def _result(self) -> SimResult:
        return SimResult(
            seed=self.seed,
            steps=self.step_no,
            ticks=self.ticks,
            violations=list(self.checker.violations),
            crash_points=self.crash_points,
            faults=self.fault_counts,
            proposals=self.stats["proposals"],
            deliveries=self.stats["deliveries"],
            committed=len(self.checker.G),
            acked=self.stats["acked"],
            elections=self.stats["elections"],
            timeline=self.timeline,
        )


class _AllOrNothing:
    """Stands in for the network's rng when a scripted crash fixes how much in-flight data arrives."""

    def __init__(self, everything: bool) -> None:
        self.everything = everything

    def randint(self, a: int, b: int) -> int:
        return b if self.everything else a


def _show(msg: Message) -> str:
    fields = []
    for f in dataclasses.fields(msg):  # type: ignore[arg-type]
        name = f.name
        v = getattr(msg, name)
        if name == "txn":
            v = f"{fmt(v.zxid)}"
        elif name == "txns":
            v = f"[{fmt(v[0].zxid)}..{fmt(v[-1].zxid)}]" if v else "[]"
        elif name == "state" and isinstance(v, bytes):
            v = f"<{len(v)} bytes>"
        elif "zxid" in name:
            v = fmt(v)
        elif name == "value":
            v = f"<{len(v)} bytes>"
        elif name == "requests":
            v = f"<{len(v)} requests>"
        fields.append(f"{name}={v}")
    return f"{msg.NAME}({', '.join(fields)})"


class SimEffects:
    """How the simulation carries out one replica's actions (``zabray.protocol.executor``): its
    persists wait as the replica's own work (write, fsync, tell), so a crash can fall between
    any two of them; messages go through the simulated network, checked for early ACKs."""

    __slots__ = ("sim", "sid", "r")

    def __init__(self, sim: Simulation, sid: int, r: SimReplica) -> None:
        self.sim, self.sid, self.r = sim, sid, r

    def send(self, a: Send) -> None:
        self.sim._send(self.sid, self.r, a)

    def notify(self, a: Notify) -> None:
        self.sim._notify(self.sid, a)

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
        self.sim._on_trace(self.sid, self.r, a.record)

    def encode_snapshot(self, a: EncodeSnapshot) -> None:
        self.r.encoding = a

    def decode_snapshot(self, a: DecodeSnapshot) -> None:
        self.r.decoding = a

    def resume(self, a: Yield) -> None:
        self.r.resume = True


def run_seed(seed: int, options: SimOptions | None = None, *, timeline: bool = False) -> SimResult:
    return Simulation(seed, options, timeline=timeline).run()
