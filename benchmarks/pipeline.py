"""Benchmark the trace checker on a synthetic run: ``--deliveries`` txns delivered by each of
``--replicas`` replicas (default ten million on each of five), checked in Spark local mode.

    .venv/bin/python benchmarks/pipeline.py --deliveries 1000000 --replicas 5
    .venv/bin/python benchmarks/pipeline.py --format parquet --keep        # full size

The trace comes from ``zabray.pipeline.synth`` (leader changes, restarts, snapshots, clients;
every property holds), written as JSON lines (the real format) or Parquet (same columns; the
loader reads both, and at ten million deliveries per replica JSON is ~10 GB). Generation runs
in a forked child so the driver's peak RSS measures the check only. Reported: the time of each
stage and property, the driver's peak RSS (``getrusage``) and the JVM's (``VmHWM``, local mode
runs the executors inside the driver JVM).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import sys
import time
from pathlib import Path

# Run as a script, benchmarks/profile.py would shadow the standard library's profile module,
# which pyspark imports (through cProfile).
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

from zabray.experiments.machine import machine_line  # noqa: E402
from zabray.pipeline.synth import SynthSpec, generate, write_jsonl, write_parquet  # noqa: E402


def _generate(spec: SynthSpec, fmt: str, run_dir: Path, queue: multiprocessing.Queue) -> None:
    started = time.monotonic()
    trace = generate(spec)
    built = time.monotonic()
    (write_parquet if fmt == "parquet" else write_jsonl)(trace, run_dir)
    queue.put({"rows": trace.rows(), "generate_s": built - started, "write_s": time.monotonic() - built,
               "generator_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the JVM may sit under spark-submit's shell)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _vm_hwm_mb(pid: int) -> float:
    """The largest peak RSS (VmHWM) in ``pid``'s process tree, from /proc (0 if unavailable)."""
    best = 0.0
    for p in _tree(pid):
        try:
            lines = Path(f"/proc/{p}/status").read_text().splitlines()
            best = max(best, next(int(x.split()[1]) / 1024 for x in lines if x.startswith("VmHWM:")))
        except (OSError, StopIteration):
            continue
    return best


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid``'s process tree: unlike wall time, it
    hardly depends on what else the machine is running."""
    total = 0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deliveries", type=int, default=10_000_000, help="txns delivered by each replica")
    ap.add_argument("--replicas", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--client-every", type=int, default=10, help="every k-th txn is a traced client write")
    ap.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    ap.add_argument("--dir", type=Path, help="run directory (default: a directory under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the generated trace")
    ap.add_argument("--reuse", action="store_true", help="check the trace already in --dir")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--shuffle-partitions", type=int, default=16)
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    ap.add_argument("--figures", action="store_true", help="also compute and write the figures")
    ap.add_argument("--json", type=Path, help="write the results here too")
    args = ap.parse_args(argv)

    n = args.deliveries // args.epochs
    spec = SynthSpec(replicas=args.replicas, epochs=args.epochs, txns_per_epoch=n, sessions=args.sessions,
                     reads_per_session=max(1, args.deliveries // (args.client_every * args.sessions)),
                     client_every=args.client_every, seed=1, run="bench")
    run_dir = args.dir or Path(f"/tmp/zabray-bench-{args.deliveries}x{args.replicas}-{args.format}")
    result: dict = {"deliveries_per_replica": n * args.epochs, "replicas": args.replicas, "epochs": args.epochs,
                    "format": args.format, "master": args.master, "driver_memory": args.driver_memory,
                    "shuffle_partitions": args.shuffle_partitions, "run_dir": str(run_dir)}
    print(machine_line())
    print(f"checker: Spark {args.master}, driver memory {args.driver_memory}, {args.shuffle_partitions} shuffle "
          f"partitions; trace: {n * args.epochs:,} deliveries x {args.replicas} replicas, {args.epochs} epochs, "
          f"{args.sessions} sessions, {args.format}", flush=True)
    if not args.reuse:
        shutil.rmtree(run_dir, ignore_errors=True)
        queue: multiprocessing.Queue = multiprocessing.get_context("fork").Queue()
        child = multiprocessing.get_context("fork").Process(target=_generate, args=(spec, args.format, run_dir, queue))
        child.start()
        result.update(queue.get())
        child.join()
    result["trace_mb"] = round(sum(p.stat().st_size for p in (run_dir / "trace").iterdir()) / 2**20, 1)
    print(f"trace: {result.get('rows', '?')} rows, {result['trace_mb']} MB in {run_dir}", flush=True)

    from zabray.pipeline import PROPERTIES, TraceFrames, figures, get_session, load, write_figures

    t0 = time.monotonic()
    conf = {"spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
            **dict(kv.split("=", 1) for kv in args.conf)}
    result["conf"] = conf
    spark = get_session(args.master, conf=conf)
    jvm_pid = spark.sparkContext._gateway.proc.pid  # local mode: the driver JVM runs the executors
    stages = {"spark_start": (time.monotonic() - t0, _cpu_s(jvm_pid))}
    result["load_avg_before"] = os.getloadavg()[0]

    def timed(name: str, fn):
        wall, cpu = time.monotonic(), _cpu_s(jvm_pid)
        out = fn()
        stages[name] = (time.monotonic() - wall, _cpu_s(jvm_pid) - cpu)
        print(f"  {name:<30} {stages[name][0]:8.1f}s wall {stages[name][1]:8.1f}s JVM CPU", flush=True)
        return out

    frames = TraceFrames(load(spark, run_dir))
    summary = timed("load_parse_persist", frames.summary)  # parses the trace once and caches it
    failed = []
    for name, fn in PROPERTIES.items():
        res = timed(f"check:{name}", lambda fn=fn: fn(frames))
        if not res.holds:
            failed.append((name, res.counterexample))
    check = [v for k, v in stages.items() if k != "spark_start"]
    result["check_s"] = round(sum(w for w, _ in check), 2)
    result["check_jvm_cpu_s"] = round(sum(c for _, c in check), 2)
    if args.figures:
        timed("figures", lambda: write_figures(figures(frames), run_dir / "analysis"))
    frames.unpersist()
    result["load_avg_after"] = os.getloadavg()[0]
    result.setdefault("rows", summary["rows"])
    result["trace_rows_by_kind"] = summary["rows_by_kind"]
    result["stages_wall_s"] = {k: round(w, 2) for k, (w, _) in stages.items()}
    result["stages_jvm_cpu_s"] = {k: round(c, 2) for k, (_, c) in stages.items()}
    result["driver_python_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["jvm_peak_rss_mb"] = round(_vm_hwm_mb(jvm_pid), 1)
    result["all_properties_hold"] = not failed
    spark.stop()
    if not args.keep and not args.reuse:
        shutil.rmtree(run_dir, ignore_errors=True)

    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if failed:
        print(f"unexpected violations on a valid trace: {failed}", file=sys.stderr)
    return 0 if not failed else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
