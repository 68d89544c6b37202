"""An experiment as data: what to run, how hard to push, and which faults to inject when.

``Experiment.load("configs/experiments/zk-reads.yaml")`` or ``Experiment.from_dict({...})``.
Every key is checked on load; an error is a one-line ``ConfigError`` naming the key. Lists in
``sweep`` multiply into points (one ensemble per ensemble shape, the other keys vary on it);
each point runs ``repetitions`` times.

    name: zk-reads
    service: zookeeper          # or broadcast
    voters: 3
    observers: 0
    read_fraction: 0.9          # share of ops that are reads (zookeeper: get; broadcast: ignored)
    value_size: 1024
    clients: 4                  # client actors, spread over the cluster's nodes
    in_flight: 8                # requests outstanding per client
    warmup: 1.0                 # seconds of load before measuring
    duration: 5.0               # seconds measured
    repetitions: 1
    bucket: 0.25                # seconds per bucket of the throughput-over-time series
    sweep: {voters: [3, 5, 7], read_fraction: [0, 0.5, 1.0]}
    faults:                     # seconds from the start of the measured window
      - {at: 2.0, action: kill, target: follower}
      - {at: 4.0, action: restart, target: killed}
    ensemble: {fsync: true}     # EnsembleConfig keys for the replicas
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zabray import yamlfile
from zabray.config import EnsembleConfig
from zabray.errors import ConfigError

CONFIG_DIR = Path(__file__).resolve().parent.parent.parent / "configs" / "experiments"

ACTIONS = {
    "kill": "crash the target replicas (disk kept)",
    "restart": "recover the target replicas from their disks",
    "pause": "SIGSTOP the target replicas",
    "resume": "SIGCONT the target replicas",
    "partition": "cut the target replicas off from the rest, both ways",
    "heal": "restore every link",
}
TARGETS = ("leader", "follower", "two-followers", "observer", "killed", "paused", "none")
SWEEPABLE = ("voters", "observers", "read_fraction", "value_size", "clients", "in_flight")


@dataclass(frozen=True, slots=True)
class FaultStep:
    """At ``at`` seconds into the measured window, do ``action`` to ``target``."""

    at: float
    action: str
    target: str | tuple[int, ...] = "none"

    def describe(self) -> str:
        tgt = self.target if isinstance(self.target, str) else ",".join(map(str, self.target))
        return f"{self.action} {tgt}".strip() if tgt != "none" else self.action


@dataclass(frozen=True, slots=True)
class Point:
    """One measured configuration (a row of the results per repetition)."""

    voters: int
    observers: int
    read_fraction: float
    value_size: int
    clients: int
    in_flight: int

    def label(self) -> str:
        return (f"n={self.voters}+{self.observers}o reads={self.read_fraction:.0%} "
                f"clients={self.clients}x{self.in_flight}")


@dataclass(frozen=True)
class Experiment:
    name: str = "experiment"
    service: str = "broadcast"
    voters: int = 3
    observers: int = 0
    read_fraction: float = 0.0
    value_size: int = 1024
    clients: int = 2
    in_flight: int = 8
    warmup: float = 1.0
    duration: float = 5.0
    repetitions: int = 1
    bucket: float = 0.25
    timeout: float = 10.0
    """Seconds an operation may take before the client records it as ``unknown``."""
    sweep: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    faults: tuple[FaultStep, ...] = ()
    ensemble: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    # -- loading ---------------------------------------------------------------------------------

    @classmethod
    def load(cls, source: str | os.PathLike[str] | dict[str, Any], **overrides: Any) -> Experiment:
        """From a YAML path, a name in ``configs/experiments/`` (without ``.yaml``) or a mapping."""
        if isinstance(source, dict):
            data = dict(source)
        else:
            path = Path(source)
            if not path.exists() and (CONFIG_DIR / f"{source}.yaml").exists():
                path = CONFIG_DIR / f"{source}.yaml"
            if not path.exists():
                known = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
                raise ConfigError(f"no experiment {source!r}: not a file, nor one of {CONFIG_DIR}'s: "
                                  f"{', '.join(known) or 'none'}")
            data = yamlfile.load(path, "experiment file") or {}
            if not isinstance(data, dict):
                raise ConfigError(f"experiment file {path} must hold a mapping of keys to values")
        data.update(overrides)
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Experiment:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown experiment key {unknown[0]!r}; known keys: {', '.join(sorted(known))}")
        v = dict(data)
        for k in ("voters", "observers", "value_size", "clients", "in_flight", "repetitions"):
            if k in v:
                v[k] = _int(k, v[k])
        for k in ("read_fraction", "warmup", "duration", "bucket", "timeout"):
            if k in v:
                v[k] = _num(k, v[k])
        for k in ("name", "service", "description"):
            if k in v and not isinstance(v[k], str):
                raise ConfigError(f"experiment key {k!r} must be a string, got {v[k]!r}")
        if "sweep" in v:
            v["sweep"] = _sweep(v["sweep"])
        if "faults" in v:
            v["faults"] = _faults(v["faults"])
        if "ensemble" in v:
            v["ensemble"] = _ensemble(v["ensemble"])
        exp = cls(**v)
        exp.validate()
        return exp

    def with_(self, **changes: Any) -> Experiment:
        """A copy with keys replaced, validated again (``exp.with_(duration=1, sweep={})``)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data.update(changes)
        if isinstance(data.get("faults"), tuple):
            data["faults"] = [dataclasses.asdict(s) if isinstance(s, FaultStep) else s for s in data["faults"]]
        return Experiment.from_dict(data)

    def validate(self) -> None:
        if not self.name or not all(c.isalnum() or c in "-_." for c in self.name):
            raise ConfigError(f"experiment key 'name' {self.name!r}: use letters, digits, '-', '_' or '.'")
        if self.service not in ("broadcast", "zookeeper"):
            raise ConfigError(f"experiment key 'service' must be 'broadcast' or 'zookeeper', got {self.service!r}")
        for p in self.points():
            if p.voters < 1:
                raise ConfigError(f"experiment key 'voters' must be at least 1, got {p.voters}")
            if p.observers < 0:
                raise ConfigError(f"experiment key 'observers' must be >= 0, got {p.observers}")
            if not 0.0 <= p.read_fraction <= 1.0:
                raise ConfigError(f"experiment key 'read_fraction' must be in [0, 1], got {p.read_fraction}")
            if p.value_size < 16:
                raise ConfigError(f"experiment key 'value_size' must be at least 16 bytes, got {p.value_size}")
            if p.clients < 1 or p.in_flight < 1:
                raise ConfigError("experiment keys 'clients' and 'in_flight' must be at least 1")
            if self.service == "broadcast" and p.read_fraction > 0:
                raise ConfigError("experiment key 'read_fraction': the broadcast service has no reads; "
                                  "use service: zookeeper or read_fraction: 0")
        if self.duration <= 0 or self.warmup < 0 or self.bucket <= 0 or self.timeout <= 0:
            raise ConfigError("experiment keys 'duration', 'bucket', 'timeout' must be > 0 and 'warmup' >= 0")
        if self.repetitions < 1:
            raise ConfigError(f"experiment key 'repetitions' must be at least 1, got {self.repetitions}")
        for i, s in enumerate(self.faults):
            if s.at > self.duration:
                raise ConfigError(f"experiment faults step {i + 1}: at={s.at} is after the measured "
                                  f"window ends (duration={self.duration})")

    # -- expansion -------------------------------------------------------------------------------

    def points(self) -> list[Point]:
        """Every configuration to measure, ensemble shapes outermost (each shape needs its own
        ensemble), in the order the sweep lists values."""
        base = {k: getattr(self, k) for k in SWEEPABLE}
        keys = sorted(self.sweep, key=lambda k: (k not in ("voters", "observers"), SWEEPABLE.index(k)))
        combos = itertools.product(*(self.sweep[k] for k in keys)) if keys else [()]
        return [Point(**{**base, **dict(zip(keys, c, strict=True))}) for c in combos]

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["sweep"] = {k: list(v) for k, v in self.sweep.items()}
        d["faults"] = [{"at": s.at, "action": s.action,
                        "target": s.target if isinstance(s.target, str) else list(s.target)} for s in self.faults]
        return d


