"""Running a scenario (``zabray.replay.scenario``) against a real ensemble.

``run(ens, scenario)`` applies the steps in order, each reported as it happens (one line, to
``out``) and recorded as a ``fault`` row ``scenario-step`` in the run's trace; waits poll their
condition until it holds or their timeout passes (no sleeps in a scenario). Then it heals
everything (holds released), lets the live replicas converge, and judges the run:

- no loss: every acknowledged write is delivered by every live replica, histories agree
  (``zabray.driver.workload.check_histories``);
- no loop: no replica began more than ``max_elections`` elections over the run (one per start,
  one per iteration that ended: ``zabray.replay.proofs.elections``);
- the scenario's ``proofs`` hold on its trace (``zabray.replay.proofs``);
- with ``check``, ``zabray check`` (PySpark) finds every Zab property holding in its traces.

A failed step raises ``ScenarioError`` naming it; ``start_and_run`` starts an ensemble for the
scenario and stops it (data wiped) afterwards.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zabray.driver.ensemble import Ensemble
from zabray.driver.workload import check_histories
from zabray.errors import ConfigError, ScenarioError, ZabError
from zabray.pipeline.errors import TraceError
from zabray.pipeline.rundir import check_run_dir
from zabray.pipeline.spark_session import get_session
from zabray.protocol.zxid import Zxid, fmt
from zabray.replay import scenario as spec
from zabray.replay.holds import matching, pattern
from zabray.replay.proofs import PROOFS, ProofResult, elections
from zabray.trace.files import replica_rows
from zabray.trace.records import digest

if TYPE_CHECKING:
    from zabray.driver.ensemble import Ensemble

log = logging.getLogger(__name__)
POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    name: str
    run_dir: str
    acknowledged: int
    problems: tuple[str, ...]
    proofs: tuple[ProofResult, ...]
    elections: dict[int, int] = field(default_factory=dict)
    check: int | None = None
    """``zabray check``'s exit code (0: every property holds), None when not run."""
    seconds: float = 0.0
    acked: dict[int, str | None] = field(default_factory=dict)
    """The writes the run acknowledged: zxid -> value digest."""

    @property
    def ok(self) -> bool:
        return not self.problems and all(p.ok for p in self.proofs) and self.check in (None, 0)


