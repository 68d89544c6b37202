"""Scenario files (``configs/scenarios/*.yaml``), validated into frozen steps. Pure: no Ray.

A scenario replays one interleaving on a real ensemble, step by step, waiting on conditions
(never sleeping), and ends with the no-loss check and ``zabray check`` on its traces::

    name: zk-4394
    description: a COMMIT reaches a follower between NEWLEADER and UPTODATE
    replicas: 3
    config: {sync_limit: 500, trace_messages: true}   # overrides of the ensemble config
    max_elections: 4          # "no loop": elections any replica may begin (starts + iterations ended)
    proofs: [proposal-during-sync]                     # preconditions proven from the trace
    steps:
      - bind: {L: leader, F: follower}                 # names for sids, resolved now
      - write: {value: before, count: 20}
      - kill: F
      - hold: {as: H, src: L, dst: F, types: [NEWLEADER]}
      - restart: {sid: F, crash_points: ["recv:TRUNC"]}
      - wait: {held: {src: L, dst: F, types: NEWLEADER}, timeout: 30}
      - write: {value: during, as: W, replica: L}
      - expect: {durable: {zxid: W, sid: F}, not: true}
      - release: {hold: H, stop: true}
      - wait: {state: {sid: F, is: FOLLOWING}, timeout: 30}

Steps (one key each): ``bind``, ``hold``, ``release``, ``unhold``, ``kill``, ``restart``,
``partition``, ``heal``, ``write``, ``wait``, ``expect``. A sid is an int or a name bound
earlier; a zxid is an int, ``"epoch:counter"`` or a write's ``as`` name. Conditions (``wait``
and ``expect``; ``not: true`` negates): ``state`` {sid, is, epoch?}, ``down`` sid, ``alive``
sid, ``leader`` true, ``held`` {pattern, count?}, ``durable`` {zxid, sid}, ``epoch`` {sid,
current?, accepted?} (the epochs on its disk; at least one), ``acknowledged`` N,
``converged`` true, ``delivered`` {zxid, sid?} (that txn in sid's delivered history; without
sid, in any live replica's: ``not: true`` then says nobody delivered it); ``held`` with ``as: P``
names the highest zxid among the matching held packets (a write never acknowledged has no
other name). A ``write`` with ``may_fail: true`` reports writes that fail instead of
failing the step (exported simulations: writes the simulation did not see acknowledged). An
optional top-level ``notes`` (a string or a list) says what the scenario does not reproduce.
A bad file raises ``ConfigError`` naming the step and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zabray import yamlfile
from zabray.errors import ConfigError
from zabray.replay.crashpoints import crash_points
from zabray.replay.holds import parse_zxid, pattern
from zabray.replay.proofs import PROOFS

STATES = ("LEADING", "FOLLOWING", "LOOKING", "OBSERVING")
ROLES = ("leader", "follower")
CONDITIONS = ("state", "down", "alive", "leader", "held", "durable", "epoch", "acknowledged", "converged",
              "delivered")
STEP_KINDS = ("bind", "hold", "release", "unhold", "kill", "restart", "partition", "heal", "write",
              "wait", "expect")
TOP_KEYS = ("name", "description", "replicas", "config", "max_elections", "proofs", "steps", "bug", "exact",
            "notes")

Sid = int | str
"""A replica: its sid, or a name a ``bind`` step gave it."""
ZxidRef = int | str
"""A zxid: an int, or a write's ``as`` name (``"epoch:counter"`` is parsed to an int)."""


def _show(v: Any) -> str:
    if isinstance(v, list):
        return ",".join(_show(x) for x in v) if all(not isinstance(x, list) for x in v) else \
            " | ".join(_show(x) for x in v)
    if isinstance(v, tuple):
        return f"{v[0]}#{v[1]}" if len(v) == 2 else str(v)
    return str(v)


def _args(args: tuple[tuple[str, Any], ...]) -> str:
    return " ".join(f"{k}={_show(v)}" for k, v in args if not (k in ("background", "fresh", "may_fail") and v is False))


@dataclass(frozen=True, slots=True)
class Condition:
    what: str
    args: tuple[tuple[str, Any], ...]
    negate: bool = False

    def arg(self, key: str, default: Any = None) -> Any:
        return dict(self.args).get(key, default)

    def describe(self) -> str:
        return f"{'not ' if self.negate else ''}{self.what}({_args(self.args)})"


