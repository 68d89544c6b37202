"""The fault injector: a detached, named Ray actor per ensemble.

Every fault goes through it: process faults (kill, restart, pause, resume) via the controller,
network faults (partition, one-way partition, delay, a channel cut mid-iteration) and disk
faults (a failing or slow fsync, a power cut) via the replicas' fault hooks, crash points, and
whole schedules. It resolves a schedule's target roles at the moment a step runs and records
each fault, with its resolved target, start and end, in the run's trace.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any

import ray

from actors import fault_calls as fc
from actors.names import NAMESPACE, controller_name
from actors.status import ReplicaStatus
from zabray.errors import ConfigError, NotRunningError
from zabray.lab import Lab
from zabray.replay import schedule as sched
from zabray.replay.crashpoints import crash_points
from zabray.replay.holds import HeldMessage, HoldPattern

log = logging.getLogger(__name__)
DISK_FAULTS = ("fsync-fail", "slow-fsync", "lose-unsynced", "clear")


def _messages(answer: fc.FaultAnswer) -> list[HeldMessage]:
    """The held messages a hold call answered (none from a replica that is down or paused)."""
    return answer if isinstance(answer, list) else []


class FaultInjector:
    def __init__(self, name: str) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.name = name
        self.controller = ray.get_actor(controller_name(name), namespace=NAMESPACE)
        self.members: list[int] = []
        self.voters: list[int] = []
        self.shaped: set[int] = set()
        # Faults recorded as begun and not yet ended (a delay, a one-way link, a slow disk, a
        # hold): ended, each is recorded again with its start and end, so the trace's fault
        # table gives it an interval instead of leaving it open to the end of the run.
        self._open: dict[tuple[str, int | str], tuple[str, str, float]] = {}
        self.progress_log: list[dict[str, Any]] = []
        self.total = 0
        self.running = False
        self.error: str | None = None
        self._task: asyncio.Task[None] | None = None
        self.holds: dict[int, HoldPattern] = {}
        self._next_hold = 1
        self._on_resume: dict[int, list[fc.FaultCall]] = {}  # calls a pause deferred
        self._lab: str | None = None  # the lab whose hosts a schedule's host faults act on

    async def _membership(self) -> None:
        if not self.members:
            info = await self.controller.describe.remote()
            self.voters = list(info["voters"])
            self.members = list(info["voters"]) + list(info["observers"])

    async def _record(self, kind: str, target: str, start: float, end: float | None) -> None:
        await self.controller.record_fault.remote(kind, target, start, end)

    async def _begin(self, key: tuple[str, int | str], kind: str, target: str) -> None:
        """Record a fault that lasts until ``_end(key)``."""
        start = time.time()
        self._open[key] = (kind, target, start)
        await self._record(kind, target, start, None)

    async def _end(self, *keys: tuple[str, int | str]) -> None:
        for key in keys:
            opened = self._open.pop(key, None)
            if opened is not None:
                await self._record(*opened, time.time())

    @property
    def slowed(self) -> list[int]:
        """The replicas whose disk is slowed now (an open ``slow-fsync``), in sid order."""
        return sorted(int(k[1]) for k in self._open if k[0] == "disk")

    async def _handle(self, sid: int, when_paused: str = "refuse") -> Any:
        """The replica's handle, None if it is down. A paused (SIGSTOPped) replica answers no Ray
        call until resumed, so a call would hang: ``refuse`` raises ``NotRunningError``, ``skip``
        returns None."""
        h, paused = await self.controller.handle.remote(sid)
        if h is not None and paused:
            if when_paused == "skip":
                return None
            raise NotRunningError(f"replica {sid} is paused; resume it first")
        return h

    async def _on_replica(self, sid: int, call: fc.FaultCall, when_paused: str = "refuse") -> fc.FaultAnswer:
        """Call a replica's fault hook; a replica that dies meanwhile (often the fault's own doing:
        a cut can send it straight into an armed crash point) is not an error. ``when_paused``:
        as for ``_handle``, or ``defer`` to make the call when the replica is resumed (undoing a
        fault: healing, stopping a hold)."""
        if when_paused == "defer":
            h, paused = await self.controller.handle.remote(sid)
            if paused:
                self._on_resume.setdefault(sid, []).append(call)
                return None
        else:
            h = await self._handle(sid, when_paused)
        if h is None:
            return None
        try:
            answer: fc.FaultAnswer = await h.fault.remote(call)
            return answer
        except ray.exceptions.RayActorError:
            log.info("replica %d died during %s", sid, type(call).__name__)
            return None

    async def _status(self) -> list[ReplicaStatus]:
        got: list[ReplicaStatus] = await self.controller.status.remote()
        return got

    async def _leader(self) -> int | None:
        best: tuple[int, int] | None = None
        for st in await self._status():
            if st.established_leader:
                key = (st.epoch, st.sid)
                best = max(best, key) if best else key
        return best[1] if best else None

    # -- process faults (through the controller) ------------------------------------------------

    async def kill(self, sid: int) -> None:
        await self.controller.kill.remote(sid)
        self._on_resume.pop(sid, None)  # its next process starts clean

    async def restart(self, sid: int, fresh: bool = False,
                      crash_points: list[tuple[str, int]] | None = None) -> dict[str, Any]:
        """The holds on what ``sid`` sends go with it: armed in the new process at start."""
        holds = [(hid, p) for hid, p in self.holds.items() if p.src is None or sid in p.src]
        out = await self.controller.restart.remote(sid, fresh, crash_points, holds or None)
        await self._end(("disk", sid))  # the new process's disk is not slowed
        return out

    async def pause(self, sid: int) -> None:
        await self.controller.pause.remote(sid)

    async def resume(self, sid: int) -> None:
        await self.controller.resume.remote(sid)
        for call in self._on_resume.pop(sid, []):  # what was undone while it was stopped
            await self._on_replica(sid, call)

    async def partition(self, groups: list[list[int]]) -> None:
        await self.controller.partition.remote(groups)

    # -- network faults (through the replicas' hooks) ------------------------------------------

    async def _known(self, *groups: list[int]) -> None:
        await self._membership()
        unknown = sorted({s for g in groups for s in g} - set(self.members))
        if unknown:
            raise ConfigError(f"no replica {', '.join(map(repr, unknown))} in ensemble {self.name!r} "
                              f"(replicas are {self.members})")

    async def _shape(self, src: list[int], dst: list[int], delay_ms: float | None) -> None:
        await self._known(src, dst)
        kind = "oneway" if delay_ms is None else "delay"
        for s in src:
            await self._on_replica(s, fc.ShapeLinks(tuple(dst), delay_ms))
            self.shaped.add(s)
        what = f"{','.join(map(str, src))} -> {','.join(map(str, dst))}"
        await self._begin(("links", what), kind if delay_ms is None else f"delay {delay_ms:.0f}ms", what)

    async def oneway(self, src: list[int], dst: list[int]) -> None:
        """What ``src`` sends to ``dst`` is held (as by a stalled TCP connection) until healed."""
        await self._shape(src, dst, None)

    async def delay(self, src: list[int], dst: list[int], delay_ms: float) -> None:
        if delay_ms <= 0:
            raise ConfigError("delay_ms must be positive")
        await self._shape(src, dst, delay_ms)

    async def cut(self, src: list[int], dst: list[int]) -> int:
        """Close the current channels between ``src`` and ``dst`` mid-iteration."""
        await self._known(src, dst)
        n = 0
        for s in src:
            cut = await self._on_replica(s, fc.CutLinks(tuple(dst)))
            n += cut if isinstance(cut, int) else 0
        now = time.time()
        await self._record("cut", f"{','.join(map(str, src))} x {','.join(map(str, dst))}", now, now)
        return n

    async def heal(self) -> None:
        """Restore every link: partitions, one-way partitions, delays, and message holds (every
        hold stops and what they held is released)."""
        await self._membership()
        if self.holds or (self._next_hold > 1 and await self.held()):  # no Ray calls if never held
            await self.unhold(None, True)
        await self.controller.heal.remote()
        for s in sorted(self.shaped):
            await self._on_replica(s, fc.UnshapeLinks(tuple(self.members)), when_paused="defer")
        await self._end(*[k for k in self._open if k[0] == "links"])
        if self.shaped:
            await self._record("heal-links", ",".join(map(str, sorted(self.shaped))), time.time(), time.time())
        self.shaped.clear()

    # -- message holds (zabray.replay.holds) --------------------------------------------------------------

    async def hold(self, p: HoldPattern) -> int:
        """Install hold ``p`` on every sender it names (running ones now, restarted ones at start)."""
        await self._known(sorted(p.src or ()), sorted(p.dst or ()))
        hid, self._next_hold = self._next_hold, self._next_hold + 1
        self.holds[hid] = p
        for s in sorted(p.src) if p.src is not None else self.members:
            await self._on_replica(s, fc.AddHold(hid, p), when_paused="refuse" if p.src else "defer")
        await self._begin(("hold", hid), "hold", f"#{hid} {p.describe()}")
        return hid

    def _check_hold(self, hold_id: int | None) -> None:
        if hold_id is not None and not 1 <= hold_id < self._next_hold:
            raise ConfigError(f"no hold #{hold_id} (active holds: {', '.join(map(str, sorted(self.holds))) or 'none'})")

    async def release(self, hold_id: int | None, count: int | None, src: int | None, dst: int | None,
                      stop: bool = False) -> list[HeldMessage]:
        """Release from the heads of the channels ``src`` -> ``dst`` (``ChannelHolds.release``),
        senders in sid order; ``stop`` also stops the hold(s)."""
        await self._known([src] if src is not None else [], [dst] if dst is not None else [])
        self._check_hold(hold_id)
        out: list[HeldMessage] = []
        for s in [src] if src is not None else self.members:
            out += _messages(await self._on_replica(s, fc.ReleaseHeld(hold_id, count, dst),
                                                    when_paused="refuse" if src is not None else "skip"))
        if stop:
            await self._stop_holds(hold_id)
        now = time.time()
        what = (f"#{hold_id}" if hold_id is not None else "all") + f" {src if src is not None else '*'}" \
            f" -> {dst if dst is not None else '*'}" + (f" first {count}" if count is not None else "")
        await self._record("release", f"{what}: {len(out)} message(s)" + (" (hold stopped)" if stop else ""), now, now)
        return out

    async def _stop_holds(self, hold_id: int | None) -> None:
        ids = [hold_id] if hold_id is not None else sorted(self.holds)
        for hid in ids:
            p = self.holds.pop(hid, None)
            await self._end(("hold", hid))
            for s in (sorted(p.src) if p is not None and p.src is not None else self.members):
                await self._on_replica(s, fc.StopHold(hid), when_paused="defer")

    async def unhold(self, hold_id: int | None, release: bool = True) -> list[HeldMessage]:
        """Stop hold ``hold_id`` (all if None) catching; with ``release`` free what it held."""
        await self._membership()
        self._check_hold(hold_id)
        await self._stop_holds(hold_id)
        out: list[HeldMessage] = []
        if release:
            for s in self.members:
                out += _messages(await self._on_replica(s, fc.ReleaseHeld(hold_id, None, None), when_paused="defer"))
        now = time.time()
        await self._record("unhold", f"#{hold_id if hold_id is not None else 'all'}: {len(out)} released", now, now)
        return out

    async def note(self, what: str, text: str) -> None:
        now = time.time()
        await self._record(what, text, now, now)

    async def held(self) -> list[HeldMessage]:
        await self._membership()
        out: list[HeldMessage] = []
        for s in self.members:
            out += _messages(await self._on_replica(s, fc.ListHeld(), when_paused="skip"))
        return out

    # -- disk faults and crash points ------------------------------------------------------------------

    async def _running(self, sid: int) -> Any:
        """The replica's handle; ``ConfigError`` for a sid not in the ensemble, ``NotRunningError``
        for one that is down."""
        await self._membership()
        if sid not in self.members:
            raise ConfigError(f"no replica {sid!r} in ensemble {self.name!r} (replicas are {self.members})")
        h = await self._handle(sid)
        if h is None:
            raise NotRunningError(f"replica {sid} is not running")
        return h

    async def disk(self, sid: int, kind: str, delay_ms: float = 0.0) -> None:
        if kind not in DISK_FAULTS:
            raise ConfigError(f"unknown disk fault {kind!r}: use {', '.join(DISK_FAULTS)}")
        if kind == "slow-fsync" and delay_ms <= 0:
            raise ConfigError("slow-fsync needs a positive delay_ms")
        h = await self._running(sid)
        now = time.time()
        if kind == "lose-unsynced":
            await self._record(kind, str(sid), now, now)
            try:
                await h.disk_fault.remote(kind, delay_ms)
            except Exception:  # the replica died, as asked
                pass
            return
        await h.disk_fault.remote(kind, delay_ms)
        if kind == "slow-fsync":
            await self._end(("disk", sid))  # a new delay replaces the old one
            await self._begin(("disk", sid), f"slow-fsync {delay_ms:.0f}ms", str(sid))
            return
        if kind == "clear":
            await self._end(("disk", sid))
        await self._record(kind, str(sid), now, now)

    async def arm(self, sid: int, point: str, nth: int = 1) -> None:
        if nth < 1:
            raise ConfigError(f"nth must be at least 1, got {nth}")
        h = await self._running(sid)
        await h.arm_crash.remote(point, nth)
        now = time.time()
        await self._record("arm-crash-point", f"{sid}:{point}#{nth}", now, now)

    async def arm_many(self, sid: int, points: list[tuple[str, int]]) -> None:
        """Arm several crash points on ``sid`` at once (replacing what was armed); empty disarms."""
        armed = crash_points(points)
        h = await self._running(sid)
        await h.arm_crashes.remote([(c.point, c.nth) for c in armed])
        now = time.time()
        what = ",".join(c.describe() for c in armed) or "none (disarmed)"
        await self._record("arm-crash-point", f"{sid}:{what}", now, now)

    # -- schedules ----------------------------------------------------------------------------------

    async def run_schedule(self, data: dict[str, Any], seed: int | None = None) -> list[str]:
        """Start a schedule in the background; returns its plan. ``progress()`` follows it."""
        if self.running:
            raise ConfigError("a schedule is already running")
        plan = sched.parse(data, seed)
        self._lab = plan.lab
        await self._membership()
        self.progress_log, self.total, self.error, self.running = [], len(plan.steps), None, True
        self._task = asyncio.get_running_loop().create_task(self._run(plan))
        return [s.describe() for s in plan.steps]

    async def progress(self) -> dict[str, Any]:
        return {"done": len(self.progress_log), "total": self.total, "running": self.running,
                "error": self.error, "log": list(self.progress_log)}

    async def _run(self, plan: sched.Schedule) -> None:
        t0 = time.monotonic()
        try:
            for i, step in enumerate(plan.steps):
                await asyncio.sleep(max(0.0, t0 + step.at - time.monotonic()))
                rng = random.Random(plan.seed * 1_000_003 + i)
                leader = await self._leader()
                deadline = time.monotonic() + 15
                while leader is None and step.target in ("leader", "follower", "minority") \
                        and time.monotonic() < deadline:  # mid-election: the role names nobody yet
                    await asyncio.sleep(0.05)
                    leader = await self._leader()
                sids = sched.resolve(step.target, self.members, leader, self.voters, rng)
                started = time.time()
                await self._apply(step, sids)
                await asyncio.sleep(step.hold)
                await self._undo(step, sids)
                self.progress_log.append({"step": i, "fault": step.fault, "role": step.target, "replicas": sids,
                                          "point": step.point, "start": started, "end": time.time()})
            await self.heal_and_restart_all()
        except Exception as e:  # reported through progress(); the run stops
            log.exception("schedule failed")
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.running = False

    async def _apply(self, step: sched.Step, sids: list[int]) -> None:
        """Apply one step's fault. One that cannot be applied (its replica's node cannot be
        reached, the replica is not running) stops the run with that error: a fault the trace
        and the figures would leave out must never pass for one that happened."""
        rest = [s for s in self.members if s not in sids]
        f = step.fault
        if f in ("kill", "wipe"):
            for s in sids:
                await self.kill(s)
        elif f == "pause":
            for s in sids:
                await self.pause(s)
        elif f == "partition":
            await self.partition([sids, rest])
        elif f == "oneway":
            await self.oneway(sids, rest)
        elif f == "delay":
            await self.delay(sids, rest, step.delay_ms)
        elif f == "cut":
            await self.cut(sids, rest)
        elif f == "crash-point":
            for s in sids:
                await self.arm(s, step.point or "", step.nth)
        elif f in ("fsync-fail", "slow-fsync", "lose-unsynced"):
            for s in sids:
                await self.disk(s, f, step.delay_ms)
        elif f in sched.HOST_FAULTS:
            for s in sids:
                await self._host_fault(f, s, undo=False)

    async def _host_fault(self, fault: str, sid: int, undo: bool) -> None:
        """Cut off or crash replica ``sid``'s host (a lab host), or undo it. A host that is not a
        host of the schedule's lab, or no lab, is an error that stops the run."""
        if self._lab is None:
            raise ConfigError("host faults need the schedule's `lab`")
        lab = await asyncio.to_thread(Lab.find, self._lab)
        info = await self.controller.describe.remote()
        ip = str(info["clients"][sid][0])
        host = lab.spec.host_of_ip(ip)
        if host is None:
            raise NotRunningError(f"replica {sid} listens on {ip}, not on a host of lab {self._lab!r}")
        if fault == "host-cut":
            await asyncio.to_thread(lab.reconnect if undo else lab.cut, host)
        elif undo:
            await asyncio.to_thread(lab.revive, host)
        else:
            await asyncio.to_thread(lab.crash, host)
        if undo:
            await self._end(("host", sid))
        else:
            await self._begin(("host", sid), fault, f"{sid} (host {host})")

    async def _undo(self, step: sched.Step, sids: list[int]) -> None:
        f = step.fault
        if f == "pause":
            for s in sids:
                await self._try(self.resume(s))
        elif f in ("partition", "oneway", "delay"):
            await self.heal()
        elif f == "slow-fsync":
            for s in sids:
                await self._try(self.disk(s, "clear"))
        elif f in sched.HOST_FAULTS:  # the replica comes back by itself once its host does
            for s in sids:
                await self._host_fault(f, s, undo=True)
        elif f in ("kill", "crash-point", "fsync-fail", "lose-unsynced", "wipe"):
            for s in sids:
                h = await self._handle(s, "skip")
                if h is not None and f == "crash-point":
                    await self._try(h.arm_crash.remote("recv:PING", 1 << 62))  # disarm: never fires
                await self._try(self.restart(s, fresh=f == "wipe"))
        if f == "wipe":
            await self._rebuilt(sids)

    async def _rebuilt(self, sids: list[int], timeout: float = 60.0) -> None:
        """Wait until the wiped ``sids`` are rebuilt (no longer rejoining), as a careful operator
        would before the next fault: a second wipe while the first is rebuilt could leave no
        quorum of voters holding the data, and the ensemble rightly stuck for good."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not any(st.rejoining for st in await self._status() if st.sid in sids):
                return
            await asyncio.sleep(0.1)
        log.warning("replicas %s not rebuilt %.0f s after their wipe (no leader to sync them?)", sids, timeout)

    async def _try(self, coro: Any) -> None:
        try:
            await coro
        except Exception as e:  # e.g. restarting a replica that is running: nothing to undo
            log.info("fault step: %s", e)

    async def heal_and_restart_all(self) -> None:
        await self._membership()
        await self.heal()
        for s in self.slowed:
            await self._try(self.disk(s, "clear"))
        for st in await self._status():
            if st.paused:
                await self._try(self.resume(st.sid))
        for st in await self._status():
            if not st.alive:
                await self._try(self.restart(st.sid))