class _Run:
    def __init__(self, ens: Ensemble, sc: spec.Scenario, out: Callable[[str], None]) -> None:
        self.ens, self.sc, self.out = ens, sc, out
        self.names: dict[str, int] = {}
        self.holds: dict[str, int] = {}
        self.writes: dict[str, int] = {}
        self.acked: dict[int, str | None] = {}
        self.pending: list[Future[None]] = []
        self.pool = ThreadPoolExecutor(4, thread_name_prefix="scenario-write")

    # -- resolving names -------------------------------------------------------------------------

    def sid(self, v: spec.Sid) -> int:
        return self.names[v] if isinstance(v, str) else int(v)

    def zxid(self, v: spec.ZxidRef) -> int:
        return self.writes[v] if isinstance(v, str) else int(v)

    def pattern_of(self, step_args: dict[str, Any]) -> Any:
        src = [self.sid(s) for s in step_args["src"]] if step_args.get("src") else None
        dst = [self.sid(s) for s in step_args["dst"]] if step_args.get("dst") else None
        z = step_args.get("zxids")
        return pattern(src, dst, step_args.get("types"), [self.zxid(x) for x in z] if z else None)

    # -- steps -------------------------------------------------------------------------------------

    def step(self, st: spec.Step) -> str:
        ens, a = self.ens, dict(st.args)
        match st.kind:
            case "bind":
                leader = None
                for name, role in a.items():
                    if role == "leader":
                        leader = leader if leader is not None else ens.wait_for_leader(30)
                        self.names[name] = leader
                    elif role == "follower":
                        leader = leader if leader is not None else ens.wait_for_leader(30)
                        taken = set(self.names.values()) | {leader}
                        free = sorted(int(s) for s in ens.info.get("voters", []) if int(s) not in taken)
                        if not free:
                            raise ScenarioError(f"no follower left to bind {name} to")
                        self.names[name] = free[0]
                    else:
                        self.names[name] = int(role)
                return ", ".join(f"{k}={self.names[k]}" for k in a)
            case "hold":
                p = self.pattern_of(a)
                hid = ens.hold(sorted(p.src) if p.src else None, sorted(p.dst) if p.dst else None,
                               sorted(p.types) if p.types else None, list(p.zxids) if p.zxids else None)
                if "as" in a:
                    self.holds[a["as"]] = hid
                return f"hold #{hid}: {p.describe()}"
            case "release":
                got = ens.release(self.holds[a["hold"]] if "hold" in a else None, a.get("count"),
                                  self.sid(a["src"]) if "src" in a else None,
                                  self.sid(a["dst"]) if "dst" in a else None, stop=bool(a.get("stop", False)))
                return f"released {len(got)}: " + ", ".join(m.describe().split(" (")[0] for m in got[:8]) + \
                    (" ..." if len(got) > 8 else "")
            case "unhold":
                got = ens.unhold(self.holds[a["hold"]] if "hold" in a else None, bool(a.get("release", True)))
                return f"released {len(got)}"
            case "kill":
                ens.kill(self.sid(a["sid"]))
                return f"killed {self.sid(a['sid'])}"
            case "restart":
                ens.restart(self.sid(a["sid"]), fresh=a.get("fresh", False), crash_points=a.get("crash_points"))
                return f"restarted {self.sid(a['sid'])}"
            case "partition":
                groups = [[self.sid(s) for s in g] for g in a["groups"]]
                ens.partition(*groups)
                return " | ".join(",".join(map(str, g)) for g in groups)
            case "heal":
                ens.heal()
                return "healed"
            case "write":
                return self.write(a)
            case "wait":
                assert st.condition is not None
                return self.wait(st.condition, st.timeout)
            case "expect":
                assert st.condition is not None
                ok, seen = self.holds_now(st.condition)
                if not ok:
                    raise ScenarioError(f"expected {st.condition.describe()}, but {seen}")
                return seen
        raise ConfigError(f"unknown step {st.kind!r}")  # parse() admits none

    def write(self, a: dict[str, Any]) -> str:
        n = int(a["count"])
        values = [a["value"].encode() if n == 1 else f"{a['value']}-{i}".encode() for i in range(n)]
        replica = self.sid(a["replica"]) if "replica" in a else None

        def go() -> None:
            zs = self.ens.submit_many(values, replica=replica)
            bad = [z for z in zs if not isinstance(z, Zxid)]
            for v, z in zip(values, zs, strict=True):
                if isinstance(z, Zxid):
                    self.acked[int(z)] = digest(v)
            if "as" in a and isinstance(zs[-1], Zxid):
                self.writes[a["as"]] = int(zs[-1])
            if bad and a.get("may_fail"):
                self.out(f"  {len(bad)} of {n} write(s) {a['value']!r} failed (may_fail): {bad[0]}")
            elif bad:
                raise ScenarioError(f"{len(bad)} of {n} writes failed: {bad[0]}")

        if a.get("background"):
            self.pending.append(self.pool.submit(go))
            return f"{n} write(s) in the background"
        before = len(self.acked)
        go()
        named = f" ({a['as']} = {fmt(self.writes[a['as']])})" if "as" in a and a["as"] in self.writes else ""
        return f"{len(self.acked) - before} of {n} write(s) acknowledged{named}" if a.get("may_fail") \
            else f"{n} write(s) acknowledged{named}"

    def wait(self, cond: spec.Condition, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            ok, seen = self.holds_now(cond)
            if ok:
                return seen
            if time.monotonic() > deadline:
                raise ScenarioError(f"{cond.describe()} still false after {timeout:g} s: {seen}")
            time.sleep(POLL_S)

    def holds_now(self, cond: spec.Condition) -> tuple[bool, str]:
        """(the condition holds, what was seen); ``not: true`` negates."""
        ok, seen = self._observe(cond)
        return ok != cond.negate, seen

    def _observe(self, cond: spec.Condition) -> tuple[bool, str]:
        ens, a = self.ens, dict(cond.args)
        match cond.what:
            case "state" | "down" | "alive":
                sid = self.sid(a["sid"])
                st = next(s for s in ens.status() if s.sid == sid)
                seen = f"{sid} is {st.state if st.alive else 'DOWN'} in epoch {st.epoch}"
                if cond.what == "down":
                    return not st.alive, seen
                if cond.what == "alive":
                    return st.alive, seen
                states = a["is"] if isinstance(a["is"], list) else [a["is"]]
                return st.alive and st.state in states and a.get("epoch", st.epoch) == st.epoch, seen
            case "leader":
                leader = ens.leader()
                return leader is not None, f"leader {leader}"
            case "converged":
                live = [s for s in ens.status() if s.alive]
                return len({s.applied for s in live}) == 1, ", ".join(f"{s.sid}@{fmt(s.applied)}" for s in live)
            case "held":
                got = matching(ens.held(), self.pattern_of(a), caught_only=False)
                ok = len(got) >= a["count"]
                named = ""
                if ok and "as" in a:
                    zs = [m.zxid for m in got if m.zxid is not None]
                    if zs:
                        self.writes[a["as"]] = max(zs)
                        named = f" ({a['as']} = {fmt(max(zs))})"
                    else:
                        ok = False
                return ok, f"{len(got)} held: " + ", ".join(m.describe() for m in got[:4]) + named
            case "delivered":
                z = self.zxid(a["zxid"])
                sids = [self.sid(a["sid"])] if "sid" in a else None
                hist = ens.histories(after=z - 1)
                by = sorted(s for s, h in hist.items() if (sids is None or s in sids) and any(int(x) == z for x, _ in h))
                where = f"{self.sid(a['sid'])}" if sids else "any live replica"
                return bool(by), (f"{fmt(z)} delivered by {', '.join(map(str, by))}" if by
                                  else f"{fmt(z)} not delivered by {where}")
            case "durable":
                sid, z = self.sid(a["sid"]), self.zxid(a["zxid"])
                view = ens.inspect(sid)
                has = any(int(e.zxid) == z for e in view.log) or int(view.committed_through) >= z
                return has, f"{fmt(z)} {'is' if has else 'is not'} on {sid}'s disk (last {fmt(view.last_zxid)})"
            case "epoch":
                sid = self.sid(a["sid"])
                view = ens.inspect(sid)
                has = all(getattr(view, f"{k}_epoch") == a[k] for k in ("current", "accepted") if k in a)
                return has, f"{sid}'s disk: current epoch {view.current_epoch}, accepted {view.accepted_epoch}"
            case "acknowledged":
                return len(self.acked) >= a["count"], f"{len(self.acked)} acknowledged"
        raise ConfigError(f"unknown condition {cond.what!r}")

    # -- the end -------------------------------------------------------------------------------------

    def settle(self, timeout: float = 60) -> None:
        """Heal, let background writes finish and every live replica converge."""
        self.ens.heal()
        for f in self.pending:
            f.result(timeout=timeout)
        self.ens.wait_for_leader(timeout)
        self.wait(spec.Condition("converged", ()), timeout)


def run(ens: Ensemble, scenario: spec.Scenario | str | os.PathLike[str], *, out: Callable[[str], None] = log.info,
        check: bool = True) -> ScenarioResult:
    """Run ``scenario`` (validated, or a YAML path) on ``ens``; see the module docstring."""
    sc = scenario if isinstance(scenario, spec.Scenario) else spec.load(Path(scenario))
    r = _Run(ens, sc, out)
    t0 = time.monotonic()
    n = len(sc.steps)
    try:
        for st in sc.steps:
            head = f"[{st.index + 1:>2}/{n}] {st.describe()}"
            ens.note("scenario-step", f"{sc.name} {st.index + 1}: {st.describe()}")
            try:
                seen = r.step(st)
            except ZabError as e:
                out(f"{head}  FAILED: {e}")
                raise ScenarioError(f"scenario {sc.name!r}: step {st.index + 1} ({st.kind}): {e}") from None
            out(f"{head}  -> {seen}")
        out("settling: heal, finish writes, converge")
        r.settle()
    finally:
        r.pool.shutdown(wait=False)
    run_dir = str(ens.info.get("run_dir", ""))
    voters = [int(s) for s in ens.info.get("voters", [])] + [int(s) for s in ens.info.get("observers", [])]
    rows = {s: replica_rows(run_dir, s) for s in voters} if run_dir else {}
    problems = check_histories(ens.histories(), r.acked)
    loops = elections(rows)
    problems += [f"replica {s} began {k} elections (more than max_elections {sc.max_elections})"
                 for s, k in loops.items() if k > sc.max_elections]
    proofs = tuple(PROOFS[p](rows) for p in sc.proofs)
    for p in proofs:
        out(f"proof {p.name}: {'HOLDS' if p.ok else 'NOT SHOWN'}: {p.text}")
    out(f"no loss: {len(r.acked)} acknowledged writes, " + ("all on every live replica, histories agree"
                                                           if not problems else "; ".join(problems[:5])))
    out("elections begun (starts + iterations ended) per replica: " + ", ".join(f"{s}: {k}" for s, k in loops.items()))
    code = spark_check(run_dir, out) if check and run_dir else None
    return ScenarioResult(sc.name, run_dir, len(r.acked), tuple(problems), proofs, loops, code,
                          round(time.monotonic() - t0, 2), dict(r.acked))


def spark_check(run_dir: str, out: Callable[[str], None] = log.info) -> int:
    """What ``zabray check RUN_DIR --no-figures`` would exit with (0: every property holds), with
    its table given to ``out`` and ``check.json`` written as that command writes them."""
    from pyspark.sql import SparkSession  # the pipeline extra: only when a check is asked for

    ours = SparkSession.getActiveSession() is None
    spark = get_session()
    try:
        done = check_run_dir(spark, run_dir, with_figures=False)
    except TraceError as e:
        out(f"zabray check: {run_dir}: {e}")
        return 2
    finally:
        if ours:
            spark.stop()
    out(f"{done.table}\nreport: {done.report_path}")
    return 0 if done.report.ok else 1


def start_and_run(path: str | os.PathLike[str], *, out: Callable[[str], None] = log.info, check: bool = True,
                  address: str | None = None, keep: bool = False, run_dir: str | None = None,
                  **overrides: Any) -> ScenarioResult:
    """Start an ensemble as the scenario asks (its ``replicas`` and ``config``, then ``overrides``),
    run it, stop it (its data wiped unless ``keep``; traces stay in the run directory)."""
    sc = spec.load(Path(path))
    cfg = {**dict(sc.config), **overrides}
    name = f"scn-{''.join(c if c.isalnum() else '-' for c in sc.name)[:30]}-{os.getpid()}"
    ens = Ensemble.start(sc.replicas, 0, name=name, address=address, run_dir=run_dir, **cfg)
    out(f"scenario {sc.name}: {sc.description.strip().splitlines()[0] if sc.description else ''}".rstrip(": "))
    out(f"ensemble {name!r}: {sc.replicas} replicas; traces in {ens.info.get('run_dir')}")
    try:
        ens.wait_for_leader(60)
        return run(ens, sc, out=out, check=check)
    finally:
        ens.stop(wipe=not keep)

