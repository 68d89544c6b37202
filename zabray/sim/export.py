"""One simulated schedule as a scenario the real ensemble can run (``zabray sim --export-scenario``).

``RecordingSimulation`` runs exactly the schedule ``Simulation`` runs for the same seed and
options (it draws nothing from the seeded rng itself) and records its coarse events: crashes,
restarts, partitions, heals, channel breaks, snapshot requests and client writes, each with the
simulation's step, plus every replica's state at the end of each phase (just before the next
fault). ``export`` turns that record into scenario steps (``zabray.replay.scenario``):

- a crash is ``kill: S`` then ``wait: {down: S}``; a restart (always from disk: the simulator
  has no fresh restart) ``restart: S`` then ``wait: {alive: S}``; a partition ``partition:`` the
  same groups (the live one replaces the previous, as in the simulator); a heal ``heal``;
- a write is ``write: {value: s<seed>-r<request>, replica: S}``, the simulator's own value aimed
  at the same replica; in the foreground when the simulation acknowledged it before the next
  fault, else ``background: true, may_fail: true`` (the live run may not acknowledge it either);
- at each phase's end: ``wait: {leader: true}`` if the simulation had an established leader
  there, and ``wait: {state: {sid, is: [FOLLOWING, LEADING]}}`` for a replica the phase's fault
  restarted or healed if the simulation had it following or leading (and a majority of voters
  alive on its side of any partition); every wait has a timeout;
- the simulator's final liveness phase (heal, restart every dead replica, one new write) as steps.

What has no counterpart on a real ensemble is listed in the file's ``notes`` (and its top
comment): the order of message deliveries, disk writes and fsyncs, where exactly each crash fell,
channel breaks, snapshot requests, lost election messages, the simulated time (ticks) and
timeouts. Invariant: the number of ``kill`` steps equals the simulated crashes, of ``restart``
steps the simulated restarts (final ones included), of ``partition`` and ``heal`` steps the
simulated ones, and the write steps are the simulated writes in submission order.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from zabray.errors import ConfigError
from zabray.protocol.messages import PeerState
from zabray.sim.simulator import SimOptions, SimResult, Simulation

log = logging.getLogger(__name__)

DOWN_TIMEOUT = 10
"""Seconds a ``wait: {down: S}`` allows after a kill."""
PHASE_TIMEOUT = 30
"""Seconds the other waits allow (a restart, an election, a sync)."""


@dataclass(frozen=True, slots=True)
class SimEvent:
    """One recorded event: ``kind`` is kill, restart, partition, heal, break, snapshot, write or final."""

    kind: str
    step: int
    sid: int | None = None
    groups: tuple[tuple[int, ...], ...] = ()
    request: int = 0
    detail: str = ""
    phase: int = 0
    """For a write: how many faults came before it."""


@dataclass(frozen=True, slots=True)
class PhaseEnd:
    """The simulation's state just before a fault (or at the run's end)."""

    step: int
    states: tuple[tuple[int, str], ...]
    """(sid, LOOKING|FOLLOWING|LEADING|OBSERVING|DOWN) per replica."""
    leader: int | None
    groups: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """A write's outcome in the simulation and the fault count when it came."""

    outcome: str
    faults_before: int


class RecordingSimulation(Simulation):
    """A ``Simulation`` that records its faults and writes; same seed, same run as the plain one."""

    def __init__(self, seed: int, options: SimOptions | None = None, *, timeline: bool = False) -> None:
        self.events: list[SimEvent] = []
        self.phase_ends: list[PhaseEnd] = []
        self.outcomes: dict[int, Outcome] = {}
        self.recording = False
        self._pending_restart = False  # inside _fault: a restart is recorded there
        self._restarted = 0
        super().__init__(seed, options, timeline=timeline)
        self.recording = True

    def _faults_seen(self) -> int:
        return len(self.phase_ends)

    def _phase_end(self) -> None:
        states = tuple((sid, "DOWN" if r.node is None else PeerState(r.node.state).name)
                       for sid, r in sorted(self.replicas.items()))
        groups = tuple(tuple(sorted(g)) for g in self.net.groups) if self.net.groups is not None else ()
        self.phase_ends.append(PhaseEnd(self.step_no, states, self._established_leader(), groups))

    def _fault(self) -> None:
        before = Counter(self.fault_counts)
        points = Counter(self.crash_points)
        groups = self.net.groups
        alive = self.alive()
        self._phase_end()
        self._pending_restart = True
        super()._fault()
        self._pending_restart = False
        done = self.fault_counts - before
        if not done:
            self.phase_ends.pop()  # nothing happened (e.g. a partition of one replica)
            return
        kind = next(iter(done))
        if kind == "crash":
            sid = next(iter(alive - self.alive()))
            point = next(iter(self.crash_points - points), "")
            self.events.append(SimEvent("kill", self.step_no, sid, detail=point))
        elif kind == "restart":
            self.events.append(SimEvent("restart", self.step_no, self._restarted))
        elif kind == "partition":
            assert self.net.groups is not None
            self.events.append(SimEvent("partition", self.step_no,
                                        groups=tuple(tuple(sorted(g)) for g in self.net.groups)))
        elif kind == "heal":
            self.events.append(SimEvent("heal", self.step_no, groups=tuple(tuple(sorted(g)) for g in groups or ())))
        else:  # break, snapshot: not carried over, counted in the notes
            self.events.append(SimEvent(kind, self.step_no))

    def _start(self, sid: int, fault: str = "restart") -> None:
        self._restarted = sid
        super()._start(sid, fault)
        if self.recording and not self._pending_restart:
            self.events.append(SimEvent("restart", self.step_no, sid))  # the final phase's restarts

    def _submit(self, sid: int) -> None:
        if self.recording:
            self.events.append(SimEvent("write", self.step_no, sid, request=self.next_request,
                                        phase=self._faults_seen()))
        super()._submit(sid)

    def _client_row(self, sid: int, rid: int, value: bytes, outcome: str, zxid: int | None) -> None:
        self.outcomes.setdefault(rid, Outcome(outcome, self._faults_seen()))
        super()._client_row(sid, rid, value, outcome, zxid)

    def _check_liveness(self) -> None:
        self._phase_end()
        self.events.append(SimEvent("final", self.step_no, groups=tuple(
            tuple(sorted(g)) for g in self.net.groups) if self.net.groups is not None else ()))
        super()._check_liveness()
        self._phase_end()


