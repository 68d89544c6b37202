"""``zabray scenario run FILE`` and ``zabray scenario validate FILE...``: replay a scenario
(``configs/scenarios/*.yaml``) on an ensemble started for it, one printed line per step.

Exit codes: 0 the scenario ran and every verdict passed (no loss, no loop, its proofs, and
``zabray check`` unless ``--no-check``), 1 a step failed or a verdict did not, 2 a bad file.
"""

from __future__ import annotations

import argparse
import sys

from zabray.cli import common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scenario", help="replay a scripted interleaving (holds, crashes, writes) on a real ensemble",
                       description=__doc__.split("\n\n")[0])
    ssub = p.add_subparsers(dest="scenario_command", metavar="SUBCOMMAND")
    ssub.required = True
    r = ssub.add_parser("run", help="start an ensemble, run the scenario, check it, stop the ensemble")
    r.add_argument("file")
    r.add_argument("--check", action=argparse.BooleanOptionalAction, default=True,
                   help="run the PySpark checker (`zabray check`) on the run's traces (default: on)")
    r.add_argument("--keep", action="store_true", help="keep the replicas' data directories (traces always stay)")
    r.add_argument("--address", default=None, help="Ray cluster to join (default: RAY_ADDRESS, a running head, or local)")
    r.add_argument("--data-dir", default=None, help="the replicas' data root (default: the config's data_dir)")
    r.add_argument("--run-dir", default=None, help="where this run's traces go (default: under the config's run_dir)")
    r.set_defaults(func=lambda a: common.guard(run, a))
    v = ssub.add_parser("validate", help="check scenario files without running them")
    v.add_argument("files", nargs="+")
    v.set_defaults(func=lambda a: common.guard(validate, a))


def validate(args: argparse.Namespace) -> int:
    from zabray.replay.scenario import load

    for f in args.files:
        sc = load(f)
        print(f"{f}: {sc.name}: {len(sc.steps)} steps, {sc.replicas} replicas"
              + (f", proofs {', '.join(sc.proofs)}" if sc.proofs else ""))
    return 0


def run(args: argparse.Namespace) -> int:
    from zabray.driver.scenario import start_and_run
    from zabray.replay.scenario import load

    load(args.file)  # a bad file fails here, before Ray starts
    dirs = {"data_dir": args.data_dir} if args.data_dir else {}
    result = start_and_run(args.file, out=lambda line: print(line, flush=True), check=args.check,
                           address=common.address_of(args), keep=args.keep, run_dir=args.run_dir, **dirs)
    verdict = "PASS" if result.ok else "FAIL"
    checked = "" if result.check is None else f", zabray check {'PASS' if result.check == 0 else 'FAIL'}"
    print(f"{verdict}: {result.name} in {result.seconds:.1f} s ({result.acknowledged} writes acknowledged{checked}); "
          f"traces: {result.run_dir}")
    if not result.ok:
        for p in result.problems[:10]:
            print(f"  {p}", file=sys.stderr)
    return 0 if result.ok else 1
