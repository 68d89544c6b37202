"""Running an experiment: ensembles, client actors spread over the cluster, faults, results.

``run(exp)`` starts one ensemble per ensemble shape, a pool of ``LoadClient`` actors placed
round robin on the nodes that hold no replica (all nodes if every node holds one), runs each
point ``repetitions`` times with a progress bar, injects the fault timeline through the
ensemble's fault injector, and returns an ``ExperimentResult``. Every client operation is also
written as a client trace row next to the replicas' traces, so ``zabray check`` verifies the
runs whose numbers are plotted. The load's data path is TCP; Ray carries only control calls.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from actors.loadclient import CpuProbe, LoadClient
from actors.names import NAMESPACE
from zabray import pipeline, yamlfile
from zabray.driver.ensemble import Ensemble
from zabray.driver.raylink import init_ray
from zabray.errors import ConfigError, ZabError
from zabray.experiments import metrics
from zabray.experiments.machine import describe_machine
from zabray.experiments.spec import Experiment, FaultStep, Point
from zabray.trace import records as trace

log = logging.getLogger(__name__)


@dataclass
class ExperimentResult:
    """``df``: one row per point and repetition. ``timeline``: ok ops/s per bucket. ``marks``:
    one row per fault or lost node, with its recovery. ``placement``: where each replica and
    client ran. ``runs``: the ensembles' run directories (``zabray check`` them)."""

    experiment: Experiment
    run_dir: Path
    df: pd.DataFrame
    timeline: pd.DataFrame
    marks: pd.DataFrame
    placement: pd.DataFrame
    runs: list[str] = field(default_factory=list)

    def check(self) -> Any:
        """Run the Spark trace checker on every ensemble run of this experiment (a CheckReport)."""
        spark = pipeline.get_session()
        df = pipeline.load(spark, *self.runs)
        return pipeline.check(df)


def describe_cluster() -> dict[str, Any]:
    import ray

    nodes = [n for n in ray.nodes() if n["Alive"]]
    return {"ray": ray.__version__, "nodes": len(nodes),
            "cluster_cpus": float(sum(n.get("Resources", {}).get("CPU", 0) for n in nodes)),
            "node_hosts": ",".join(sorted({n.get("NodeManagerHostname", "?") for n in nodes}))}


def _contended() -> bool:
    """More runnable work than cores on this host over the last minute (the driver's host only)."""
    return hasattr(os, "getloadavg") and os.getloadavg()[0] > (os.cpu_count() or 1)


def _alive_nodes() -> list[str]:
    import ray

    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])


def _replica_cpu(ens: Ensemble, probes: dict[str, Any]) -> dict[int, float]:
    """CPU seconds each live replica process has used, read on its own node by a probe actor."""
    import ray

    by_node: dict[str, dict[int, int]] = {}
    for s in ens.status():
        if s.alive and s.pid and s.node in probes:
            by_node.setdefault(str(s.node), {})[int(s.pid)] = s.sid
    refs = {node: probes[node].cpu.remote(list(pids)) for node, pids in by_node.items()}
    out: dict[int, float] = {}
    for node, ref in refs.items():
        try:
            got = ray.get(ref, timeout=30)
        except Exception:  # the node went away meanwhile
            continue
        for pid, sec in got.items():
            out[by_node[node][int(pid)]] = sec
    return out


