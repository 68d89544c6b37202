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
