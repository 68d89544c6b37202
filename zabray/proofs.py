"""Preconditions of replayed bugs, proven from a run's trace rows (``message`` rows need
``trace_messages: true``). Pure: rows in, a verdict out.

Each proof looks at one replica incarnation at a time, in the order its rows were written (a
replica's own order, not wall clocks across processes), and says which incarnation showed the
interleaving and how.

- ``proposal-during-sync`` (ZOOKEEPER-4394's window): a follower received NEWLEADER(n), then
  PROPOSAL(p) with p > n, then the leader's word that p is committed (a COMMIT(c >= p) or
  UPTODATE(u >= p)) before or as its sync ended with UPTODATE. ``commits_in_window`` counts
  COMMITs received strictly between NEWLEADER and UPTODATE: ZooKeeper's exact precondition.
  zabray's leader sends COMMIT only to learners that acknowledged NEWLEADER and sends UPTODATE
  in the same step, so it is always 0 here: the commit of p reaches the follower in UPTODATE.
- ``ack-during-sync`` (ZOOKEEPER-4685's window): a follower acknowledged a proposal p it got
  during sync (sent or held ACK(a >= p)) before it received UPTODATE, i.e. before its leader had
  processed its ACK of NEWLEADER; and the leader received that ACK(a) from it right behind
  ACK_NEWLEADER. On one FIFO channel the leader can never see ACK(p) *before* ACK_NEWLEADER
  (ZooKeeper's exact order): zabray's follower holds both until durable, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zabray.protocol.zxid import fmt

Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ProofResult:
    name: str
    ok: bool
    text: str


def _by_inc(rows: Sequence[Row]) -> dict[int, list[Row]]:
    out: dict[int, list[Row]] = {}
    for r in rows:
        if r.get("kind") == "message":
            out.setdefault(int(r.get("inc", 0)), []).append(r)
    return out


def _sync_windows(msgs: list[Row]) -> list[list[Row]]:
    """Each run of rows from a received NEWLEADER to the next received UPTODATE (inclusive)."""
    out: list[list[Row]] = []
    cur: list[Row] | None = None
    for r in msgs:
        if r["dir"] == "recv" and r["msg"] == "NEWLEADER":
            cur = [r]
        elif cur is not None:
            cur.append(r)
            if r["dir"] == "recv" and r["msg"] == "UPTODATE":
                out.append(cur)
                cur = None
    return out


def _windows_with_proposals(rows_by_sid: Mapping[int, Sequence[Row]],
                            follower: int | None) -> Iterator[tuple[int, int, list[Row], int, list[int]]]:
    """(sid, incarnation, window, NEWLEADER's zxid, zxids of PROPOSALs received after it) for each
    sync window of each follower (only ``follower`` if given) in which proposals arrived."""
    for sid, rows in sorted(rows_by_sid.items()):
        if follower is not None and sid != follower:
            continue
        for inc, msgs in sorted(_by_inc(rows).items()):
            for w in _sync_windows(msgs):
                n = int(w[0]["zxid"] or 0)
                props = [int(r["zxid"]) for r in w if r["dir"] == "recv" and r["msg"] == "PROPOSAL"
                         and r["zxid"] is not None and int(r["zxid"]) > n]
                if props:
                    yield sid, inc, w, n, props


def proposal_during_sync(rows_by_sid: Mapping[int, Sequence[Row]], follower: int | None = None) -> ProofResult:
    name = "proposal-during-sync"
    for sid, inc, w, n, props in _windows_with_proposals(rows_by_sid, follower):
        commits = [int(r["zxid"]) for r in w[1:-1] if r["dir"] == "recv" and r["msg"] == "COMMIT"]
        top = max([*commits, int(w[-1]["zxid"] or 0)])
        p = props[0]
        if top >= p:
            return ProofResult(name, True,
                               f"replica {sid} (incarnation {inc}) received NEWLEADER {fmt(n)}, then PROPOSAL "
                               f"{fmt(p)} ({len(props)} proposal(s) in the window), then its commit: "
                               f"{len(commits)} COMMIT(s) inside the window, UPTODATE {fmt(int(w[-1]['zxid'] or 0))} "
                               f"ending it; commits_in_window={len(commits)}")
    return ProofResult(name, False, "no follower received a PROPOSAL between NEWLEADER and UPTODATE that was "
                                    "committed by the end of its sync")


def ack_during_sync(rows_by_sid: Mapping[int, Sequence[Row]], leader: int | None = None,
                    follower: int | None = None) -> ProofResult:
    name = "ack-during-sync"
    for sid, inc, w, n, props in _windows_with_proposals(rows_by_sid, follower):
        acks = [int(r["zxid"]) for r in w[:-1] if r["dir"] in ("send", "hold") and r["msg"] == "ACK"
                and r["zxid"] is not None and int(r["zxid"]) >= props[0]]
        if not acks:
            continue
        p, a = props[0], acks[0]
        lead = int(w[0]["peer"])
        if leader is not None and lead != leader:
            continue
        seen = [(r["msg"], int(r["zxid"] or 0)) for r in _leader_recv(rows_by_sid.get(lead, ()), sid)]
        try:
            i = seen.index(("ACK_NEWLEADER", n))
        except ValueError:
            return ProofResult(name, False, f"leader {lead}'s trace has no ACK_NEWLEADER {fmt(n)} from {sid}")
        after = seen[i + 1:i + 2]
        if after != [("ACK", a)]:
            return ProofResult(name, False, f"leader {lead} received {after} after ACK_NEWLEADER from {sid}, "
                                            f"not ACK {fmt(a)}")
        return ProofResult(name, True,
                           f"replica {sid} (incarnation {inc}) got PROPOSAL {fmt(p)} after NEWLEADER {fmt(n)} and "
                           f"acknowledged it (ACK {fmt(a)}) before it received UPTODATE; leader {lead} received "
                           f"ACK_NEWLEADER {fmt(n)} then ACK {fmt(a)} from it, back to back")
    return ProofResult(name, False, "no follower acknowledged a proposal it got during sync before UPTODATE")


def _leader_recv(rows: Sequence[Row], learner: int) -> list[Row]:
    return [r for r in rows if r.get("kind") == "message" and r.get("dir") == "recv" and r.get("peer") == learner]


PROOFS: dict[str, Callable[..., ProofResult]] = {
    "proposal-during-sync": proposal_during_sync,
    "ack-during-sync": ack_during_sync,
}


def elections(states_by_sid: Mapping[int, Sequence[Row]]) -> dict[int, int]:
    """Elections each replica began over the run, the "no loop" measure: one per start (a
    ``STARTED`` row: every incarnation begins by looking for a leader) and one per iteration
    that ended (a ``LOOKING`` row)."""
    return {sid: sum(1 for r in rows if r.get("kind") == "state" and r.get("state") in ("LOOKING", "STARTED"))
            for sid, rows in sorted(states_by_sid.items())}


# -- ZOOKEEPER-4643, 4646, 4712: what a follower had on disk when it died, and what it carried
# across iterations. One incarnation's rows of every kind (state, message, its own crash-point
# fault row), in written order.


def _incarnations(rows: Sequence[Row]) -> dict[int, list[Row]]:
    out: dict[int, list[Row]] = {}
    for r in rows:
        out.setdefault(int(r.get("inc", 0)), []).append(r)
    return out


def _crashed_at(rows: list[Row], point: str) -> int | None:
    """Index of the incarnation's ``crash-point`` fault row for ``point`` (a replica writes one
    just before it dies there), or None."""
    for i, r in enumerate(rows):
        if r.get("kind") == "fault" and r.get("fault") == "crash-point" \
                and str(r.get("target", "")).split(":", 1)[-1].split("@", 1)[0] == point:
            return i
    return None


def _msg(r: Row, direction: str, name: str) -> bool:
    return r.get("kind") == "message" and r.get("dir") == direction and r.get("msg") == name


def _last_sync_before(rows: list[Row], end: int) -> tuple[int, Row, Row | None, int] | None:
    """The last NEWLEADER received before ``end``: (its index, its row, the DIFF/TRUNC/SNAP
    received before it in the same sync, the epoch of the FOLLOWING row written after it)."""
    i = next((k for k in range(end - 1, -1, -1) if _msg(rows[k], "recv", "NEWLEADER")), None)
    if i is None:
        return None
    sync = next((r for r in reversed(rows[:i]) if r.get("kind") == "message" and r.get("dir") == "recv"
                 and r.get("msg") in ("DIFF", "TRUNC", "SNAP")), None)
    epoch = next((int(r["epoch"]) for r in rows[i + 1:end] if r.get("kind") == "state"
                  and r.get("state") == "FOLLOWING"), -1)
    return i, rows[i], sync, epoch


def _started_epoch(rows: list[Row]) -> int:
    return next((int(r["epoch"]) for r in rows if r.get("kind") == "state" and r.get("state") == "STARTED"), -1)


def crash_after_current_epoch(rows_by_sid: Mapping[int, Sequence[Row]], follower: int | None = None) -> ProofResult:
    """ZOOKEEPER-4643's moment: a follower incarnation that started with an older current epoch
    synced (DIFF/TRUNC/SNAP), received NEWLEADER for a newer epoch, and died at
    ``persist-after:current-epoch`` (its new current epoch durable) before its ACK of NEWLEADER
    left. Whether the sync's txns were durable by then is the disk's to say (the scenario's
    ``epoch`` and ``durable`` expectations); this proves the moment from the trace."""
    name = "crash-after-current-epoch"
    for sid, rows in sorted(rows_by_sid.items()):
        if follower is not None and sid != follower:
            continue
        for inc, rs in sorted(_incarnations(rows).items()):
            end = _crashed_at(rs, "persist-after:current-epoch")
            if end is None:
                continue
            got = _last_sync_before(rs, end)
            if got is None:
                continue
            i, nl, sync, epoch = got
            start = _started_epoch(rs)
            acked = any(_msg(r, "send", "ACK_NEWLEADER") for r in rs[i:end])
            if sync is None or acked or not epoch > start:
                continue
            return ProofResult(name, True,
                               f"replica {sid} (incarnation {inc}) started in epoch {start}, was synced by "
                               f"{sync['msg']} {fmt(int(sync['zxid'] or 0))}, received NEWLEADER "
                               f"{fmt(int(nl['zxid'] or 0))} for epoch {epoch} from {nl['peer']} and died at "
                               f"persist-after:current-epoch with no ACK_NEWLEADER sent")
    return ProofResult(name, False, "no follower died at persist-after:current-epoch after a sync into a newer "
                                    "epoch and before its ACK of NEWLEADER left")


def crash_after_newleader_ack(rows_by_sid: Mapping[int, Sequence[Row]], follower: int | None = None) -> ProofResult:
    """ZOOKEEPER-4646's moment: a follower incarnation synced (DIFF/TRUNC/SNAP), received
    NEWLEADER(n) for a newer epoch, sent ACK_NEWLEADER(n) and died right after it left
    (``send-after:ACK_NEWLEADER``); its leader received that ACK and established its epoch after
    it (an ``established`` row for that epoch following the receipt): the leader counted a
    follower that was gone. What the follower had durable is the disk's to say."""
    name = "crash-after-newleader-ack"
    for sid, rows in sorted(rows_by_sid.items()):
        if follower is not None and sid != follower:
            continue
        for inc, rs in sorted(_incarnations(rows).items()):
            end = _crashed_at(rs, "send-after:ACK_NEWLEADER")
            if end is None:
                continue
            got = _last_sync_before(rs, end)
            if got is None:
                continue
            i, nl, sync, epoch = got
            n = int(nl["zxid"] or 0)
            sent = [r for r in rs[i:end] if _msg(r, "send", "ACK_NEWLEADER")]
            if sync is None or not sent or int(sent[-1]["zxid"] or 0) != n or not epoch > _started_epoch(rs):
                continue
            lead = int(nl["peer"])
            lrows = list(rows_by_sid.get(lead, ()))
            k = next((j for j, r in enumerate(lrows) if _msg(r, "recv", "ACK_NEWLEADER")
                      and r.get("peer") == sid and int(r["zxid"] or 0) == n), None)
            if k is None:
                return ProofResult(name, False, f"leader {lead}'s trace has no ACK_NEWLEADER {fmt(n)} from {sid}")
            est = next((r for r in lrows[k:] if r.get("kind") == "established" and int(r["epoch"]) == epoch), None)
            if est is None:
                return ProofResult(name, False, f"leader {lead} received ACK_NEWLEADER {fmt(n)} from {sid} but "
                                                f"never established epoch {epoch} after it")
            return ProofResult(name, True,
                               f"replica {sid} (incarnation {inc}) was synced by {sync['msg']} "
                               f"{fmt(int(sync['zxid'] or 0))}, received NEWLEADER {fmt(n)} for epoch {epoch}, "
                               f"sent ACK_NEWLEADER {fmt(n)} and died right after it left; leader {lead} "
                               f"received it and established epoch {epoch} at {fmt(int(est['zxid'] or 0))}")
    return ProofResult(name, False, "no follower died right after its ACK of NEWLEADER left, after a sync into "
                                    "a newer epoch")