class _Pool:
    """Client actors for one ensemble, placed on nodes without replicas when there are any."""

    def __init__(self, ens: Ensemble, exp: Experiment, size: int) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.ens = ens
        replica_nodes = {str(s.node) for s in ens.status()}
        self.probes: dict[str, Any] = {node: ray.remote(CpuProbe).options(
            num_cpus=0, max_concurrency=10, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        ).remote() for node in replica_nodes}
        nodes = _alive_nodes()
        free = [n for n in nodes if n not in replica_nodes]
        self.nodes = free or nodes
        cls: Any = ray.remote(LoadClient)
        self.actors: list[Any] = []
        for i in range(size):
            node = self.nodes[i % len(self.nodes)]
            self.actors.append(cls.options(
                num_cpus=0, max_concurrency=1000, namespace=NAMESPACE,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(i, ens.name, ens._addresses(), exp.service, exp.timeout, secret=ens._secret,
                      config=ens.info.get("config", {})))
        self.where = ray.get([a.prepare.remote() for a in self.actors], timeout=300)
        self.sessions = ray.get([a.session_id.remote() for a in self.actors], timeout=60)

    def close(self) -> None:
        import ray

        for a in self.actors:
            try:
                ray.get(a.close.remote(), timeout=10)
            except Exception:  # an actor whose node is gone
                pass
            ray.kill(a)
        for p in self.probes.values():
            ray.kill(p)


class _Timeline:
    """Applies the fault steps through the ensemble and remembers what it did, for marks."""

    def __init__(self, ens: Ensemble) -> None:
        self.ens = ens
        self.killed: list[int] = []
        self.paused: list[int] = []
        self.marks: list[dict[str, Any]] = []

    def _resolve(self, target: Any) -> list[int]:
        if isinstance(target, tuple):
            return list(target)
        st = self.ens.status()
        voters = [s.sid for s in st if not s.observer and s.alive and s.state not in ("DOWN", "PAUSED")]
        leader = self.ens.leader()
        followers = sorted(s for s in voters if s != leader)
        return {"leader": [leader] if leader is not None else [], "follower": followers[:1],
                "two-followers": followers[:2], "observer": sorted(s.sid for s in st if s.observer)[:1],
                "killed": list(self.killed), "paused": list(self.paused), "newest": sorted(voters)[-1:],
                "none": []}[target]

    def apply(self, step: FaultStep) -> None:
        sids = self._resolve(step.target)
        t = time.time()
        try:
            if step.action == "kill":
                for s in sids:
                    self.ens.kill(s)
                    self.killed.append(s)
            elif step.action == "restart":
                for s in sids:
                    self.ens.restart(s)
                    self.killed = [k for k in self.killed if k != s]
            elif step.action == "pause":
                for s in sids:
                    self.ens.pause(s)
                    self.paused.append(s)
            elif step.action == "resume":
                for s in sids:
                    self.ens.resume(s)
                    self.paused = [k for k in self.paused if k != s]
            elif step.action == "partition":
                self.ens.partition(sids)
            elif step.action == "heal":
                self.ens.heal()
            elif step.action == "add":
                sids = [self.ens.add_replica()]
            elif step.action == "remove":
                for s in sids:
                    self.ens.remove_replica(s)
            what = f"{step.action} {step.target if isinstance(step.target, str) and step.target != 'none' else ''}".strip()
            if step.action in ("add", "remove"):
                # A membership change happens when its reconfiguration commits, which the call
                # returns after (an add first starts the replica and syncs it): marked there.
                what, t = f"{what} ({','.join(map(str, sids))})", time.time()
            self.marks.append({"t": t, "what": what, "replicas": ",".join(map(str, sids)), "scheduled": step.at})
        except ZabError as e:
            log.warning("fault step %s failed: %s", step.describe(), e)
            self.marks.append({"t": t, "what": f"{step.describe()} (failed: {e})", "replicas": "",
                               "scheduled": step.at})

    def undo_all(self) -> None:
        """Back to a whole ensemble before the next repetition: heal, resume, restart."""
        try:
            self.ens.heal()
        except ZabError:
            pass
        for s in self.paused:
            try:
                self.ens.resume(s)
            except ZabError:
                pass
        for s in self.killed:
            try:
                self.ens.restart(s)
            except ZabError as e:
                log.warning("restart of replica %d failed: %s", s, e)
        self.killed, self.paused = [], []


_RATE_WINDOW_S = 0.4
"""The shortest interval the progress bar's rate is measured over."""


def _bar(total: float, desc: str, enabled: bool) -> Any:
    """A progress bar on stderr: only in a terminal or a notebook, where it is redrawn in place
    (in a file or a pipe, a CI log, each redraw would pile onto one line)."""
    if not enabled or not (sys.stderr.isatty() or "ipykernel" in sys.modules):
        return None
    try:
        from tqdm.auto import tqdm  # type: ignore[import-untyped]
    except ImportError:
        return None
    return tqdm(total=round(total, 1), desc=desc, unit="s", leave=True,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} s {postfix}")


def _run_point(pool: _Pool, ens: Ensemble, exp: Experiment, point: Point, rep: int, progress: bool,
               node_watch: dict[str, set[int]], at_start: Callable[[Ensemble], None] | None = None,
               actor_bars: bool = False) -> tuple[dict[str, Any], pd.DataFrame, list[dict[str, Any]]]:
    import ray

    actors = pool.actors[: point.clients]
    if exp.faults:
        ens.prepare_faults()  # the injector's start must not delay the window's first fault
    ray.get([a.configure.remote(point.in_flight, point.read_fraction, point.value_size) for a in actors],
            timeout=120)
    refs = [a.run.remote(exp.warmup, exp.duration, actor_bars) for a in actors]
    starts = ray.get([a.started.remote() for a in actors], timeout=300)
    start_at = min(starts)
    m0 = max(starts) + exp.warmup
    m1 = m0 + exp.duration  # narrowed below to the window every client covered
    tl = _Timeline(ens)
    cpu0: dict[int, float] = {}
    cpu_t0: list[float] = []

    def faults_and_cpu() -> None:
        # Its own thread: slow control calls in the polling loop never delay a fault.
        for step in [None, *exp.faults]:
            at = m0 + (step.at if step is not None else 0.0)
            time.sleep(max(0.0, at - time.time()))
            if step is not None and time.time() - at > 0.5:  # the step before it took that long
                log.warning("fault step %s starts %.1f s late: the steps before it took longer than "
                            "the schedule allows", step.describe(), time.time() - at)
            if step is None:
                cpu0.update(_replica_cpu(ens, pool.probes))
                cpu_t0.append(time.time())
                if at_start is not None:
                    at_start(ens)
            else:
                tl.apply(step)

    driver = threading.Thread(target=faults_and_cpu, name="experiment-faults", daemon=True)
    driver.start()
    bar = _bar(exp.warmup + exp.duration, f"{exp.name} {point.label()} rep {rep + 1}", progress)
    last_ok, last_t = 0, time.time()
    pending = list(refs)
    while pending:
        now = time.time()
        alive = set(_alive_nodes())
        for node, sids in list(node_watch.items()):
            if node not in alive:
                tl.marks.append({"t": now, "what": "node lost", "replicas": ",".join(map(str, sorted(sids))),
                                 "node": node})
                del node_watch[node]
        if bar is not None:
            try:
                ok = sum(ray.get([a.progress.remote() for a in actors], timeout=5))
            except Exception:  # a client's node is gone; its results say so
                ok = last_ok
            if now - last_t >= _RATE_WINDOW_S:  # (a rate over microseconds read 57,881,395 ops/s)
                bar.set_postfix_str(f"{(ok - last_ok) / (now - last_t):,.0f} ops/s")
                last_ok, last_t = ok, now
            bar.n = round(min(max(0.0, now - start_at), exp.warmup + exp.duration), 1)
            bar.refresh()
        _, pending = ray.wait(pending, timeout=0.5, num_returns=len(pending))
    # A node that went away during the last poll interval is still a loss of this run.
    alive = set(_alive_nodes())
    for node, sids in list(node_watch.items()):
        if node not in alive:
            tl.marks.append({"t": time.time(), "what": "node lost", "replicas": ",".join(map(str, sorted(sids))),
                             "node": node})
            del node_watch[node]
    driver.join(120)
    cpu1, cpu_t1 = _replica_cpu(ens, pool.probes), time.time()
    if bar is not None:
        bar.n = bar.total
        bar.close()
    results, lost = [], 0
    for r in refs:
        try:
            results.append(ray.get(r))
        except Exception as e:  # its node went away: the others' numbers still stand
            log.warning("a load client died: %s", type(e).__name__)
            lost += 1
    if results:
        m1 = max(m0 + 0.1 * exp.duration, min(r["end"] for r in results))
    tl.undo_all()
    ops = metrics.ops_frame(results)
    row: dict[str, Any] = {"experiment": exp.name, "service": exp.service, "rep": rep,
                           "voters": point.voters, "observers": point.observers,
                           "read_fraction": point.read_fraction, "value_size": point.value_size,
                           "clients": point.clients, "in_flight": point.in_flight, "duration_s": m1 - m0}
    row.update(metrics.summary(ops, m0, m1))
    span = max(1e-6, cpu_t1 - (cpu_t0[0] if cpu_t0 else m0))
    client_cores = [r["cpu_s"] / max(1e-6, r["cpu_span"]) for r in results]
    replica_cores = {s: (cpu1[s] - cpu0.get(s, 0.0)) / span for s in cpu1 if s in cpu0}
    leader = ens.leader()
    rec = metrics.recoveries(ops, tl.marks, m0, m1, exp.bucket)
    row.update({
        "client_cpu_max": max(client_cores, default=float("nan")),
        "client_cpu_sum": sum(client_cores),
        "replica_cpu_max": max(replica_cores.values(), default=float("nan")),
        "replica_cpu_sum": sum(replica_cores.values()),
        "leader_cpu": replica_cores.get(leader, float("nan")) if leader is not None else float("nan"),
        "limit": metrics.limit(client_cores, list(replica_cores.values()), contended=_contended()),
        "clients_lost": lost,
        "faults": [m["what"] for m in rec],
        "recovery_s": [float(m["recovered_s"]) for m in rec],
        "stall_s": [float(m["stall_s"]) for m in rec],
        "m0": m0, "m1": m1, "t0": start_at,
    })
    return row, ops, rec


def _write_client_trace(run_dir: Path, ens_name: str, sessions: list[int], ops: pd.DataFrame) -> None:
    """Client rows for ``zabray check`` (durability, session order...), one file per client."""
    tdir = run_dir / "trace"
    tdir.mkdir(parents=True, exist_ok=True)
    for client, g in ops.groupby("client"):
        sid = sessions[int(client)] or int(client) + 1
        with open(tdir / f"client-exp{int(client)}.jsonl", "a") as fh:
            for r in g.itertuples(index=False):
                z = None if pd.isna(r.zxid) else int(r.zxid)
                recd = trace.ClientOp(session=sid, op=r.op, invoke_t=float(r.invoke), complete_t=float(r.complete),
                                      outcome=r.outcome, zxid=z, digest=r.digest)
                fh.write(json.dumps(trace.row(recd, run=ens_name, src=f"client-exp{int(client)}", replica=-1,
                                              inc=0, t=float(r.complete)), separators=(",", ":")) + "\n")


def _load_ensemble(name: str, address: str | None, exp: Experiment,
                   shapes: dict[tuple[int, int], list[Point]]) -> Ensemble:
    """The running ensemble ``name``, if it has the experiment's one shape and service: checked
    before the run writes anything, so a wrong name or size leaves no run directory behind."""
    if len(shapes) > 1:
        raise ConfigError("an experiment on a running ensemble cannot sweep 'voters' or 'observers'")
    ens = Ensemble.connect(name, address=address)
    ((voters, observers),) = shapes
    have = (len(ens.info["voters"]), len(ens.info["observers"]))
    service = ens.info.get("config", {}).get("service")
    if have != (voters, observers) or service != exp.service:
        raise ConfigError(f"ensemble {name!r} has {have[0]} voters, {have[1]} observers, service "
                          f"{service}; the experiment wants {voters}, {observers}, {exp.service}")
    return ens


def run(exp: Experiment | str | os.PathLike[str] | dict[str, Any], *, address: str | None = None,
        out: str | os.PathLike[str] = "runs/experiments", progress: bool = True,
        at_start: Callable[[Ensemble], None] | None = None, ensemble: str | None = None,
        actor_bars: bool = False, keep_data: bool = False, **overrides: Any) -> ExperimentResult:
    """Run every point of ``exp`` (an ``Experiment``, a YAML path or name, or a mapping) on the
    Ray cluster at ``address`` (default: ``RAY_ADDRESS`` or a local one). ``at_start(ensemble)``
    is called as each measured window opens (custom faults, such as taking a node away).
    ``ensemble`` names a running ensemble (``zabray up --name N``) to load instead of starting
    one per shape; its sizes must match the experiment's, and it is left running.
    ``actor_bars``: each client actor also shows a Ray tqdm bar (seen when the driver joined
    Ray with ``log_to_driver=True``). The replicas' data (hundreds of MB of preallocated log
    per ensemble) is deleted when each ensemble stops unless ``keep_data``; the results, traces
    and histories stay in the run directory either way."""
    if not isinstance(exp, Experiment):
        exp = Experiment.load(exp, **overrides)
    elif overrides:
        exp = exp.with_(**overrides)
    init_ray(address)
    shapes: dict[tuple[int, int], list[Point]] = {}
    for p in exp.points():
        shapes.setdefault((p.voters, p.observers), []).append(p)
    loaded = None if ensemble is None else _load_ensemble(ensemble, address, exp, shapes)
    run_dir = Path(out) / f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid() % 10000}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "experiment.yaml").write_text(yaml.safe_dump(exp.to_dict(), sort_keys=False))
    cluster = describe_cluster()
    rows, series, marks, placement, runs = [], [], [], [], []
    point_no = 0
    for (voters, observers), points in shapes.items():
        if loaded is not None:
            ens = loaded
            ens_name, ens_run = ens.name, Path(ens.info["run_dir"])
        else:
            ens_name = f"{exp.name}-{voters}v{observers}o-{os.getpid() % 10000}"
            ens_run = run_dir / f"{voters}v{observers}o"
            # Replica data next to the results (each node writes this path on its own disk), so
            # deleting a run directory deletes everything the run left on this host.
            data_dir = exp.ensemble.get("data_dir", str((run_dir / "data").resolve()))
            ens = Ensemble.start(voters, observers, name=ens_name, run_dir=str(ens_run),
                                 **{**exp.ensemble, "data_dir": data_dir, "service": exp.service})
        runs.append(str(ens_run))
        pool = None
        try:
            ens.wait_for_leader(120)
            pool = _Pool(ens, exp, max(p.clients for p in points))
            for s in ens.status():
                placement.append({"voters": voters, "observers": observers, "role": "observer" if s.observer
                                  else "voter", "id": s.sid, "node": s.node, "pid": s.pid})
            for w in pool.where:
                placement.append({"voters": voters, "observers": observers, "role": "client", "id": w["index"],
                                  "node": w["node"], "pid": w["pid"]})
            log.info("placement: %d replicas on %d nodes, %d clients on %s", voters + observers,
                     len({s.node for s in ens.status()}), len(pool.actors),
                     sorted({w['node'][:8] for w in pool.where}))
            for point in points:
                for rep in range(exp.repetitions):
                    watch: dict[str, set[int]] = {}
                    for s in ens.status():
                        watch.setdefault(str(s.node), set()).add(s.sid)
                    ens.wait_for_leader(120)
                    row, ops, rec = _run_point(pool, ens, exp, point, rep, progress, watch, at_start,
                                               actor_bars)
                    row.update({"point": point_no, "run_dir": str(ens_run), **describe_machine(), **cluster})
                    rows.append(row)
                    _write_client_trace(ens_run, ens_name, pool.sessions, ops)
                    ser = metrics.timeline(ops, row["t0"], row["m0"], row["m1"], exp.bucket)
                    ser = ser.assign(point=point_no, rep=rep, voters=voters, observers=observers,
                                     read_fraction=point.read_fraction, clients=point.clients)
                    series.append(ser)
                    for m in rec:
                        marks.append({"point": point_no, "rep": rep, "voters": voters, **m})
                point_no += 1
        finally:
            if pool is not None:
                pool.close()
            if ensemble is None:
                wiped = ens.stop(wipe=not keep_data)
                log.info("ensemble %s stopped; %s", ens_name, f"deleted the replicas' data ({len(wiped)} directories)"
                         if not keep_data else f"replicas' data kept under {exp.ensemble.get('data_dir', run_dir / 'data')}")
            else:
                ens.close()
    df = pd.DataFrame(rows)
    tl = pd.concat(series, ignore_index=True) if series else pd.DataFrame()
    mk = pd.DataFrame(marks)
    pl = pd.DataFrame(placement)
    _save(run_dir, df, tl, mk, pl)
    return ExperimentResult(exp, run_dir, df, tl, mk, pl, runs)


