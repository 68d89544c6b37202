"""``zabray faults points | plan | run``: crash points, and fault schedules against an ensemble."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from zabray import yamlfile
from zabray.cli import common
from zabray.client.histories import HistoryRecorder
from zabray.errors import ConfigError

log = logging.getLogger(__name__)

def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("faults", help="crash points and fault schedules",
                       description="List crash points, show a schedule's plan, or run one under a write load.")
    fsub = p.add_subparsers(dest="faults_command", metavar="SUBCOMMAND")
    fsub.required = True
    pts = fsub.add_parser("points", help="every named crash point, a line each")
    pts.set_defaults(func=points)
    pl = fsub.add_parser("plan", help="the faults a schedule will apply (same seed, same plan)")
    pl.add_argument("schedule")
    pl.add_argument("--seed", type=int, default=None)
    pl.set_defaults(func=lambda a: common.guard(plan, a))
    run = fsub.add_parser("run", help="run a schedule against a named ensemble while a workload writes")
    run.add_argument("schedule")
    run.add_argument("--seed", type=int, default=None)
    common.add_name(run)
    run.add_argument("--address", default=None)
    run.add_argument("--in-flight", type=int, default=None)
    run.add_argument("--histories", action="store_true",
                     help="record client histories under RUN_DIR/histories (on a zookeeper ensemble, "
                          "also run the register workload) for `zabray check --histories`")
    run.set_defaults(func=lambda a: common.guard(run_schedule, a))


def points(args: argparse.Namespace) -> int:
    from zabray.replay.crashpoints import all_points

    for name, what in all_points().items():
        print(f"{name:<34} {what}")
    print("\nAppend @discovery, @synchronization, @broadcast or @election to fire only in that phase;"
          "\narm with nth=N to fire on the Nth pass (`Ensemble.arm_crash(sid, point, nth)`).")
    return 0


def plan(args: argparse.Namespace) -> int:
    from zabray.replay import schedule

    s = schedule.load(args.schedule, args.seed)
    print(f"seed {s.seed}: {len(s.steps)} steps over {s.duration:.1f} s, then {s.final}")
    for step in s.steps:
        print("  " + step.describe())
    return 0


def run_under_load(ens: Any, data: dict[str, Any], seed: int | None, in_flight: int | None = None,
                   on_progress: Any = None, histories: bool = False) -> tuple[dict[str, Any], Any, list[str]]:
    """Run schedule ``data`` against ``ens`` while a workload of the ensemble's service writes;
    then wait for every replica to catch up and check that every acknowledged write is on every
    replica. Returns (the schedule's progress, the workload's result, the problems found)."""
    from zabray.driver.workload import Workload, check_histories
    from zabray.replay import schedule

    s = schedule.parse(data, seed)
    ens.wait_for_leader(60)
    wcfg = s.workload
    trace_dir = None
    if ens.info.get("config", {}).get("trace", True) and ens.info.get("run_dir"):
        trace_dir = Path(ens.info["run_dir"]) / "trace"  # the client's rows, so `zabray check` sees them
    history = regs = None
    if histories:
        from zabray.driver.register_workload import RegisterWorkload

        run_dir = ens.info.get("run_dir")
        history = HistoryRecorder.for_run(run_dir, f"broadcast-{int(time.time())}")
        if ens.info.get("config", {}).get("service", "broadcast") == "zookeeper":
            regs = RegisterWorkload(ens, run_dir, client=f"registers-{int(time.time())}",
                                    sessions=int(wcfg.get("sessions", 6)), keys=int(wcfg.get("keys", 3))).start()
    if in_flight is None:
        in_flight = int(wcfg.get("in_flight", 100))
    wl = Workload(ens, in_flight=in_flight, size=int(wcfg.get("size", 1024)),
                  session=os.getpid(), trace_dir=trace_dir, history=history).start()
    try:
        started = ens.run_schedule(data, seed, wait=False)
        while True:
            prog = ens.schedule_progress()
            if on_progress is not None:
                on_progress(started, prog, wl.result)
            if not prog["running"]:
                break
            time.sleep(0.2)
        if not prog["error"]:
            ens.wait_for_leader(60)
    finally:
        result = wl.stop()
        if regs is not None:
            counts = regs.stop()
            log.info("register workload: %d ok, %d failed, %d unknown", counts["ok"], counts["fail"], counts["unknown"])
        if history is not None:
            history.close()
    if prog["error"]:
        return prog, result, []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st = ens.status()
        if all(x.alive for x in st) and len({x.applied for x in st}) == 1:
            break
        time.sleep(0.1)
    return prog, result, check_histories(ens.histories(), result.acked)


def run_schedule(args: argparse.Namespace) -> int:
    from zabray.replay import schedule

    data = yamlfile.load(args.schedule, "schedule file")
    s = schedule.parse(data, args.seed)  # validate before touching the ensemble
    if args.in_flight is not None and args.in_flight < 1:
        raise ConfigError(f"--in-flight must be at least 1, got {args.in_flight}")
    ens = common.connect(args)  # no cluster: says so, starts none; SIGTERM ends the run through its finally
    shown: list[int] = []  # the faults done when last shown; empty before the first line
    redraw = sys.stdout.isatty()  # a bar redrawn in place; in a file or pipe, a line per fault

    def show(started: dict[str, Any], prog: dict[str, Any], result: Any) -> None:
        done, total = prog["done"], max(prog["total"], 1)
        if not shown:
            print(f"running {len(started['plan'])} faults (seed {s.seed}) against {args.name!r} "
                  f"({ens.info.get('config', {}).get('service', 'broadcast')}) under load")
        elif not redraw and shown[0] == done:
            return
        shown[:] = [done]
        acked = sum(1 for r in result.records if r.outcome == "ok")
        line = f"[{'#' * int(30 * done / total):<30}] {done}/{total} faults, {acked:,} writes acknowledged"
        sys.stdout.write(f"\r  {line}" if redraw else f"  {line}\n")
        sys.stdout.flush()

    prog, result, problems = run_under_load(ens, data, args.seed, args.in_flight, show, histories=args.histories)
    if redraw:
        print()  # ends the bar's line
    if args.histories:
        print(f"histories in {ens.info.get('run_dir')}/histories; check them with: "
              f"zabray check --histories {ens.info.get('run_dir')}")
    print()
    if prog["error"]:
        print(f"the schedule stopped: {prog['error']}", file=sys.stderr)
        return 1
    for entry in prog["log"]:
        print(f"  {entry['fault']:<14} {entry['role']:<9} -> replicas {entry['replicas']}"
              + (f" at {entry['point']}" if entry.get("point") else ""))
    print(f"writes: {len(result.acked):,} acknowledged, {result.count('failed')} refused, "
          f"{result.count('unknown')} of unknown outcome (in flight when their replica lost its leader: each "
          "may or may not have committed; none is counted as acknowledged)")
    if problems:
        print("VIOLATIONS: " + "; ".join(problems[:10]))
        return 1
    print("every acknowledged write is on every replica, and all replicas agree")
    return 0
