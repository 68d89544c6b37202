"""``zabray experiment list | validate CONFIG | run CONFIG [--set key=value ...]``.

Exit codes: 0 done, 1 the run failed (no quorum, a replica would not start), 2 a bad config.
"""

from __future__ import annotations

import argparse
from typing import Any

from zabray import yamlfile
from zabray.cli import common
from zabray.errors import ConfigError

SUMMARY = ["voters", "observers", "read_fraction", "clients", "in_flight", "rep", "throughput",
           "latency_p50_ms", "latency_p99_ms", "client_cpu_max", "replica_cpu_max", "limit"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help="run a scaling experiment (configs/experiments/*.yaml)",
                       description="Run a scaling experiment: client actors on the cluster's nodes load an "
                                   "ensemble over TCP; results go to RUN_DIR/results.parquet.")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    v = verbs.add_parser("list", help="the experiments in configs/experiments")
    v.set_defaults(func=lambda a: common.guard(_list, a))
    v = verbs.add_parser("validate", help="check an experiment file and show its points")
    v.add_argument("config", help="YAML path or a name in configs/experiments")
    v.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a key (YAML value)")
    v.set_defaults(func=lambda a: common.guard(_validate, a))
    v = verbs.add_parser("run", help="run an experiment and print its results")
    v.add_argument("config", help="YAML path or a name in configs/experiments")
    v.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a key (YAML value)")
    v.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS or a local one)")
    v.add_argument("--out", default="runs/experiments", help="where run directories go")
    v.add_argument("--ensemble", default=None, metavar="NAME",
                   help="load a running ensemble (zabray up --name NAME) instead of starting one per size")
    v.add_argument("--no-progress", action="store_true")
    v.add_argument("--actor-bars", action="store_true", help="also a Ray tqdm bar inside each client actor")
    v.add_argument("--keep-data", action="store_true",
                   help="keep the replicas' data directories (deleted by default: each ensemble preallocates "
                        "hundreds of MB of log); results and traces are kept either way")
    v.set_defaults(func=lambda a: common.guard(_run, a))


def _overrides(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ConfigError(f"--set {item!r}: write KEY=VALUE, e.g. --set duration=2")
        out[key] = yamlfile.loads(value, f"--set {key}")
    return out


def _load(args: argparse.Namespace) -> Any:
    from zabray.experiments.spec import Experiment

    return Experiment.load(args.config, **_overrides(args.set))


def _list(args: argparse.Namespace) -> int:
    from zabray.experiments.spec import CONFIG_DIR, Experiment

    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        exp = Experiment.load(path)
        print(f"{path.stem:<20} {exp.service:<10} {len(exp.points()):>3} points  {path}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    exp = _load(args)
    print(f"{exp.name}: service {exp.service}, {len(exp.points())} points x {exp.repetitions} repetitions, "
          f"{exp.warmup:g}+{exp.duration:g} s each")
    for p in exp.points():
        print(f"  {p.label()}")
    for s in exp.faults:
        print(f"  at {s.at:g} s: {s.describe()}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from zabray.experiments.runner import run

    exp = _load(args)
    if args.ensemble is not None:
        common.require_cluster(common.address_of(args))
    res = run(exp, address=args.address, out=args.out, progress=not args.no_progress,
              ensemble=args.ensemble, actor_bars=args.actor_bars, keep_data=args.keep_data)
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.precision", 2):
        print(res.df[[c for c in SUMMARY if c in res.df]].to_string(index=False))
        print()
        print(res.placement.assign(node=res.placement.node.str[:10]).to_string(index=False))
        if not res.marks.empty:
            print()
            cols = ["point", "rep", "scheduled", "at", "what", "replicas", "stall_s", "recovered_s"]
            print(res.marks[[c for c in cols if c in res.marks]].to_string(index=False, float_format="{:.2f}".format))
            print("(scheduled, at: s into the window when a step was due and when it began; recovered_s: until "
                  "the rate was back to 90% of before, NaN if not by the next step)")
    print(f"\nresults: {res.run_dir}/results.parquet; check the traces with: zabray check {' '.join(res.runs)}")
    return 0