def _save(run_dir: Path, df: pd.DataFrame, tl: pd.DataFrame, mk: pd.DataFrame, pl: pd.DataFrame) -> None:
    """Parquet next to the ensembles' run directories (never inside ``trace/``)."""
    try:
        df.to_parquet(run_dir / "results.parquet")
        tl.to_parquet(run_dir / "timeline.parquet")
        if not mk.empty:
            mk.to_parquet(run_dir / "marks.parquet")
        pl.to_parquet(run_dir / "placement.parquet")
    except ImportError as e:  # pyarrow missing
        raise ConfigError(f"writing results needs pyarrow (pip install 'zabray[experiments]'): {e}") from None


def load_results(run_dir: str | os.PathLike[str]) -> ExperimentResult:
    """An earlier run's results from its directory."""
    d = Path(run_dir)
    if not (d / "results.parquet").exists():
        raise ConfigError(f"{d} holds no results.parquet; is it an experiment's run directory?")
    exp = Experiment.from_dict(yamlfile.load(d / "experiment.yaml", "saved experiment"))
    df = pd.read_parquet(d / "results.parquet")
    tl = pd.read_parquet(d / "timeline.parquet")
    mk = pd.read_parquet(d / "marks.parquet") if (d / "marks.parquet").exists() else pd.DataFrame()
    pl = pd.read_parquet(d / "placement.parquet")
    return ExperimentResult(exp, d, df, tl, mk, pl, sorted(str(p) for p in d.iterdir() if (p / "trace").is_dir()))