@dataclass(frozen=True, slots=True)
class Export:
    """The exported scenario (a mapping ``scenario_spec.parse`` accepts), the simulation's
    result, and what the steps carry over."""

    scenario: dict[str, Any]
    result: SimResult
    kills: int
    restarts: int
    partitions: int
    heals: int
    writes: int

    def yaml(self) -> str:
        head = [f"# Exported from the simulator: {self.scenario['description']}",
                "# Not carried over (see notes): message delivery order, disk write/fsync order, where each",
                "# crash fell, channel breaks, snapshot requests, lost election messages, simulated time.",
                "# Run it: zabray scenario run FILE   (validate: zabray scenario validate FILE)"]
        top = {k: v for k, v in self.scenario.items() if k not in ("notes", "steps")}
        body = yaml.safe_dump(top, sort_keys=False, default_flow_style=None, width=10_000)
        notes = yaml.safe_dump({"notes": self.scenario["notes"]}, sort_keys=False, default_flow_style=False,
                               width=10_000)
        steps = "".join(f"  - {yaml.safe_dump(s, sort_keys=False, default_flow_style=True, width=10_000).strip()}\n"
                        for s in self.scenario["steps"])
        return "\n".join(head) + "\n" + body + notes + "steps:\n" + steps


def _live_side(end: PhaseEnd, sid: int, voters: int) -> bool:
    """Is ``sid`` alive, with a majority of voters alive on its side of any partition?"""
    states = dict(end.states)
    side = next((set(g) for g in end.groups if sid in g), set(states)) if end.groups else set(states)
    up = [s for s in side if states.get(s, "DOWN") != "DOWN" and s <= voters]
    return states.get(sid) != "DOWN" and len(up) > voters // 2


def _phase_waits(fault: SimEvent | None, end: PhaseEnd, voters: int, sids: list[int] | None = None) -> list[dict[str, Any]]:
    """Waits that make the live run reach what the simulation reached by ``end``: a leader, and
    the replicas ``fault`` restarted or healed (or ``sids``) following or leading."""
    out: list[dict[str, Any]] = []
    states = dict(end.states)
    if end.leader is not None:
        out.append({"wait": {"leader": True, "timeout": PHASE_TIMEOUT}})
    if sids is None:
        sids = [fault.sid] if fault is not None and fault.kind == "restart" and fault.sid is not None else \
            [s for s, st in end.states if st != "DOWN"] if fault is not None and fault.kind == "heal" else []
    for sid in sids:
        want = ["OBSERVING"] if sid > voters else ["FOLLOWING", "LEADING"]
        if states.get(sid) in want and _live_side(end, sid, voters):
            out.append({"wait": {"state": {"sid": sid, "is": want if len(want) > 1 else want[0]},
                                 "timeout": PHASE_TIMEOUT}})
    return out