@dataclass(frozen=True, slots=True)
class Step:
    """One step: ``kind`` and its validated arguments (``args``, sorted by key)."""

    index: int
    kind: str
    args: tuple[tuple[str, Any], ...]
    condition: Condition | None = None
    timeout: float = 30.0

    def arg(self, key: str, default: Any = None) -> Any:
        return dict(self.args).get(key, default)

    def describe(self) -> str:
        if self.condition is not None:
            extra = f" (timeout {self.timeout:g} s)" if self.kind == "wait" else ""
            return f"{self.kind} {self.condition.describe()}{extra}"
        return f"{self.kind} {_args(self.args)}".rstrip()


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    replicas: int
    config: tuple[tuple[str, Any], ...]
    max_elections: int
    proofs: tuple[str, ...]
    steps: tuple[Step, ...]
    bug: str = ""
    exact: bool = False
    notes: tuple[str, ...] = ()
    """What the scenario does not reproduce (e.g. an exported simulation's message order); informative."""


class _Where:
    def __init__(self, name: str, index: int, kind: str, replicas: int) -> None:
        self.text = f"scenario {name!r}: step {index + 1} ({kind})"
        self.replicas = replicas

    def bad(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"{self.text}: {key}: {why}")


def _sid(v: Any, names: set[str], w: _Where, key: str) -> Sid:
    if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= w.replicas:
        return int(v)
    if isinstance(v, str) and v in names:
        return v
    raise w.bad(key, f"expected a sid (1 to {w.replicas}) or a name bound earlier "
                     f"({', '.join(sorted(names)) or 'none bound'}), got {v!r}")


def _sids(v: Any, names: set[str], w: _Where, key: str) -> list[Sid] | None:
    if v is None:
        return None
    items = v if isinstance(v, list) else [v]
    if not items:
        raise w.bad(key, "an empty list")
    return [_sid(x, names, w, key) for x in items]


def _zxid(v: Any, writes: set[str], w: _Where, key: str) -> ZxidRef:
    if isinstance(v, str) and v in writes:
        return v
    try:
        return parse_zxid(v, key)
    except ConfigError:
        raise w.bad(key, f"expected a zxid ('epoch:counter'), or a write named earlier "
                         f"({', '.join(sorted(writes)) or 'none named'}), got {v!r}") from None


def _keys(d: dict[str, Any], allowed: tuple[str, ...], w: _Where, required: tuple[str, ...] = ()) -> None:
    for k in d:
        if k not in allowed:
            raise w.bad(str(k), f"unknown key (expected {', '.join(allowed)})")
    for k in required:
        if k not in d:
            raise w.bad(k, "missing")


def _mapping(v: Any, w: _Where, key: str) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise w.bad(key, f"expected a mapping, got {v!r}")
    return v


def _pattern_args(d: dict[str, Any], names: set[str], writes: set[str], w: _Where) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in ("src", "dst"):
        if d.get(k) is not None:
            out[k] = _sids(d[k], names, w, k)
    if d.get("types") is not None:
        try:
            pattern(types=d["types"])
        except ConfigError as e:
            raise w.bad("types", str(e).split(": ", 1)[-1]) from None
        out["types"] = [d["types"]] if isinstance(d["types"], str) else list(d["types"])
    if d.get("zxids") is not None:
        z = d["zxids"]
        pair = z if isinstance(z, list) else [z, z]
        if len(pair) != 2:
            raise w.bad("zxids", f"expected one zxid or [low, high], got {z!r}")
        out["zxids"] = [_zxid(x, writes, w, "zxids") for x in pair]
    return out


