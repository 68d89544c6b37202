"""``zabray sim``: explore Zab under a seeded scheduler from the shell."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zabray.errors import ConfigError

if TYPE_CHECKING:  # imported where a run starts: every other `zabray` command starts faster
    from zabray.sim.simulator import SimOptions, SimResult, Simulation
    from zabray.sim.zksim import ZkSimOptions


def register(sub: argparse._SubParsersAction) -> None:
    from zabray.sim.options import FAULTS

    p = sub.add_parser(
        "sim",
        help="run the deterministic simulator",
        description="Run many replicas of the Zab core in one process under a seeded scheduler that "
        "reorders, drops channels, crashes, restarts and partitions them, checking Zab's properties "
        "after every step. Many seeds give a summary; one seed with --timeline shows what happened.",
    )
    p.add_argument("--replicas", type=int, default=3, help="voters (default 3)")
    p.add_argument("--observers", type=int, default=0)
    p.add_argument("--seeds", type=int, default=100, help="how many schedules (default 100)")
    p.add_argument("--seed", type=int, default=0, help="first seed (or the only one with --timeline)")
    p.add_argument("--steps", type=int, default=3000, help="random steps per schedule before healing")
    p.add_argument("--faults", default=",".join(f for f in FAULTS if f not in ("drop", "wipe")),
                   help=f"comma list of {', '.join(FAULTS)}, or 'none' (default: all but drop and wipe)")
    p.add_argument("--fault-rate", type=float, default=0.01, help="share of steps that inject a fault")
    p.add_argument("--timeline", action="store_true", help="print the timeline of one seed")
    p.add_argument("--trace-dir", type=Path, help="write each schedule's trace (JSON lines) under this dir")
    p.add_argument("--crash-points", action="store_true", help="list every crash point hit")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--service", choices=("broadcast", "zookeeper"), default="broadcast",
                   help="what the replicas run: plain broadcast (default), or the ZooKeeper service with "
                   "simulated client sessions (checked: trees, session order, reads, watches, ephemerals)")
    p.add_argument("--clients", type=int, default=3, help="simulated client sessions (--service zookeeper)")
    p.add_argument("--eager-clients", action="store_true",
                   help="clients send calls right behind their connect, as the Java client's Netty socket "
                   "does (--service zookeeper)")
    p.add_argument("--read-only-clients", type=float, default=0.0, metavar="SHARE",
                   help="replicas serve read-only sessions when cut off from their quorum, and this share of "
                   "the clients (0..1) accept one (--service zookeeper)")
    p.add_argument("--read-only-after-ms", type=int, default=2000, metavar="MS",
                   help="how long a replica looks for a leader before it serves read-only sessions "
                   "(default 2000, ZooKeeper's grace period)")
    p.add_argument("--export-scenario", type=Path, metavar="FILE",
                   help="run --seed only and write its faults and writes as a scenario for a real ensemble "
                   "(`zabray scenario run FILE`); what cannot be carried over is listed in its notes")
    p.set_defaults(func=run)


def _options(args: argparse.Namespace) -> SimOptions:
    from zabray.sim.options import FAULTS, SimOptions

    faults = () if args.faults in ("", "none") else tuple(f.strip() for f in args.faults.split(","))
    bad = [f for f in faults if f not in FAULTS]
    if bad:
        raise ConfigError(f"unknown fault {bad[0]!r}; choose from {', '.join(FAULTS)} or 'none'")
    if args.replicas < 1 or args.observers < 0 or args.seeds < 1 or args.steps < 0:
        raise ConfigError("--replicas and --seeds must be >= 1, --observers and --steps >= 0")
    if not 0.0 <= args.fault_rate <= 1.0:
        raise ConfigError(f"--fault-rate is a share of steps, from 0 to 1; got {args.fault_rate:g}")
    if args.jobs < 1:
        raise ConfigError("--jobs must be >= 1")
    if args.service == "zookeeper" and args.clients < 1:
        raise ConfigError("--clients must be >= 1")
    return SimOptions(voters=args.replicas, observers=args.observers, steps=args.steps, faults=faults,
                      fault_rate=args.fault_rate)


def _make(seed: int, opts: SimOptions, timeline: bool, zk: ZkSimOptions | None,
          trace_writer: Any = None) -> Simulation:

    from zabray.sim.simulator import Simulation
    from zabray.sim.zksim import ZkSimulation

    if zk is not None:
        return ZkSimulation(seed, dataclasses.replace(opts), zk, timeline=timeline, trace_writer=trace_writer)
    return Simulation(seed, opts, timeline=timeline, trace_writer=trace_writer)


def _one(seed: int, opts: SimOptions, trace_dir: str | None, timeline: bool,
         zk: ZkSimOptions | None = None) -> SimResult:
    if trace_dir is None:
        return _make(seed, opts, timeline, zk).run()
    run_dir = Path(trace_dir) / f"sim-{seed}" / "trace"
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "sim.jsonl", "w") as fh:
        def write(row: dict[str, object]) -> None:
            fh.write(json.dumps(row, separators=(",", ":")) + "\n")

        return _make(seed, opts, timeline, zk, write).run()


def run(args: argparse.Namespace) -> int:
    from zabray.sim.zksim import ZkSimOptions

    opts = _options(args)
    if args.export_scenario is not None:
        return _export(args, opts)
    zk = None
    if args.service == "zookeeper":
        if not 0.0 <= args.read_only_clients <= 1.0 or args.read_only_after_ms < 0:
            raise ConfigError("--read-only-clients must be between 0 and 1, --read-only-after-ms at least 0")
        zk = ZkSimOptions(clients=args.clients, eager=args.eager_clients, read_only=args.read_only_clients > 0,
                          read_only_clients=args.read_only_clients, read_only_after_ms=args.read_only_after_ms)
    trace_dir = str(args.trace_dir) if args.trace_dir else None
    if trace_dir is not None:
        try:
            Path(trace_dir).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"--trace-dir: cannot create {trace_dir}: {e.strerror or e}") from None
    started = time.monotonic()
    if args.timeline:
        result = _one(args.seed, opts, trace_dir, True, zk)
        print("\n".join(result.timeline))
        print()
        results = [result]
    else:
        seeds = range(args.seed, args.seed + args.seeds)
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as pool:
                results = list(pool.map(_one, seeds, [opts] * len(seeds), [trace_dir] * len(seeds),
                                        [False] * len(seeds), [zk] * len(seeds), chunksize=16))
        else:
            results = [_one(s, opts, trace_dir, False, zk) for s in seeds]
    elapsed = time.monotonic() - started
    summary = _summarize(results, opts, elapsed)
    summary["service"] = args.service
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print(summary, results, args)
    return 1 if summary["violations"] else 0


def _summarize(results: list[SimResult], opts: SimOptions, elapsed: float) -> dict[str, object]:

    points: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    for r in results:
        points.update(r.crash_points)
        faults.update(r.faults)
    bad = [r for r in results if not r.ok]
    return {
        "voters": opts.voters,
        "observers": opts.observers,
        "faults_enabled": list(opts.faults),
        "schedules": len(results),
        "seeds": [results[0].seed, results[-1].seed],
        "steps": sum(r.steps for r in results),
        "ticks": sum(r.ticks for r in results),
        "faults": dict(sorted(faults.items())),
        "crash_points": len(points),
        "crash_point_counts": dict(points.most_common()),
        "leaders_established": sum(r.elections for r in results),
        "proposals": sum(r.proposals for r in results),
        "txns_committed": sum(r.committed for r in results),
        "writes_acknowledged": sum(r.acked for r in results),
        "violations": [{"seed": r.seed, "property": r.violations[0].prop, "detail": r.violations[0].detail,
                        "step": r.violations[0].step} for r in bad],
        "service_counts": dict(sum((Counter(r.service) for r in results), Counter())),
        "elapsed_s": round(elapsed, 2),
    }


def _print(s: dict[str, Any], results: list[SimResult], args: argparse.Namespace) -> None:

    out = sys.stdout
    faults = s["faults"] or {}
    seeds = s["seeds"]
    print(f"zabray sim: {s['voters']} voters + {s['observers']} observers, "
          f"faults: {', '.join(s['faults_enabled']) or 'none'}, seeds {seeds[0]}..{seeds[1]}", file=out)
    rows = [
        ("schedules", f"{s['schedules']:,}"),
        ("steps", f"{s['steps']:,}  ({s['ticks']:,} ticks)"),
        ("faults injected", "  ".join(f"{k} {v:,}" for k, v in faults.items()) or "none"),
        ("crash points hit", f"{s['crash_points']:,} distinct"),
        ("leaders established", f"{s['leaders_established']:,}"),
        ("txns committed", f"{s['txns_committed']:,}  (proposals {s['proposals']:,}, "
                           f"client writes acknowledged {s['writes_acknowledged']:,})"),
    ]
    if s.get("service") == "zookeeper":
        c = s["service_counts"]
        rows.append(("client calls", f"{c.get('calls', 0):,} ({c.get('ok', 0):,} ok), sessions {c.get('sessions', 0):,}, "
                     f"moves {c.get('moves', 0):,}, watches fired {c.get('watches', 0):,}, "
                     f"expired {c.get('expired', 0):,}, clients vanished {c.get('vanished', 0):,}"))
        if args.read_only_clients:
            rows.append(("read-only", f"{c.get('read_only', 0):,} connections, {c.get('read_only_reads', 0):,} reads "
                         f"served, {c.get('not_read_only', 0):,} writes refused NOT_READONLY"))
    for k, v in rows:
        print(f"  {k:<20} {v}", file=out)
    if args.crash_points:
        print("  crash points (replica role/phase/last event/what was not yet durable):", file=out)
        for p, n in s["crash_point_counts"].items():
            print(f"    {n:6d}  {p}", file=out)
    bad = s["violations"]
    if not bad:
        print(f"  {'violations':<20} none", file=out)
    else:
        print(f"  {'violations':<20} {len(bad)} schedule(s):", file=out)
        for v in bad[:20]:
            print(f"    seed {v['seed']}: {v['property']} at step {v['step']}: {v['detail']}", file=out)
        v0 = bad[0]
        service = ""
        if s.get("service") == "zookeeper":
            service = f"--service zookeeper --clients {args.clients} " + ("--eager-clients " if args.eager_clients else "")
            if args.read_only_clients:
                service += (f"--read-only-clients {args.read_only_clients} "
                            f"--read-only-after-ms {args.read_only_after_ms} ")
        print(f"  replay: zabray sim {service}--replicas {s['voters']} --observers {s['observers']} "
              f"--faults {','.join(s['faults_enabled']) or 'none'} --fault-rate {args.fault_rate} "
              f"--steps {args.steps} --seed {v0['seed']} --timeline", file=out)
    rate = s["schedules"] / max(s["elapsed_s"], 1e-9)
    print(f"  {'elapsed':<20} {s['elapsed_s']} s ({rate:,.0f} schedules/s)", file=out)


def _export(args: argparse.Namespace, opts: SimOptions) -> int:
    """``--export-scenario FILE``: one seed's schedule as a scenario; exit 1 if it violated a property."""
    from zabray.sim.export import write

    if args.service != "broadcast":
        raise ConfigError("--export-scenario: scenarios drive the broadcast service; drop --service zookeeper")
    argv = (f"zabray sim --seed {args.seed} --replicas {args.replicas} --steps {args.steps} "
            f"--faults {','.join(opts.faults) or 'none'} --fault-rate {args.fault_rate:g}")
    try:
        ex = write(args.export_scenario, args.seed, opts, argv=argv)
    except OSError as e:
        raise ConfigError(f"--export-scenario: cannot write {args.export_scenario}: {e.strerror or e}") from None
    r = ex.result
    print(f"seed {args.seed}: {r.steps} steps, {'no violation' if r.ok else f'violation {r.violations[0].prop}'}; "
          f"exported {len(ex.scenario['steps'])} scenario steps to {args.export_scenario}: {ex.kills} kill(s), "
          f"{ex.restarts} restart(s), {ex.partitions} partition(s), {ex.heals} heal(s), {ex.writes} write(s)")
    print(f"run it: zabray scenario run {args.export_scenario}")
    return 0 if r.ok else 1
