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

from zabray.protocol.zxid import epoch_of, fmt

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
    """Every row (any kind) of one replica, by incarnation, in written order."""
    out: dict[int, list[Row]] = {}
    for r in rows:
        out.setdefault(int(r.get("inc") or 0), []).append(r)
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


def _crashed_after_sync(rows_by_sid: Mapping[int, Sequence[Row]], follower: int | None,
                       point: str) -> Iterator[tuple[int, int, list[Row], int, int, Row, Row | None, int]]:
    """(sid, incarnation, its rows, index of its crash row, then ``_last_sync_before``'s four
    values) for each follower incarnation that died at ``point`` after receiving a NEWLEADER."""
    for sid, rows in sorted(rows_by_sid.items()):
        if follower is not None and sid != follower:
            continue
        for inc, rs in sorted(_incarnations(rows).items()):
            end = _crashed_at(rs, point)
            got = None if end is None else _last_sync_before(rs, end)
            if end is not None and got is not None:
                yield (sid, inc, rs, end, *got)


def crash_after_current_epoch(rows_by_sid: Mapping[int, Sequence[Row]], follower: int | None = None) -> ProofResult:
    """ZOOKEEPER-4643's moment: a follower incarnation that started with an older current epoch
    synced (DIFF/TRUNC/SNAP), received NEWLEADER for a newer epoch, and died at
    ``persist-after:current-epoch`` (its new current epoch durable) before its ACK of NEWLEADER
    left. Whether the sync's txns were durable by then is the disk's to say (the scenario's
    ``epoch`` and ``durable`` expectations); this proves the moment from the trace."""
    name = "crash-after-current-epoch"
    for sid, inc, rs, end, i, nl, sync, epoch in _crashed_after_sync(rows_by_sid, follower,
                                                                     "persist-after:current-epoch"):
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
    for sid, inc, rs, end, i, nl, sync, epoch in _crashed_after_sync(rows_by_sid, follower,
                                                                     "send-after:ACK_NEWLEADER"):
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


# -- uncommitted tails: ZOOKEEPER-3911, 2845, 1154 ---------------------------------------------------
# Each reads one replica incarnation's rows in written order; 1154's "while it was down" alone
# compares wall clocks across processes (``t``: one host's clock in a local ensemble).


def _zx(r: Row) -> int:
    return int(r.get("zxid") or 0)


def _deliverers(rows_by_sid: Mapping[int, Sequence[Row]], p: int) -> dict[int, str]:
    """sid -> digest of its first delivery of ``p``, for every replica that ever delivered it."""
    out: dict[int, str] = {}
    for sid, rows in rows_by_sid.items():
        for r in rows:
            if r.get("kind") == "deliver" and _zx(r) == p:
                out[sid] = str(r.get("digest"))
                break
    return out


def _sent_uncommitted(lead_rows: Sequence[Row], learner: int, start: int,
                      diffs: set[int]) -> tuple[int, str, int, bool] | None:
    """The lowest proposal p the leader put in a DIFF to ``learner`` (one whose last zxid is in
    ``diffs``, with ``start`` < p) before it delivered p: (p, digest, incarnation, delivered later)."""
    for inc, rs in sorted(_incarnations(lead_rows).items()):
        proposed: dict[int, str] = {}
        delivered: set[int] = set()
        for i, r in enumerate(rs):
            kind = r.get("kind")
            if kind == "propose":
                proposed[_zx(r)] = str(r.get("digest"))
            elif kind == "deliver":
                delivered.add(_zx(r))
            elif _msg(r, "send", "DIFF") and r.get("peer") == learner and _zx(r) in diffs:
                open_ = sorted(z for z in proposed if start < z <= _zx(r) and z not in delivered)
                if open_:
                    p = open_[0]
                    later = any(x.get("kind") == "deliver" and _zx(x) == p for x in rs[i + 1:])
                    return p, proposed[p], inc, later
    return None