def _condition(d: Any, names: set[str], writes: set[str], w: _Where, timeout_ok: bool) -> tuple[Condition, float]:
    d = _mapping(d, w, "condition")
    keys = [k for k in d if k in CONDITIONS]
    extra = [k for k in d if k not in CONDITIONS and k not in ("not", "timeout")]
    if extra:
        raise w.bad(str(extra[0]), f"unknown key (conditions: {', '.join(CONDITIONS)}; also not, timeout)")
    if len(keys) != 1:
        raise w.bad("condition", f"expected exactly one of {', '.join(CONDITIONS)}, got {keys or 'none'}")
    what = keys[0]
    v = d[what]
    timeout = d.get("timeout", 30.0)
    if "timeout" in d and not timeout_ok:
        raise w.bad("timeout", "only a wait has a timeout (an expect is checked at once)")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise w.bad("timeout", f"expected a positive number of seconds, got {timeout!r}")
    negate = d.get("not", False)
    if not isinstance(negate, bool):
        raise w.bad("not", f"expected true or false, got {negate!r}")
    args: dict[str, Any]
    if what == "state":
        m = _mapping(v, w, "state")
        _keys(m, ("sid", "is", "epoch"), w, ("sid", "is"))
        states = m["is"] if isinstance(m["is"], list) else [m["is"]]
        if not states or any(x not in STATES for x in states):
            raise w.bad("is", f"expected one of {', '.join(STATES)} or a list of them, got {m['is']!r}")
        if "epoch" in m and (isinstance(m["epoch"], bool) or not isinstance(m["epoch"], int)):
            raise w.bad("epoch", f"expected an integer, got {m['epoch']!r}")
        args = {"sid": _sid(m["sid"], names, w, "sid"), "is": m["is"], **({"epoch": m["epoch"]} if "epoch" in m else {})}
    elif what in ("down", "alive"):
        args = {"sid": _sid(v, names, w, what)}
    elif what in ("leader", "converged"):
        if v is not True:
            raise w.bad(what, f"expected true, got {v!r}")
        args = {}
    elif what == "held":
        m = _mapping(v, w, "held")
        _keys(m, ("src", "dst", "types", "zxids", "count", "as"), w)
        args = _pattern_args(m, names, writes, w)
        count = m.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise w.bad("count", f"expected a positive integer, got {count!r}")
        args["count"] = count
        if "as" in m:  # names the highest zxid held: a write never acknowledged has no other name
            if not isinstance(m["as"], str) or not m["as"].isidentifier():
                raise w.bad("as", f"expected a name, got {m['as']!r}")
            if negate:
                raise w.bad("as", "names a zxid the held packets carry, so not with not: true")
            writes.add(m["as"])
            args["as"] = m["as"]
    elif what == "durable":
        m = _mapping(v, w, "durable")
        _keys(m, ("zxid", "sid"), w, ("zxid", "sid"))
        args = {"zxid": _zxid(m["zxid"], writes, w, "zxid"), "sid": _sid(m["sid"], names, w, "sid")}
    elif what == "epoch":
        m = _mapping(v, w, "epoch")
        _keys(m, ("sid", "current", "accepted"), w, ("sid",))
        if "current" not in m and "accepted" not in m:
            raise w.bad("epoch", "expected current, accepted or both")
        args = {"sid": _sid(m["sid"], names, w, "sid")}
        for k in ("current", "accepted"):
            if k in m:
                if isinstance(m[k], bool) or not isinstance(m[k], int) or m[k] < 0:
                    raise w.bad(k, f"expected an epoch (an integer >= 0), got {m[k]!r}")
                args[k] = m[k]
    elif what == "delivered":
        m = _mapping(v, w, "delivered")
        _keys(m, ("zxid", "sid"), w, ("zxid",))
        args = {"zxid": _zxid(m["zxid"], writes, w, "zxid")}
        if "sid" in m:
            args["sid"] = _sid(m["sid"], names, w, "sid")
    else:  # acknowledged
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise w.bad("acknowledged", f"expected a number of writes, got {v!r}")
        args = {"count": v}
    return Condition(what, tuple(sorted(args.items())), negate), float(timeout)