def proposals_across_iterations(rows_by_sid: Mapping[int, Sequence[Row]],
                                follower: int | None = None) -> ProofResult:
    """ZOOKEEPER-4712's precondition: one follower incarnation (no restart) received PROPOSALs
    in an iteration of epoch e that it never saw committed (no COMMIT or UPTODATE at or above
    them) and whose ACKs never left (held, then dropped with the channel, or never emitted);
    the iteration ended (a LOOKING row), and the same incarnation then synced with a leader in
    an epoch above e (NEWLEADER received, FOLLOWING in that epoch). What it carried over is the
    end checks' to judge (no loss, histories agree, ``zabray check``)."""
    name = "proposals-across-iterations"
    for sid, rows in sorted(rows_by_sid.items()):
        if follower is not None and sid != follower:
            continue
        for inc, rs in sorted(_incarnations(rows).items()):
            props: list[int] = []
            leader, top_commit, top_ack = -1, 0, 0
            for k, r in enumerate(rs):
                kind, what = r.get("kind"), r.get("msg")
                z = int(r.get("zxid") or 0)
                if kind == "state" and r.get("state") == "FOLLOWING":
                    leader = int(r.get("leader", -1))
                elif kind == "message" and r.get("dir") == "recv" and what == "PROPOSAL":
                    props.append(z)
                elif kind == "message" and r.get("dir") == "recv" and what in ("COMMIT", "UPTODATE"):
                    top_commit = max(top_commit, z)
                elif kind == "message" and r.get("dir") == "send" and what == "ACK":
                    top_ack = max(top_ack, z)
                elif kind == "state" and r.get("state") == "LOOKING":
                    open_ = [p for p in props if p > max(top_commit, top_ack)]
                    nxt = _next_sync(rs, k, open_[0] >> 32) if open_ else None
                    if nxt is not None:
                        lead2, epoch2, n = nxt
                        dropped = sum(1 for x in rs[:k] if _msg(x, "drop", "ACK") and int(x["zxid"] or 0) >= open_[0])
                        return ProofResult(name, True,
                                           f"replica {sid} (incarnation {inc}, no restart) received "
                                           f"{len(open_)} PROPOSAL(s) {fmt(open_[0])}..{fmt(open_[-1])} from "
                                           f"{leader} in epoch {open_[0] >> 32}, none committed to it and no ACK "
                                           f"of them sent ({dropped} ACK(s) dropped with the channel); went "
                                           f"LOOKING, then received NEWLEADER {fmt(n)} from {lead2} and followed "
                                           f"it in epoch {epoch2}")
                    props, leader, top_commit, top_ack = [], -1, 0, 0
    return ProofResult(name, False, "no follower carried uncommitted, unacknowledged proposals out of an "
                                    "iteration into a sync with a leader of a later epoch, without a restart")


def _next_sync(rs: list[Row], after: int, epoch: int) -> tuple[int, int, int] | None:
    """(leader, epoch, NEWLEADER's zxid) of the first NEWLEADER received after row ``after`` whose
    state row (FOLLOWING in the leader's epoch, written as it is processed) is above ``epoch``."""
    for j in range(after + 1, len(rs)):
        if _msg(rs[j], "recv", "NEWLEADER"):
            st = next((r for r in rs[j + 1:] if r.get("kind") == "state"), None)  # written at NEWLEADER
            if st is not None and st.get("state") == "FOLLOWING" and int(st["epoch"]) > epoch:
                return int(rs[j]["peer"]), int(st["epoch"]), int(rs[j]["zxid"] or 0)
    return None


PROOFS.update({
    "crash-after-current-epoch": crash_after_current_epoch,
    "crash-after-newleader-ack": crash_after_newleader_ack,
    "proposals-across-iterations": proposals_across_iterations,
})
