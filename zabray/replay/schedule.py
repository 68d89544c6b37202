"""Fault schedules: YAML in ``configs/faults/``, expanded into a deterministic plan.

A schedule is either a ``script`` of explicit steps or a ``random`` section from which a seeded
generator draws steps: which fault, which target role (Jepsen-style: leader, follower,
minority, majority, random, all), when, and for how long. The plan is a pure function of the
schedule and the seed, so the same seed applies the same faults to the same roles in the same
order; the replicas a role names are resolved only when the step runs. Every fault that lasts
(kill, pause, partition, one-way partition, delay, slow fsync) is undone after its ``hold``, and
the run ends by healing everything and restarting every replica that is down.

    seed: 7
    workload: {in_flight: 100, size: 1024}   # `zabray faults run`'s writes (also sessions, keys)
    random:
      steps: 20
      interval: [0.5, 1.5]      # seconds between steps
      hold: [0.5, 2.0]          # seconds a fault lasts
      mix: {kill: 3, pause: 1, partition: 2, oneway: 1, delay: 1, cut: 1, crash-point: 2, slow-fsync: 1}
      targets: [leader, follower, minority, random]
    script:                     # or explicit steps (times in seconds from the start)
      - {at: 1.0, fault: kill, target: leader, hold: 2.0}
      - {at: 5.0, fault: crash-point, target: follower, point: "send-before:ACK", nth: 10}
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zabray import yamlfile
from zabray.errors import ConfigError
from zabray.replay.crashpoints import check_point

FAULT_KINDS = {
    "kill": "the process dies at once (disk kept); undone by a restart",
    "pause": "SIGSTOP, sockets stay open; undone by SIGCONT",
    "partition": "cut every link between the target and the rest, both ways; undone by heal",
    "oneway": "the target's messages to the rest are held (not theirs to it); undone by heal",
    "delay": "the target's messages to the rest wait `delay_ms`; undone by heal",
    "cut": "close the target's current channels mid-iteration (its iteration must end)",
    "crash-point": "arm crash point `point` (nth pass) on the target; restarted after `hold`",
    "fsync-fail": "the target's next fdatasync fails: it must stop; restarted after `hold`",
    "slow-fsync": "every fdatasync of the target waits `delay_ms`; undone after `hold`",
    "lose-unsynced": "a power cut: the target dies losing everything not yet fsynced; restarted after `hold`",
    "wipe": "the target dies and its disk is emptied; after `hold` it restarts fresh, counting in no quorum "
            "until a leader has rebuilt it (one replica: target leader, follower or random)",
}
WORKLOAD_KEYS = ("in_flight", "size", "sessions", "keys")
"""The write load beside the faults (``zabray faults run``): writes in flight, value bytes, and,
with ``--histories``, the register workload's sessions and keys."""
ONE_REPLICA = ("leader", "follower", "random")
TARGETS = ("leader", "follower", "minority", "majority", "random", "all")
DEFAULT_POINTS = ("recv:PROPOSAL", "send-before:ACK", "persist-before:txns", "persist-after:txns",
                  "recv:NEWLEADER", "persist-after:current-epoch", "send-before:ACKEPOCH", "recv:COMMIT")


@dataclass(frozen=True)
class Step:
    at: float
    fault: str
    target: str
    hold: float = 0.0
    delay_ms: float = 50.0
    point: str | None = None
    nth: int = 1

    def describe(self) -> str:
        extra = f" {self.point}#{self.nth}" if self.point else ""
        extra += f" {self.delay_ms:.0f}ms" if self.fault in ("delay", "slow-fsync") else ""
        return f"t+{self.at:6.2f}s {self.fault}{extra} -> {self.target} for {self.hold:.2f}s"