def _step(i: int, raw: Any, name: str, replicas: int, names: set[str], writes: set[str], holds: set[str]) -> Step:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ConfigError(f"scenario {name!r}: step {i + 1}: expected a mapping with one key "
                          f"({', '.join(STEP_KINDS)}), got {raw!r}")
    kind, v = next(iter(raw.items()))
    w = _Where(name, i, str(kind), replicas)
    if kind not in STEP_KINDS:
        raise ConfigError(f"scenario {name!r}: step {i + 1}: unknown step {kind!r} (expected {', '.join(STEP_KINDS)})")
    args: dict[str, Any] = {}
    if kind in ("wait", "expect"):
        cond, timeout = _condition(v, names, writes, w, kind == "wait")
        return Step(i, kind, (), cond, timeout)
    if kind == "bind":
        m = _mapping(v, w, "bind")
        if not m:
            raise w.bad("bind", "names nothing")
        for k, role in m.items():
            if not isinstance(k, str) or not k.isidentifier():
                raise w.bad(str(k), "a name must be an identifier")
            if role not in ROLES and not (isinstance(role, int) and not isinstance(role, bool)):
                raise w.bad(k, f"expected leader, follower or a sid, got {role!r}")
            names.add(k)
        args = dict(m)
    elif kind == "hold":
        m = _mapping(v, w, "hold")
        _keys(m, ("as", "src", "dst", "types", "zxids"), w)
        args = _pattern_args(m, names, writes, w)
        if "as" in m:
            if not isinstance(m["as"], str) or not m["as"].isidentifier():
                raise w.bad("as", f"expected a name, got {m['as']!r}")
            holds.add(m["as"])
            args["as"] = m["as"]
    elif kind in ("release", "unhold"):
        m = _mapping(v, w, kind)
        _keys(m, ("hold", "count", "src", "dst", "stop") if kind == "release" else ("hold", "release"), w)
        if "hold" in m:
            if m["hold"] not in holds:
                raise w.bad("hold", f"expected a hold named earlier ({', '.join(sorted(holds)) or 'none'}), got {m['hold']!r}")
            args["hold"] = m["hold"]
        for k in ("src", "dst"):
            if k in m:
                args[k] = _sid(m[k], names, w, k)
        if "count" in m:
            if isinstance(m["count"], bool) or not isinstance(m["count"], int) or m["count"] < 1:
                raise w.bad("count", f"expected a positive integer, got {m['count']!r}")
            args["count"] = m["count"]
        for k in ("stop", "release"):
            if k in m:
                if not isinstance(m[k], bool):
                    raise w.bad(k, f"expected true or false, got {m[k]!r}")
                args[k] = m[k]
    elif kind == "kill":
        args = {"sid": _sid(v, names, w, "kill")}
    elif kind == "restart":
        m = v if isinstance(v, dict) else {"sid": v}
        _keys(m, ("sid", "fresh", "crash_points"), w, ("sid",))
        args = {"sid": _sid(m["sid"], names, w, "sid"), "fresh": bool(m.get("fresh", False))}
        if m.get("crash_points"):
            try:
                args["crash_points"] = [(c.point, c.nth) for c in crash_points(m["crash_points"])]
            except ConfigError as e:
                raise w.bad("crash_points", str(e)) from None
    elif kind == "partition":
        if not isinstance(v, list) or len(v) < 2 or not all(isinstance(g, list) and g for g in v):
            raise w.bad("partition", f"expected two or more non-empty lists of sids, got {v!r}")
        args = {"groups": [[_sid(s, names, w, "partition") for s in g] for g in v]}
    elif kind == "heal":
        if v not in (None, True, {}):
            raise w.bad("heal", f"takes no arguments, got {v!r}")
    else:  # write
        m = v if isinstance(v, dict) else {"value": v}
        _keys(m, ("value", "count", "replica", "as", "background", "may_fail"), w, ("value",))
        if not isinstance(m["value"], str):
            raise w.bad("value", f"expected a string, got {m['value']!r}")
        count = m.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise w.bad("count", f"expected a positive integer, got {count!r}")
        args = {"value": m["value"], "count": count, "background": bool(m.get("background", False))}
        if m.get("may_fail"):
            args["may_fail"] = True
        if "replica" in m:
            args["replica"] = _sid(m["replica"], names, w, "replica")
        if "as" in m:
            if not isinstance(m["as"], str) or not m["as"].isidentifier():
                raise w.bad("as", f"expected a name, got {m['as']!r}")
            writes.add(m["as"])
            args["as"] = m["as"]
    return Step(i, str(kind), tuple(sorted(args.items())))


def parse(data: Any, where: str = "scenario") -> Scenario:
    """Validate a scenario mapping; ``ConfigError`` with one line naming the step and key."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a scenario is a mapping with name, replicas and steps")
    for k in data:
        if k not in TOP_KEYS:
            raise ConfigError(f"{where}: unknown key {k!r} (expected {', '.join(TOP_KEYS)})")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: name: expected a non-empty string")
    replicas = data.get("replicas", 3)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigError(f"scenario {name!r}: replicas: expected a positive integer, got {replicas!r}")
    config = data.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"scenario {name!r}: config: expected a mapping of config keys")
    max_el = data.get("max_elections", 5)
    if isinstance(max_el, bool) or not isinstance(max_el, int) or max_el < 1:
        raise ConfigError(f"scenario {name!r}: max_elections: expected a positive integer, got {max_el!r}")
    proofs = data.get("proofs") or []
    if not isinstance(proofs, list) or not all(isinstance(p, str) for p in proofs):
        raise ConfigError(f"scenario {name!r}: proofs: expected a list of proof names")
    unknown = [p for p in proofs if p not in PROOFS]
    if unknown:
        raise ConfigError(f"scenario {name!r}: proofs: unknown proof {unknown[0]!r} (expected {', '.join(PROOFS)})")
    raw = data.get("steps")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"scenario {name!r}: steps: expected a non-empty list")
    names: set[str] = set()
    writes: set[str] = set()
    holds: set[str] = set()
    steps = tuple(_step(i, s, name, replicas, names, writes, holds) for i, s in enumerate(raw))
    notes = data.get("notes") or []
    notes = [notes] if isinstance(notes, str) else notes
    if not isinstance(notes, list) or not all(isinstance(x, str) for x in notes):
        raise ConfigError(f"scenario {name!r}: notes: expected a string or a list of strings")
    return Scenario(name, str(data.get("description", "")), replicas, tuple(sorted(config.items())), max_el,
                    tuple(proofs), steps, str(data.get("bug", "")), bool(data.get("exact", False)), tuple(notes))


def load(path: str | Path) -> Scenario:
    p = Path(path)
    return parse(yamlfile.load(p, "scenario"), f"scenario {p.name}")