def _int(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"experiment key {key!r} must be an integer, got {v!r}")
    return v


def _num(key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"experiment key {key!r} must be a number, got {v!r}")
    return float(v)


def _sweep(v: Any) -> dict[str, tuple[Any, ...]]:
    if not isinstance(v, dict):
        raise ConfigError("experiment key 'sweep' must map keys to lists of values")
    out: dict[str, tuple[Any, ...]] = {}
    for k, vals in v.items():
        if k not in SWEEPABLE:
            raise ConfigError(f"experiment key 'sweep.{k}' cannot be swept; sweepable: {', '.join(SWEEPABLE)}")
        if not isinstance(vals, (list, tuple)) or not vals:
            raise ConfigError(f"experiment key 'sweep.{k}' must be a non-empty list")
        conv = _num if k == "read_fraction" else _int
        out[k] = tuple(conv(f"sweep.{k}", x) for x in vals)
    return out


def _faults(v: Any) -> tuple[FaultStep, ...]:
    if v is None:
        return ()
    if not isinstance(v, (list, tuple)):
        raise ConfigError("experiment key 'faults' must be a list of {at, action, target}")
    steps = []
    for i, d in enumerate(v):
        where = f"experiment faults step {i + 1}"
        if isinstance(d, FaultStep):
            steps.append(d)
            continue
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: must be a mapping with at, action and target")
        bad = sorted(set(d) - {"at", "action", "target"})
        if bad:
            raise ConfigError(f"{where}: unknown key {bad[0]!r}; use at, action, target")
        if "at" not in d:
            raise ConfigError(f"{where}: needs 'at' (seconds into the measured window)")
        at = _num(f"faults[{i}].at", d["at"])
        if at < 0:
            raise ConfigError(f"{where}: 'at' must be >= 0")
        action = d.get("action")
        if action not in ACTIONS:
            raise ConfigError(f"{where}: action must be one of {', '.join(ACTIONS)}, got {action!r}")
        target = d.get("target", "none" if action == "heal" else None)
        if isinstance(target, list) and target and all(isinstance(x, int) and not isinstance(x, bool)
                                                       for x in target):
            target = tuple(target)
        elif isinstance(target, int) and not isinstance(target, bool):
            target = (target,)
        elif target not in TARGETS:
            raise ConfigError(f"{where}: target must be one of {', '.join(TARGETS)} or replica ids, got {target!r}")
        steps.append(FaultStep(at=at, action=action, target=target))
    return tuple(sorted(steps, key=lambda s: s.at))


def _ensemble(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ConfigError("experiment key 'ensemble' must be a mapping of ensemble config keys")

    EnsembleConfig.load(None, **{k: x for k, x in v.items() if k != "service"})  # names a bad key
    if "service" in v:
        raise ConfigError("experiment key 'ensemble.service': set 'service' at the top level")
    return dict(v)