@dataclass(frozen=True)
class Schedule:
    seed: int
    steps: tuple[Step, ...]
    final: str = "heal-and-restart-all"
    workload: dict[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return max((s.at + s.hold for s in self.steps), default=0.0)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and v == v  # NaN fails v == v


def _pair(v: Any, key: str) -> tuple[float, float]:
    if _is_num(v):
        return float(v), float(v)
    if isinstance(v, list) and len(v) == 2 and all(_is_num(x) for x in v) and v[0] <= v[1]:
        return float(v[0]), float(v[1])
    raise ConfigError(f"schedule key {key!r} must be a number >= 0 or [low, high], got {v!r}")


def _num(d: dict[str, Any], key: str, default: float, where: str, *, integer: bool = False, least: float = 0) -> Any:
    """``d[key]`` (or ``default``) checked to be a number (an integer if asked) of at least ``least``."""
    v = d.get(key, default)
    if not _is_num(v) or (integer and not isinstance(v, int)) or v < least:
        kind = "an integer" if integer else "a number"
        raise ConfigError(f"{where}: {key!r} must be {kind} >= {least:g}, got {v!r}")
    return v


def _step(d: dict[str, Any], at: float, where: str) -> Step:
    unknown = set(d) - {"at", "after", "fault", "target", "hold", "delay_ms", "point", "nth"}
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    fault = d.get("fault")
    if fault not in FAULT_KINDS:
        raise ConfigError(f"{where}: fault must be one of {', '.join(FAULT_KINDS)}, got {fault!r}")
    target = d.get("target", "random")
    if not (target in TARGETS or (isinstance(target, list) and all(isinstance(x, int) for x in target))):
        raise ConfigError(f"{where}: target must be one of {', '.join(TARGETS)} or a list of replica ids")
    if fault == "wipe" and not (target in ONE_REPLICA or (isinstance(target, list) and len(target) == 1)):
        raise ConfigError(f"{where}: wipe takes one replica (target {', '.join(ONE_REPLICA)} or one id): with "
                          "several wiped at once, a quorum holding the acknowledged writes may be gone")
    point = d.get("point")
    if fault == "crash-point":
        if not point:
            raise ConfigError(f"{where}: a crash-point step needs `point` (see `zabray faults points`)")
        check_point(point)
    return Step(at=at, fault=fault, target=target if isinstance(target, str) else ",".join(map(str, target)),
                hold=float(_num(d, "hold", 1.0, where)), delay_ms=float(_num(d, "delay_ms", 50.0, where)),
                point=point, nth=_num(d, "nth", 1, where, integer=True, least=1))


def parse(data: dict[str, Any], seed: int | None = None) -> Schedule:
    """Validate a schedule mapping and expand it into its plan (``seed`` overrides the file's)."""
    if not isinstance(data, dict):
        raise ConfigError("a schedule is a mapping with `script` and/or `random`")
    unknown = set(data) - {"seed", "script", "random", "final", "workload", "name", "description"}
    if unknown:
        raise ConfigError(f"schedule: unknown key {sorted(unknown)[0]!r}")
    seed = int(seed if seed is not None else data.get("seed", 0))
    rng = random.Random(seed)
    steps: list[Step] = []
    t = 0.0
    d: dict[str, Any]
    for i, d in enumerate(data.get("script") or []):
        if not isinstance(d, dict):
            raise ConfigError(f"script step {i + 1}: must be a mapping")
        where = f"script step {i + 1}"
        t = float(_num(d, "at", 0, where)) if "at" in d else t + float(_num(d, "after", 1.0, where))
        steps.append(_step(d, t, where))
    r = data.get("random")
    if r:
        if not isinstance(r, dict):
            raise ConfigError("schedule key 'random' must be a mapping (steps, interval, hold, mix, targets, points)")
        unknown = set(r) - {"steps", "interval", "hold", "mix", "targets", "points"}
        if unknown:
            raise ConfigError(f"random: unknown key {sorted(unknown)[0]!r} "
                              "(known: steps, interval, hold, mix, targets, points)")
        n = _num(r, "steps", 10, "random", integer=True)
        lo, hi = _pair(r.get("interval", [0.5, 2.0]), "interval")
        hlo, hhi = _pair(r.get("hold", [0.5, 2.0]), "hold")
        mix = r.get("mix") or {k: 1 for k in ("kill", "pause", "partition", "crash-point")}
        if not isinstance(mix, dict):
            raise ConfigError(f"random.mix must map fault kinds to weights, got {mix!r}")
        bad = [k for k in mix if k not in FAULT_KINDS]
        if bad:
            raise ConfigError(f"random.mix: unknown fault {bad[0]!r}")
        for k in mix:
            _num(mix, k, 0, "random.mix")
        if not any(mix.values()):
            raise ConfigError("random.mix: every weight is 0; give at least one fault a weight above 0")
        targets = r.get("targets") or ["leader", "follower", "minority", "random"]
        if not isinstance(targets, list) or any(x not in TARGETS for x in targets):
            raise ConfigError(f"random.targets: choose from {', '.join(TARGETS)}")
        points = r.get("points") or list(DEFAULT_POINTS)
        if not isinstance(points, list):
            raise ConfigError(f"random.points must be a list of crash points, got {points!r}")

        for pt in points:
            check_point(pt)
        kinds, weights = list(mix), [float(mix[k]) for k in mix]
        for i in range(n):
            t += rng.uniform(lo, hi)
            fault = rng.choices(kinds, weights)[0]
            target = rng.choice(targets)
            if fault == "wipe" and target not in ONE_REPLICA:
                target = "random"  # one replica at a time (no draw: the plan stays the seed's)
            hold = rng.uniform(hlo, hhi)
            d = {"fault": fault, "target": target, "hold": hold,
                                 "delay_ms": rng.choice([10, 50, 200])}
            if fault == "crash-point":
                d["point"] = rng.choice(points)
                d["nth"] = rng.randint(1, 5)
            steps.append(_step(d, t, f"random step {i + 1}"))
            t += hold  # one fault at a time: the next starts after this one is undone
    steps.sort(key=lambda s: s.at)
    final = data.get("final", "heal-and-restart-all")
    if final != "heal-and-restart-all":
        raise ConfigError("schedule key 'final' supports only heal-and-restart-all")
    workload = data.get("workload") or {}
    if not isinstance(workload, dict) or set(workload) - set(WORKLOAD_KEYS):
        raise ConfigError(f"schedule key 'workload' takes {', '.join(WORKLOAD_KEYS)}, got {workload!r}")
    for k in workload:
        _num(workload, k, 1, "workload", integer=True, least=1)
    return Schedule(seed=seed, steps=tuple(steps), final=final, workload=dict(workload))


def load(path: str | Path, seed: int | None = None) -> Schedule:
    return parse(yamlfile.load(path, "schedule file"), seed)


def resolve(target: str, members: list[int], leader: int | None, voters: list[int], rng: random.Random) -> list[int]:
    """The replicas a role names right now (deterministic given ``rng``'s state)."""
    if target and target[0].isdigit():
        return [int(x) for x in target.split(",")]
    followers = [s for s in voters if s != leader]
    q = len(voters) // 2 + 1
    if target == "leader":
        return [leader] if leader is not None else [rng.choice(voters)]
    if target == "follower":
        return [rng.choice(followers or voters)]
    if target == "minority":
        pool = sorted(followers) if leader is not None else sorted(voters)
        rng.shuffle(pool)
        return sorted(pool[: len(voters) - q]) or [rng.choice(voters)]
    if target == "majority":
        pool = sorted(voters)
        rng.shuffle(pool)
        return sorted(pool[:q])
    if target == "all":
        return sorted(members)
    return [rng.choice(sorted(members))]