def _delivery_after_commit(rows: Sequence[Row], p: int, inc0: int, from_index: int) -> tuple[bool, str]:
    """Whether the replica's first delivery of p (from ``inc0``'s row ``from_index`` on) came only
    after it learned p committed in that incarnation: a COMMIT or UPTODATE at or above p, its own
    establishment as leader at or above p, or a snapshot covering p."""
    for inc, rs in sorted(_incarnations(rows).items()):
        if inc < inc0:
            continue
        known, how = 0, ""
        for r in rs[from_index if inc == inc0 else 0:]:
            kind, z = r.get("kind"), _zx(r)
            if (_msg(r, "recv", "COMMIT") or _msg(r, "recv", "UPTODATE")) and z > known:
                known, how = z, f"{r['msg']} {fmt(z)} from {r.get('peer')}"
            elif kind in ("established", "snapshot") and z > known:
                known, how = z, f"{'its own establishment as leader' if kind == 'established' else 'a snapshot'} at {fmt(z)}"
            elif kind == "deliver" and z == p:
                if known >= p:
                    return True, f"delivered it (incarnation {inc}) only after {how}"
                return False, (f"delivered it (incarnation {inc}) before learning it committed (highest commit "
                               f"it knew: {fmt(known)})")
    return True, "never delivered it"


def uncommitted_diff(rows_by_sid: Mapping[int, Sequence[Row]], follower: int | None = None) -> ProofResult:
    """ZOOKEEPER-3911's precondition: a leader synced a follower by DIFF carrying a proposal p it
    had not committed (its ``send DIFF`` row precedes any delivery of p); the follower received
    it before NEWLEADER. Holds only if the follower then delivered p no earlier than it learned
    p committed (COMMIT/UPTODATE >= p, or its own establishment) with the value proposed, or
    never delivered it. Reports the UPTODATE that ended the sync (below p: p not known committed
    at the follower when its sync ended, ZooKeeper's window) and whether the old leader committed p."""
    name = "uncommitted-diff"
    for fsid, rows in sorted(rows_by_sid.items()):
        if follower is not None and fsid != follower:
            continue
        for inc, rs in sorted(_incarnations(rows).items()):
            start: int | None = None
            lead = -1
            diffs: set[int] = set()
            for i, r in enumerate(rs):
                if _msg(r, "send", "FOLLOWERINFO"):
                    start, lead, diffs = _zx(r), int(r.get("peer", -1)), set()
                elif _msg(r, "recv", "DIFF") and r.get("peer") == lead:
                    diffs.add(_zx(r))
                elif _msg(r, "recv", "NEWLEADER") and r.get("peer") == lead and diffs and start is not None:
                    found = _sent_uncommitted(rows_by_sid.get(lead, ()), fsid, start, diffs)
                    if found is None:
                        continue
                    p, dg, linc, committed = found
                    up = next((x for x in rs[i + 1:] if _msg(x, "recv", "UPTODATE") or _msg(x, "send", "FOLLOWERINFO")),
                              None)
                    end = (f"its sync ended with UPTODATE {fmt(_zx(up))}"
                           + (" < p: p not known committed there" if _zx(up) < p else " >= p")
                           if up is not None and up.get("msg") == "UPTODATE" else "its sync never ended with that leader")
                    ok, how = _delivery_after_commit(rows, p, inc, i + 1)
                    who = _deliverers(rows_by_sid, p)
                    wrong = sorted(s for s, d in who.items() if d != dg)
                    head = (f"replica {fsid} (incarnation {inc}) received p={fmt(p)} in a DIFF from leader {lead} "
                            f"(incarnation {linc}) before NEWLEADER {fmt(_zx(r))}, sent while {lead} had not "
                            f"committed it; {end}")
                    if not ok:
                        return ProofResult(name, False, f"{head}; but it {how}")
                    if wrong:
                        return ProofResult(name, False, f"{head}; but replica(s) {wrong} delivered another value at p")
                    fate = (f"{lead} committed p after that sync (itself and {fsid} a quorum); " if committed
                            else f"{lead} never committed p; ")
                    fate += (f"p survived: delivered by {sorted(who)} with the value {lead} proposed" if who
                             else "p died uncommitted: nobody delivered it")
                    return ProofResult(name, True, f"{head}; it {how}; {fate}")
    return ProofResult(name, False, "no follower received in a DIFF a proposal its leader had not committed")


def _truncated_tails(rows_by_sid: Mapping[int, Sequence[Row]]) -> Iterator[tuple[int, int, int, int, Row, Row]]:
    """(sid, incarnation that proposed p, p, incarnation truncated, its FOLLOWERINFO(f >= p) row,
    the TRUNC(t < p) row it then received from another replica) for each replica that proposed
    p and later reported p in its log to a leader that cut it off."""
    for sid, rows in sorted(rows_by_sid.items()):
        incs = _incarnations(rows)
        for pinc, prs in sorted(incs.items()):
            for p in [_zx(r) for r in prs if r.get("kind") == "propose"]:
                for tinc, trs in sorted(incs.items()):
                    if tinc < pinc:
                        continue
                    first = next((i for i, r in enumerate(trs) if r.get("kind") == "propose" and _zx(r) == p), -1) \
                        if tinc == pinc else -1
                    info: Row | None = None
                    for r in trs[first + 1:]:
                        if _msg(r, "send", "FOLLOWERINFO"):
                            info = r if _zx(r) >= p else None
                        elif (info is not None and _msg(r, "recv", "TRUNC") and _zx(r) < p
                              and r.get("peer") == info.get("peer") != sid):
                            yield sid, pinc, p, tinc, info, r
                            break