def export(seed: int, options: SimOptions | None = None, *, argv: str = "") -> Export:
    """Run ``seed`` (recording) and build its scenario; ``ConfigError`` for what a scenario
    cannot express (observers)."""
    opt = options or SimOptions()
    if opt.observers:
        raise ConfigError("--export-scenario: scenarios start voters only; run the simulation without --observers")
    if "wipe" in opt.faults:
        raise ConfigError("--export-scenario does not carry wipes over; run the simulation without the wipe fault")
    sim = RecordingSimulation(seed, opt)
    result = sim.run()
    voters = opt.voters
    steps: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    kill_notes: list[str] = []
    ends = iter(sim.phase_ends)  # one per fault (and the final marker), in order: the state just before it
    fault: SimEvent | None = None  # the fault that began the current phase
    final = False
    for ev in sim.events:
        if ev.kind == "write":
            o = sim.outcomes.get(ev.request)
            w: dict[str, Any] = {"value": f"s{seed}-r{ev.request}", "replica": ev.sid}
            if o is None or o.outcome != "ok" or o.faults_before != ev.phase:
                w.update(background=True, may_fail=True)  # not acknowledged within its phase
            steps.append({"write": w})
            counts["write"] += 1
            continue
        if not (final and ev.kind == "restart"):  # the final phase's restarts end no phase
            end = next(ends, None)
            if end is not None:
                steps.extend(_phase_waits(fault, end, voters))
        fault = ev
        if ev.kind == "final":
            final = True
            if ev.groups:
                steps.append({"heal": None})
                counts["heal"] += 1
            continue
        counts[ev.kind] += 1
        if ev.kind == "kill":
            steps.append({"kill": ev.sid})
            steps.append({"wait": {"down": ev.sid, "timeout": DOWN_TIMEOUT}})
            kill_notes.append(f"step {len(steps) - 1}: kill {ev.sid} (simulated step {ev.step}: crashed as {ev.detail})")
        elif ev.kind == "restart":
            steps.append({"restart": ev.sid})
            steps.append({"wait": {"alive": ev.sid, "timeout": PHASE_TIMEOUT}})
        elif ev.kind == "partition":
            steps.append({"partition": [list(g) for g in ev.groups]})
        elif ev.kind == "heal":
            steps.append({"heal": None})
    if final and result.ok and sim.phase_ends:  # after the liveness phase: everyone caught up
        steps.extend(_phase_waits(None, sim.phase_ends[-1], voters, sorted(sim.replicas)))
        steps.append({"wait": {"converged": True, "timeout": PHASE_TIMEOUT}})
    faults = counts["kill"] + counts["restart"] + counts["partition"] + counts["heal"]
    verdict = "no violation" if result.ok else \
        f"violation {result.violations[0].prop} at step {result.violations[0].step}: {result.violations[0].detail}"
    notes = [
        f"simulated: {argv or f'zabray sim --seed {seed}'} ({result.steps} steps, {result.ticks} ticks, {verdict})",
        f"carried over: {counts['kill']} crash(es) as kill, {counts['restart']} restart(s) from disk (the final "
        f"phase's included), {counts['partition']} partition(s), {counts['heal']} heal(s), {counts['write']} "
        "write(s) (the simulator's values, aimed at the same replicas, in submission order)",
        f"not carried over: the order of {result.deliveries} deliveries and of every message, disk write and "
        "fsync (the real scheduler decides); where each crash fell (a kill strikes the live process wherever "
        "it is); which of a crashed sender's in-flight messages still arrived",
        f"not carried over: {counts['break']} channel break(s), {counts['snapshot']} snapshot request(s), "
        "lost election messages (--faults drop)",
        "approximated: a simulated partition delays messages across the cut, a live one cuts TCP links (the "
        "channels close); no message-level delay in the simulator maps onto a hold (only partitions delay "
        "links), so the scenario holds nothing",
        "approximated: simulated time (ticks) and its timeouts are replaced by waits on the state each phase "
        "reached; writes the simulation did not acknowledge within their phase run in the background and "
        "may fail",
        f"config carried over: max_outstanding, diff_window, diff_chunk; not init_limit/sync_limit "
        f"({sim.cfg.init_limit}/{sim.cfg.sync_limit} simulated ticks)",
        *kill_notes,
    ]
    scenario: dict[str, Any] = {
        "name": f"sim-seed-{seed}",
        "description": f"zabray sim seed {seed} ({voters} voters) replayed on a real ensemble, phase by phase",
        "replicas": voters,
        "config": {"max_outstanding": sim.cfg.max_outstanding, "diff_window": sim.cfg.diff_window,
                   "diff_chunk": sim.cfg.diff_chunk},
        "max_elections": 3 + 2 * faults,
        "notes": notes,
        "steps": steps or [{"wait": {"leader": True, "timeout": PHASE_TIMEOUT}}],
    }
    log.info("exported seed %d: %d steps (%s)", seed, len(scenario["steps"]), dict(counts))
    return Export(scenario, result, counts["kill"], counts["restart"], counts["partition"], counts["heal"],
                  counts["write"])


def write(path: str | Path, seed: int, options: SimOptions | None = None, *, argv: str = "") -> Export:
    """``export`` and write the YAML to ``path``."""
    ex = export(seed, options, argv=argv)
    Path(path).write_text(ex.yaml())
    return ex
