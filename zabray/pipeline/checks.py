"""Zab's safety properties as Spark jobs over a trace DataFrame (see ZAB.md, "Properties").

Every check is a plan of joins, window functions and aggregations that stays on the executors;
only, per run with violations, their count and the first counterexample (one row) come back to
the driver.

Conventions the checks rely on (the trace contract, ``zabray.trace.records``):

* A replica's rows are judged per incarnation ``(replica, inc)``, in the order its writer wrote
  them (the loader's position columns), not by ``t``.
* An incarnation starts from nothing: it redelivers from the first txn, or installs a
  ``snapshot`` at S, which counts as having delivered every txn up to S.
* Every check groups by ``run``, so one DataFrame may hold several runs.

``check(df)`` runs them all; each ``check_*`` function also accepts a DataFrame on its own.
Functions take a :class:`TraceFrames` to share the derived frames (parsed once, persisted).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zabray.pipeline.frames import (
    _F,
    REQUIRED,
    TraceFrames,
    _before,
    _behind,
    _counter,
    _epoch,
)
from zabray.pipeline.loader import CORRUPT, POSITION
from zabray.protocol.zxid import fmt

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PropertyResult:
    """The verdict on one property: how many violations, and the first one (by time or zxid).

    ``counterexample`` is JSON-ready: zxids as ``"epoch:counter"`` strings, plus ``text``,
    one sentence a person can act on.
    """

    name: str
    description: str
    violations: int
    counterexample: dict[str, Any] | None = None
    #: The same verdict for each run that has violations (runs without any are absent).
    by_run: Mapping[str, PropertyResult] = field(default_factory=dict, repr=False, compare=False)

    def for_run(self, run: str) -> PropertyResult:
        return self.by_run.get(run) or PropertyResult(self.name, self.description, 0)

    @property
    def holds(self) -> bool:
        return self.violations == 0

    @property
    def verdict(self) -> str:
        return "PASS" if self.holds else "FAIL"

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "verdict": self.verdict, "violations": self.violations,
               "description": self.description, "counterexample": self.counterexample}
        if len(self.by_run) > 1:
            out["violations_by_run"] = {k: v.violations for k, v in sorted(self.by_run.items())}
        return out


@dataclass(frozen=True)
class CheckReport:
    """All verdicts on one trace, plus what was read (``summary``: rows per kind, runs, span)."""

    results: tuple[PropertyResult, ...]
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(r.holds for r in self.results)

    @property
    def failed(self) -> list[PropertyResult]:
        return [r for r in self.results if not r.holds]

    def __getitem__(self, name: str) -> PropertyResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def for_run(self, run: str) -> CheckReport:
        """The verdicts on one run of a multi-run trace."""
        runs = self.summary.get("runs", {})
        if runs and run not in runs:
            raise KeyError(f"no run {run!r} in this trace; runs: {', '.join(runs)}")
        return CheckReport(tuple(r.for_run(run) for r in self.results),
                           {**self.summary, "runs": {run: runs.get(run)}})

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "summary": self.summary,
                "properties": [r.to_dict() for r in self.results]}


# --------------------------------------------------------------------------- helpers


def _z(value: int | None) -> str | None:
    return None if value is None else fmt(int(value))


Firsts = dict[str, tuple[int, dict[str, Any]]]


def _firsts(violations: DataFrame, order: Iterable[str], fields: Iterable[str]) -> Firsts:
    """Per run with violations: their number and the least by ``order`` (one Spark job; only a
    row per run reaches the driver)."""
    F = _F()
    order = list(order)
    cols = ["run", *order] + [f for f in fields if f not in order and f != "run"]
    rows = violations.groupBy("run").agg(F.count(F.lit(1)).alias("n"),
                                         F.min(F.struct(*(F.col(c) for c in cols))).alias("first")).collect()
    return {r["run"]: (int(r["n"]), r["first"].asDict(recursive=True)) for r in rows}


def _counterexample(first: dict | None, zxids: Iterable[str], text: Callable[[dict], str]) -> dict | None:
    if first is None:
        return None
    out = {k: (_z(v) if k in zxids else v) for k, v in first.items() if not k.startswith("_")}
    out["text"] = text(out)
    return out


def _t(value: Any) -> str:
    return "?" if value is None else f"{value:g}"


def _who(replica: Any, inc: Any) -> str:
    return f"replica {replica} (inc {inc})"


def _frames(fn: Callable[[TraceFrames], PropertyResult]) -> Callable[[DataFrame | TraceFrames], PropertyResult]:
    """Let a check take a DataFrame too (then it derives and drops its own frames)."""

    @functools.wraps(fn)
    def wrapper(trace: DataFrame | TraceFrames) -> PropertyResult:
        if isinstance(trace, TraceFrames):
            return fn(trace)
        tf = TraceFrames(trace)
        try:
            return fn(tf)
        finally:
            tf.unpersist()

    return wrapper


# --------------------------------------------------------------------------- the properties

DESCRIPTIONS: dict[str, str] = {
    "well_formed": "every row of a known kind has the columns its kind needs; zxid counter 0 is never a txn",
    "delivery_order": "each (replica, inc) delivers in strictly increasing zxid order; a snapshot never goes back",
    "integrity": "every delivered (zxid, digest) was proposed by some leader",
    "uniqueness": "one digest per zxid among all proposals and deliveries",
    "agreement": "no incarnation skips a txn someone delivered below one it delivered (snapshots cover up to S)",
    "local_primary_order": "within an epoch an incarnation delivers counters without gaps",
    "global_primary_order": "no incarnation delivers an epoch-e txn after a txn of a later epoch",
    "primary_integrity": "the leader of epoch e delivered every earlier-epoch txn anyone delivers before proposing",
    "durability": "every acknowledged write is delivered, and by each replica's last incarnation that got past it",
    "session_order": "each session's acknowledged writes take effect in the order they were issued",
    "linearizable_writes": "if write A completed before write B was invoked, zxid(A) < zxid(B)",
    "monotonic_reads": "a session never reads a zxid older than one it saw in an op completed before the read",
}


def _result(name: str, firsts: Firsts, zxids: Iterable[str], text: Callable[[dict], str]) -> PropertyResult:
    """The verdict over all runs (the counterexample of the first failing run by name) and per run."""
    zxids = set(zxids)
    by_run = {run: PropertyResult(name, DESCRIPTIONS[name], n, _counterexample(first, zxids, text))
              for run, (n, first) in sorted(firsts.items())}
    first = next(iter(by_run.values()), None)
    return PropertyResult(name, DESCRIPTIONS[name], sum(r.violations for r in by_run.values()),
                          first.counterexample if first else None, by_run)


@_frames
def check_well_formed(tf: TraceFrames) -> PropertyResult:
    """Rows of known kinds that lack required columns, or name counter 0 / a wrong epoch."""
    F = _F()
    checks: list[tuple[Column, Column]] = []  # (is bad, what is wrong)
    for kind, cols in REQUIRED.items():
        is_kind = F.col("kind") == kind
        missing = F.concat_ws(",", *(F.when(F.col(c).isNull(), F.lit(c)) for c in cols))
        checks.append((is_kind & functools.reduce(lambda a, b: a | b, (F.col(c).isNull() for c in cols)),
                       F.when(is_kind & (missing != ""), F.concat(F.lit("missing "), missing))))
    txn = F.col("kind").isin("propose", "deliver")
    for cond, text in (
        (F.col("v").isNull(), "no schema version v"),
        (F.col("kind").isNull(), "no kind"),
        (txn & (_counter("zxid") == 0), "zxid counter 0 is not a txn"),
        (F.col("zxid") < 0, "negative zxid"),
        (txn & F.col("epoch").isNotNull() & (F.col("epoch") != _epoch("zxid")), "epoch differs from the zxid's epoch"),
    ):
        checks.append((F.coalesce(cond, F.lit(False)), F.when(cond, F.lit(text))))
    # The cheap test first; the text only for the (few) rows that fail it.
    bad = (tf.events.where(F.col(CORRUPT).isNull() & functools.reduce(lambda a, b: a | b, (c for c, _ in checks)))
           .select("*", F.concat_ws("; ", *(t for _, t in checks)).alias("problem")))
    firsts = _firsts(bad, POSITION, ["problem", "kind", "src", "replica", "inc", "t", "zxid"])

    def problem(c: dict) -> str:
        writer = c["src"] or f"replica-{c['replica']}"  # deliver/propose rows are cached without src
        return f"a {c['kind']} row of {writer} at t={_t(c['t'])}: {c['problem']}"

    return _result("well_formed", firsts, {"zxid"}, problem)


@_frames
def check_delivery_order(tf: TraceFrames) -> PropertyResult:
    """A delivery at or below, or a snapshot below, the highest zxid earlier in its incarnation."""
    bad = tf.stream.where(_behind())
    firsts = _firsts(bad, ["t", "replica", "inc", *POSITION], ["zxid", "hwm", "snap"])

    def text(c: dict) -> str:
        what = "installed a snapshot at" if c["snap"] else "delivered"
        return f"{_who(c['replica'], c['inc'])} {what} {c['zxid']} at t={_t(c['t'])} after {c['hwm']}"

    return _result("delivery_order", firsts, {"zxid", "hwm"}, text)


@_frames
def check_integrity(tf: TraceFrames) -> PropertyResult:
    """Delivered (zxid, digest) pairs with no matching proposal."""
    proposed = tf.proposals.select("run", "zxid", "digest").distinct()
    bad = tf.delivered.join(proposed, ["run", "zxid", "digest"], "left_anti")
    firsts = _firsts(bad, ["first_t", "zxid", "digest"], ["first_replica", "first_inc", "n"])
    return _result("integrity", firsts, {"zxid"}, lambda c: (
        f"{c['zxid']} with digest {c['digest']} was delivered ({c['n']}x, first by "
        f"{_who(c['first_replica'], c['first_inc'])} at t={_t(c['first_t'])}) but no leader proposed it"))


@_frames
def check_uniqueness(tf: TraceFrames) -> PropertyResult:
    """Zxids that carry two digests among proposals and deliveries."""
    F = _F()
    seen = tf.delivered.select("run", "zxid", "digest", F.lit("delivered").alias("how"),
                               F.col("first_replica").alias("replica"), F.col("first_t").alias("t"))
    seen = seen.unionByName(tf.proposals.select("run", "zxid", "digest", F.lit("proposed").alias("how"),
                                                "replica", "t"))
    one = F.struct("digest", "how", "replica", "t")
    bad = (seen.groupBy("run", "zxid").agg(F.min(one).alias("a"), F.max(one).alias("b"))
           .where(F.col("a.digest") != F.col("b.digest")))
    firsts = _firsts(bad, ["zxid"], ["a", "b"])

    def text(c: dict) -> str:
        a, b = c["a"], c["b"]
        return (f"{c['zxid']} names two values: {a['digest']} ({a['how']} by replica {a['replica']} "
                f"at t={_t(a['t'])}) and {b['digest']} ({b['how']} by replica {b['replica']} at t={_t(b['t'])})")

    return _result("uniqueness", firsts, {"zxid"}, text)


@_frames
def check_agreement(tf: TraceFrames) -> PropertyResult:
    """Deliveries whose predecessor in their incarnation's zxid order leaves out a delivered txn.

    ``history.gprev`` is the delivered zxid just below this one; if it is above the
    incarnation's own predecessor (0 at the start), that txn was skipped.
    """
    F = _F()
    firsts = _firsts(tf.skips, ["t", "replica", "inc", *POSITION], ["zxid", "prev", "gprev"])
    for run, (_, first) in firsts.items():  # who delivered the skipped txn: a lookup per failing run
        by = (tf.delivered.where((F.col("run") == run) & (F.col("zxid") == first["gprev"]))
              .select("first_replica", "first_t").first())
        first["skipped_by"], first["skipped_t"] = (by[0], by[1]) if by else (None, None)

    def text(c: dict) -> str:
        after = f"after {c['prev']}" if c["prev"] != "0:0" else "as its first txn"
        return (f"{_who(c['replica'], c['inc'])} delivered {c['zxid']} at t={_t(c['t'])} {after}, skipping "
                f"{c['gprev']}, which replica {c['skipped_by']} delivered at t={_t(c['skipped_t'])}")

    return _result("agreement", firsts, {"zxid", "prev", "gprev"}, text)


@_frames
def check_local_primary_order(tf: TraceFrames) -> PropertyResult:
    """Deliveries of (e, c > 1) whose incarnation has nothing at (e, c-1) or covering it."""
    F = _F()
    bad = tf.stream.where(~F.col("snap") & (_counter("zxid") > 1)
                          & (F.col("sprev").isNull() | (F.col("sprev") < F.col("zxid") - 1)))
    bad = bad.withColumn("missing", F.col("zxid") - 1)
    firsts = _firsts(bad, ["t", "replica", "inc", *POSITION], ["zxid", "missing", "sprev"])

    def text(c: dict) -> str:
        below = f"the next lower zxid it has is {c['sprev']}" if c["sprev"] else "it has nothing below"
        return (f"{_who(c['replica'], c['inc'])} delivered {c['zxid']} at t={_t(c['t'])} without "
                f"{c['missing']} ({below})")

    return _result("local_primary_order", firsts, {"zxid", "missing", "sprev"}, text)


@_frames
def check_global_primary_order(tf: TraceFrames) -> PropertyResult:
    """Deliveries of an epoch lower than that of a txn delivered earlier in the incarnation."""
    F = _F()
    bad = tf.stream.where(~F.col("snap") & F.col("hwm").isNotNull() & (_epoch("zxid") < _epoch("hwm")))
    firsts = _firsts(bad, ["t", "replica", "inc", *POSITION], ["zxid", "hwm"])
    return _result("global_primary_order", firsts, {"zxid", "hwm"}, lambda c: (
        f"{_who(c['replica'], c['inc'])} delivered {c['zxid']} at t={_t(c['t'])} after {c['hwm']} "
        f"of a later epoch"))


@_frames
def check_primary_integrity(tf: TraceFrames) -> PropertyResult:
    """Per epoch e with proposals: its leader (the one incarnation proposing in e) must cover, by
    its first proposal, every delivered txn of earlier epochs.

    Covered = its highest delivered/snapshot zxid before that proposal reaches ``m_e`` (the
    highest delivered txn of an earlier epoch), with no skip below ``m_e`` on the way. Two
    incarnations proposing in one epoch is also a violation.
    """
    F = _F()
    leaders = (tf.proposals.groupBy("run", _epoch("zxid").alias("epoch"))
               .agg(F.countDistinct("replica", "inc").alias("leaders"),
                    F.min(F.struct("t", *POSITION, "replica", "inc", "zxid")).alias("p")))
    maxima = (tf.delivered.groupBy(F.col("run").alias("drun"), _epoch("zxid").alias("depoch"))
              .agg(F.max("zxid").alias("m")))
    le = (leaders.join(maxima, (F.col("run") == F.col("drun")) & (F.col("depoch") < F.col("epoch")), "left")
          .groupBy("run", "epoch", "leaders", "p").agg(F.max("m").alias("m_e"))
          .select("run", "epoch", "leaders", "m_e", F.col("p.replica").alias("replica"),
                  F.col("p.inc").alias("inc"), F.col("p.zxid").alias("proposed"),
                  *(F.col(f"p.{c}").alias(f"p_{c}") for c in ("t", *POSITION))))
    le = le.persist()
    try:
        before = _before("p_")
        cover = (tf.stream.join(F.broadcast(le), ["run", "replica", "inc"]).where(before)
                 .groupBy("run", "epoch").agg(F.max("zxid").alias("covered")))
        skipped = (tf.skips.join(F.broadcast(le), ["run", "replica", "inc"])
                   .where(before & (F.col("prev") < F.col("m_e")))
                   .groupBy("run", "epoch")
                   .agg(F.min(F.when(F.col("m_e") < F.col("zxid"), F.col("m_e"))
                              .otherwise(F.col("gprev"))).alias("skipped")))
        judged = le.join(cover, ["run", "epoch"], "left").join(skipped, ["run", "epoch"], "left")
        uncovered = F.col("m_e").isNotNull() & (F.col("covered").isNull() | (F.col("covered") < F.col("m_e")))
        bad = (judged.where((F.col("leaders") > 1) | uncovered | F.col("skipped").isNotNull())
               .withColumn("missing", F.coalesce("skipped", F.when(uncovered, F.col("m_e")))))
        firsts = _firsts(bad, ["epoch"], ["replica", "inc", "p_t", "proposed", "missing", "covered", "leaders"])
    finally:
        le.unpersist()

    def text(c: dict) -> str:
        if c["missing"] is None:
            return f"epoch {c['epoch']} has proposals from {c['leaders']} replica incarnations"
        return (f"the leader of epoch {c['epoch']}, {_who(c['replica'], c['inc'])}, proposed {c['proposed']} "
                f"at t={_t(c['p_t'])} before delivering {c['missing']} of an earlier epoch "
                f"(it had reached {c['covered'] or 'nothing'})")

    return _result("primary_integrity", firsts, {"proposed", "missing", "covered"}, text)


@_frames
def check_durability(tf: TraceFrames) -> PropertyResult:
    """Acknowledged writes (ok, write op, zxid set) missing from the delivered history, or (with
    their digest) delivered with another value, or missed by a replica's last incarnation whose
    deliveries (or snapshot) went past them.

    The second part needs a join of writes x replicas against all deliveries, so it only runs if
    some last incarnation skipped anything at all: a last incarnation that went past a
    delivered write without delivering it has a skip row covering it (see ``skips``).
    """
    F = _F()
    w = tf.acked_writes
    fields = ["session", "op", "path", "invoke_t", "complete_t", "zxid", "digest", *POSITION]
    lost = (w.where(F.col("digest").isNotNull())
            .join(tf.delivered.select("run", "zxid", "digest"), ["run", "zxid", "digest"], "left_anti")
            .unionByName(w.where(F.col("digest").isNull())
                         .join(tf.history.select("run", "zxid"), ["run", "zxid"], "left_anti"))
            .select("run", *fields, F.lit(None).cast("int").alias("replica"),
                    F.lit(None).cast("int").alias("inc"), F.lit(None).cast("long").alias("reached")))
    last = tf.stream.groupBy("run", "replica").agg(F.max("inc").alias("inc"))
    if tf.skips.join(last, ["run", "replica", "inc"]).limit(1).count():
        reach = (tf.stream.join(last, ["run", "replica", "inc"]).groupBy("run", "replica", "inc")
                 .agg(F.max("zxid").alias("reached"), F.max(F.when(F.col("snap"), F.col("zxid"))).alias("snap_at")))
        pairs = w.join(F.broadcast(reach.withColumnRenamed("run", "rrun")),
                       (F.col("run") == F.col("rrun")) & (F.col("reached") > F.col("zxid"))
                       & (F.col("snap_at").isNull() | (F.col("snap_at") < F.col("zxid")))).drop("rrun")
        got = tf.stream.where(~F.col("snap")).select("run", "replica", "inc", "zxid")
        missed = pairs.join(got, ["run", "replica", "inc", "zxid"], "left_anti")
        lost = lost.unionByName(missed.select("run", *fields, "replica", "inc", "reached"))
    # One violation per op, preferring "not delivered at all" (replica null sorts first).
    per_op = lost.groupBy("run", *POSITION).agg(F.min(F.struct("replica", *fields, "inc", "reached")).alias("x"))
    firsts = _firsts(per_op.select("run", "x.*"), ["complete_t", "zxid"],
                     ["session", "op", "path", "invoke_t", "digest", "replica", "inc", "reached"])

    def text(c: dict) -> str:
        op = f"session {c['session']}'s {c['op']} {c['path'] or ''}".rstrip()
        head = f"{op}, acknowledged at t={_t(c['complete_t'])} as {c['zxid']},"
        if c["replica"] is None:
            return f"{head} is not in the delivered history" + (
                f" with digest {c['digest']}" if c["digest"] else "")
        return (f"{head} was never delivered by {_who(c['replica'], c['inc'])}, the replica's last "
                f"incarnation, which reached {c['reached']}")

    return _result("durability", firsts, {"zxid", "reached"}, text)


@_frames
def check_session_order(tf: TraceFrames) -> PropertyResult:
    """Per session, acknowledged writes by invoke time must have increasing zxids. Writes invoked
    at the same instant are concurrent (no order between them is claimed)."""
    from pyspark.sql import Window

    F = _F()
    op = F.struct("zxid", "invoke_t", "op", "path")
    groups = (tf.acked_writes.groupBy("run", "session", "invoke_t")
              .agg(F.min(op).alias("this"), F.max(op).alias("top")))
    earlier = Window.partitionBy("run", "session").orderBy("invoke_t").rowsBetween(Window.unboundedPreceding, -1)
    bad = (groups.select("*", F.max("top").over(earlier).alias("prior"))
           .where(F.col("prior").isNotNull() & (F.col("this.zxid") <= F.col("prior.zxid")))
           .select("run", "session", "invoke_t", F.col("this.zxid").alias("zxid"), F.col("this.op").alias("op"),
                   F.col("prior.zxid").alias("prior_zxid"), F.col("prior.invoke_t").alias("prior_invoke_t"),
                   F.col("prior.op").alias("prior_op")))
    firsts = _firsts(bad, ["invoke_t", "session"], ["zxid", "op", "prior_zxid", "prior_invoke_t", "prior_op"])
    return _result("session_order", firsts, {"zxid", "prior_zxid"}, lambda c: (
        f"session {c['session']}'s {c['op']} invoked at t={_t(c['invoke_t'])} took effect as {c['zxid']}, "
        f"not after its {c['prior_op']} invoked earlier at t={_t(c['prior_invoke_t'])} ({c['prior_zxid']})"))


_OP = ("zxid", "session", "op", "invoke_t", "complete_t")


def _seen_before(ops: DataFrame, invocations: DataFrame, key: list[str]) -> DataFrame:
    """Each invocation (an op row) with the completed op of highest zxid (``prior_*`` columns)
    among ``ops`` that completed strictly before it was invoked, within ``key``.

    One window over completions and invocations sorted by time; at equal times invocations
    sort first, so "before" is strict.
    """
    from pyspark.sql import Window

    F = _F()
    info = F.struct(*_OP).alias("info")
    events = (ops.select(*key, F.col("complete_t").alias("time"), F.lit(1).alias("typ"), info)
              .unionByName(invocations.select(*key, F.col("invoke_t").alias("time"), F.lit(0).alias("typ"), info)))
    earlier = Window.partitionBy(*key).orderBy("time", "typ").rowsBetween(Window.unboundedPreceding, -1)
    seen = F.max(F.when(F.col("typ") == 1, F.col("info"))).over(earlier)
    return (events.select(*key, "typ", "info", seen.alias("prior"))
            .where((F.col("typ") == 0) & F.col("prior").isNotNull())
            .select(*key, *(F.col(f"info.{c}") for c in _OP if c not in key),
                    *(F.col(f"prior.{c}").alias(f"prior_{c}") for c in _OP)))


@_frames
def check_linearizable_writes(tf: TraceFrames) -> PropertyResult:
    """Acknowledged writes B with a write A that completed strictly before B was invoked and has
    zxid(A) >= zxid(B). One window over all writes of a run, sorted by time."""
    F = _F()
    w = tf.acked_writes.where(F.col("complete_t").isNotNull())
    bad = _seen_before(w, w, ["run"]).where(F.col("prior_zxid") >= F.col("zxid"))
    firsts = _firsts(bad, ["invoke_t", "session"], ["zxid", "op", *(f"prior_{c}" for c in _OP)])
    return _result("linearizable_writes", firsts, {"zxid", "prior_zxid"}, lambda c: (
        f"write {c['prior_zxid']} (session {c['prior_session']} {c['prior_op']}) completed at "
        f"t={_t(c['prior_complete_t'])} before write {c['zxid']} (session {c['session']} {c['op']}) was "
        f"invoked at t={_t(c['invoke_t'])}, yet has the higher zxid"))


@_frames
def check_monotonic_reads(tf: TraceFrames) -> PropertyResult:
    """Acknowledged reads whose zxid is below that of an op of the same session that completed
    (ok, with a zxid) strictly before the read was invoked."""
    F = _F()
    ok = tf.clients.where((F.col("outcome") == "ok") & F.col("zxid").isNotNull())
    bad = (_seen_before(ok.where(F.col("complete_t").isNotNull()), ok.where(~F.col("is_write")),
                        ["run", "session"])
           .where(F.col("zxid") < F.col("prior_zxid")))
    firsts = _firsts(bad, ["invoke_t", "session"], ["zxid", "op", *(f"prior_{c}" for c in _OP)])
    return _result("monotonic_reads", firsts, {"zxid", "prior_zxid"}, lambda c: (
        f"session {c['session']}'s {c['op']} invoked at t={_t(c['invoke_t'])} saw {c['zxid']}, older than "
        f"{c['prior_zxid']} its {c['prior_op']} saw, completed at t={_t(c['prior_complete_t'])}"))


#: Every property, in report order.
PROPERTIES: dict[str, Callable[[DataFrame | TraceFrames], PropertyResult]] = {
    "well_formed": check_well_formed,
    "delivery_order": check_delivery_order,
    "integrity": check_integrity,
    "uniqueness": check_uniqueness,
    "agreement": check_agreement,
    "local_primary_order": check_local_primary_order,
    "global_primary_order": check_global_primary_order,
    "primary_integrity": check_primary_integrity,
    "durability": check_durability,
    "session_order": check_session_order,
    "linearizable_writes": check_linearizable_writes,
    "monotonic_reads": check_monotonic_reads,
}


def check(trace: DataFrame | TraceFrames, properties: Iterable[str] | None = None) -> CheckReport:
    """Check a trace (a DataFrame, e.g. from ``load``, or shared :class:`TraceFrames`) for every
    property, or the named ones. Frames it derives from a DataFrame are dropped at the end; a
    given ``TraceFrames`` is left for the caller to ``unpersist``.

    Raises ``TraceError`` if the trace has no rows or rows of another schema version.
    """
    names = list(PROPERTIES) if properties is None else list(properties)
    unknown = [n for n in names if n not in PROPERTIES]
    if unknown:
        raise ValueError(f"unknown properties {unknown}; known: {', '.join(PROPERTIES)}")
    tf = trace if isinstance(trace, TraceFrames) else TraceFrames(trace)
    try:
        summary = tf.summary()
        results = []
        for name in names:
            results.append(PROPERTIES[name](tf))
            log.info("%s: %s (%d)", name, results[-1].verdict, results[-1].violations)
        return CheckReport(tuple(results), summary)
    finally:
        if tf is not trace:
            tf.unpersist()
