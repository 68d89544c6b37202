"""``zabray faults points | plan | run``: crash points, and fault schedules against an ensemble."""

from __future__ import annotations

import argparse
import sys
import time

from zabray.commands import _guard


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("faults", help="crash points and fault schedules",
                       description="List crash points, show a schedule's plan, or run one under a write load.")
    fsub = p.add_subparsers(dest="faults_command", metavar="SUBCOMMAND")
    fsub.required = True
    pts = fsub.add_parser("points", help="every named crash point, a line each")
    pts.set_defaults(func=points)
    pl = fsub.add_parser("plan", help="the faults a schedule will apply (same seed, same plan)")
    pl.add_argument("schedule")
    pl.add_argument("--seed", type=int, default=None)
    pl.set_defaults(func=lambda a: _guard(plan, a))
    run = fsub.add_parser("run", help="run a schedule against a named ensemble while a workload writes")
    run.add_argument("schedule")
    run.add_argument("--seed", type=int, default=None)
    run.add_argument("--name", default="default")
    run.add_argument("--address", default=None)
    run.add_argument("--in-flight", type=int, default=None)
    run.add_argument("--histories", action="store_true",
                     help="record client histories under RUN_DIR/histories (on a zookeeper ensemble, "
                          "also run the register workload) for `zabray check --histories`")
    run.set_defaults(func=lambda a: _guard(run_schedule, a))


def points(args: argparse.Namespace) -> int:
    from actors.faultpoints import all_points

    for name, what in all_points().items():
        print(f"{name:<34} {what}")
    print("\nAppend @discovery, @synchronization, @broadcast or @election to fire only in that phase;"
          "\narm with nth=N to fire on the Nth pass (`Ensemble.arm_crash(sid, point, nth)`).")
    return 0


def plan(args: argparse.Namespace) -> int:
    from zabray import schedule

    s = schedule.load(args.schedule, args.seed)
    print(f"seed {s.seed}: {len(s.steps)} steps over {s.duration:.1f} s, then {s.final}")
    for step in s.steps:
        print("  " + step.describe())
    return 0


def run_schedule(args: argparse.Namespace) -> int:
    import yaml

    from zabray import schedule
    from zabray.commands import _address
    from zabray.ensemble import Ensemble
    from zabray.workload import Workload, check_histories

    data = yaml.safe_load(open(args.schedule).read())
    s = schedule.parse(data, args.seed)  # validate before touching the ensemble
    ens = Ensemble.connect(args.name, address=_address(args))
    ens.wait_for_leader(60)
    wcfg = s.workload
    run_dir = ens.info.get("run_dir")
    history = regs = None
    if getattr(args, "histories", False):
        from zabray.histories import HistoryRecorder
        from zabray.register_workload import RegisterWorkload

        history = HistoryRecorder.for_run(run_dir, f"broadcast-{int(time.time())}")
        if ens.info.get("config", {}).get("service", "zookeeper") == "zookeeper":
            regs = RegisterWorkload(ens, run_dir, client=f"registers-{int(time.time())}",
                                    sessions=int(wcfg.get("sessions", 6)), keys=int(wcfg.get("keys", 3))).start()
    wl = Workload(ens, in_flight=args.in_flight or int(wcfg.get("in_flight", 100)),
                  size=int(wcfg.get("size", 1024)), history=history).start()
    started = ens.run_schedule(data, args.seed, wait=False)
    print(f"running {len(started['plan'])} faults (seed {s.seed}) against {args.name!r} under load")
    while True:
        prog = ens.schedule_progress()
        done, total = prog["done"], max(prog["total"], 1)
        bar = "#" * int(30 * done / total)
        acked = sum(1 for r in wl.result.records if r.outcome == "ok")
        sys.stdout.write(f"\r  [{bar:<30}] {done}/{total} faults, {acked:,} writes acknowledged")
        sys.stdout.flush()
        if not prog["running"]:
            break
        time.sleep(0.5)
    print()
    if prog["error"]:
        wl.stop()
        if regs is not None:
            regs.stop()
        if history is not None:
            history.close()
        print(f"the schedule stopped: {prog['error']}", file=sys.stderr)
        return 1
    ens.wait_for_leader(60)
    result = wl.stop()
    if regs is not None:
        counts = regs.stop()
        print(f"register workload: {counts['ok']:,} ok, {counts['fail']:,} failed, {counts['unknown']:,} unknown")
    if history is not None:
        history.close()
        print(f"histories in {run_dir}/histories; check them with: zabray check --histories {run_dir}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st = ens.status()
        if all(x.alive for x in st) and len({x.applied for x in st}) == 1:
            break
        time.sleep(0.2)
    problems = check_histories(ens.histories(), result.acked)
    for entry in prog["log"]:
        print(f"  {entry['fault']:<14} {entry['role']:<9} -> replicas {entry['replicas']}"
              + (f" at {entry['point']}" if entry.get("point") else ""))
    print(f"writes: {len(result.acked):,} acknowledged, {result.count('failed')} refused, "
          f"{result.count('unknown')} of unknown outcome")
    if problems:
        print("VIOLATIONS: " + "; ".join(problems[:10]))
        return 1
    print("every acknowledged write is on every replica, and all replicas agree")
    return 0