def _nobody_delivered(rows_by_sid: Mapping[int, Sequence[Row]], p: int) -> str:
    who = sorted(_deliverers(rows_by_sid, p))
    return f"but replica(s) {who} delivered p" if who else ""


def truncated_without_restart(rows_by_sid: Mapping[int, Sequence[Row]]) -> ProofResult:
    """ZOOKEEPER-2845's precondition: a replica proposed p, left its leadership (a LOOKING row)
    and, in the same incarnation (no restart: its in-memory history kept), reported p in its
    FOLLOWERINFO to a leader of a later epoch, which sent TRUNC below p. Holds only if nobody
    ever delivered p."""
    name = "truncated-without-restart"
    for sid, pinc, p, tinc, info, trunc in _truncated_tails(rows_by_sid):
        if tinc != pinc:
            continue
        rs = _incarnations(rows_by_sid[sid])[tinc]
        k = next(k for k, x in enumerate(rs) if x.get("kind") == "propose" and _zx(x) == p)
        i, j = rs.index(info), rs.index(trunc)
        looking = [r for r in rs[k:i] if r.get("kind") == "state" and r.get("state") == "LOOKING"]
        follow = next((r for r in rs[j + 1:] if r.get("kind") == "state" and r.get("state") == "FOLLOWING"
                       and int(r.get("epoch") or 0) > epoch_of(p)), None)
        if not looking or follow is None:
            continue
        head = (f"replica {sid} (incarnation {pinc}) proposed p={fmt(p)}, went LOOKING, and in the same incarnation "
                f"reported last zxid {fmt(_zx(info))} to {trunc.get('peer')}, which sent TRUNC {fmt(_zx(trunc))}; "
                f"it then followed {follow.get('leader')} in epoch {follow.get('epoch')}")
        bad = _nobody_delivered(rows_by_sid, p)
        return ProofResult(name, not bad, f"{head}; {bad or 'nobody ever delivered p'}")
    return ProofResult(name, False, "no replica was truncated below a proposal of its own without a restart")


def truncated_after_absence(rows_by_sid: Mapping[int, Sequence[Row]]) -> ProofResult:
    """ZOOKEEPER-1154's precondition: a replica proposed p and its process ended; while it was
    down (after its incarnation's last row, before the next one's first, on one host's clock)
    another replica established an epoch above p's; restarted, it reported p from its disk in
    FOLLOWERINFO and was sent TRUNC below p. Holds only if nobody ever delivered p."""
    name = "truncated-after-absence"
    for sid, pinc, p, tinc, info, trunc in _truncated_tails(rows_by_sid):
        incs = _incarnations(rows_by_sid[sid])
        nxt = min((k for k in incs if k > pinc), default=None)
        if tinc == pinc or nxt is None:
            continue
        t0, t1 = float(incs[pinc][-1]["t"]), float(incs[nxt][0]["t"])
        est = [(o, r) for o, rows in sorted(rows_by_sid.items()) if o != sid for r in rows
               if r.get("kind") == "established" and int(r.get("epoch") or 0) > epoch_of(p) and t0 < float(r["t"]) < t1]
        if not est:
            continue
        o, r = est[0]
        te = float(r["t"])
        head = (f"replica {sid} proposed p={fmt(p)} in incarnation {pinc}; {te - t0:.3f} s after that incarnation's "
                f"last row, replica {o} established epoch {r.get('epoch')}, {t1 - te:.3f} s before incarnation {nxt} "
                f"began; restarted, {sid} reported last zxid {fmt(_zx(info))} (p on its disk) to "
                f"{trunc.get('peer')}, which sent TRUNC {fmt(_zx(trunc))}")
        bad = _nobody_delivered(rows_by_sid, p)
        return ProofResult(name, not bad, f"{head}; {bad or 'nobody ever delivered p'}")
    return ProofResult(name, False, "no replica was truncated below its own proposal after missing an election")


PROOFS.update({
    "uncommitted-diff": uncommitted_diff,
    "truncated-without-restart": truncated_without_restart,
    "truncated-after-absence": truncated_after_absence,
})
