"""The proofs of ZOOKEEPER-3911, 2845 and 1154's preconditions (zabray.replay.proofs), on hand-built
trace rows: each holds on the interleaving it names and fails on a near miss, so a scenario's
proof can fail."""

from __future__ import annotations

from typing import Any

from zabray.protocol.zxid import Zxid
from zabray.replay.proofs import PROOFS, truncated_after_absence, truncated_without_restart, uncommitted_diff

B, P, N = int(Zxid.of(1, 3)), int(Zxid.of(1, 4)), int(Zxid.of(2, 1))


def msg(d: str, name: str, peer: int, zxid: int | None, inc: int = 0, t: float = 0.0) -> dict[str, Any]:
    return {"kind": "message", "dir": d, "msg": name, "peer": peer, "zxid": zxid, "inc": inc, "t": t}


def ev(kind: str, zxid: int, inc: int = 0, t: float = 0.0, **kw: Any) -> dict[str, Any]:
    return {"kind": kind, "zxid": zxid, "inc": inc, "t": t, "epoch": Zxid(zxid).epoch, "digest": "d", **kw}


def state(s: str, epoch: int, leader: int, inc: int = 0, t: float = 0.0) -> dict[str, Any]:
    return {"kind": "state", "state": s, "epoch": epoch, "leader": leader, "inc": inc, "t": t}


def test_the_new_proofs_are_registered() -> None:
    assert {"uncommitted-diff", "truncated-without-restart", "truncated-after-absence"} <= set(PROOFS)


# -- ZOOKEEPER-3911 --------------------------------------------------------------------------------

def leader_3911(commit_before_diff: bool = False) -> list[dict[str, Any]]:
    rows = [ev("propose", P), msg("send", "DIFF", 1, P), msg("send", "NEWLEADER", 1, P),
            msg("recv", "ACK_NEWLEADER", 1, P), msg("send", "UPTODATE", 1, B), ev("deliver", P)]
    if commit_before_diff:
        rows = [rows[0], rows[5], *rows[1:5]]
    return rows


def follower_3911(deliver_at_uptodate: bool = False) -> list[dict[str, Any]]:
    rows = [msg("send", "FOLLOWERINFO", 3, B, inc=1), msg("recv", "LEADERINFO", 3, None, inc=1),
            msg("recv", "DIFF", 3, P, inc=1), msg("recv", "NEWLEADER", 3, P, inc=1),
            msg("recv", "UPTODATE", 3, B, inc=1), ev("deliver", B, inc=1)]
    if deliver_at_uptodate:  # ZooKeeper's bug: the synced history made visible at UPTODATE
        rows.append(ev("deliver", P, inc=1))
    rows += [state("LOOKING", 1, -1, inc=1), state("LEADING", 1, 1, inc=1), ev("established", P, inc=1)]
    if not deliver_at_uptodate:
        rows.append(ev("deliver", P, inc=1))
    return rows


def test_3911_holds_when_the_follower_waits_for_the_commit() -> None:
    r = uncommitted_diff({1: follower_3911(), 3: leader_3911(), 2: [ev("deliver", P)]})
    assert r.ok, r.text
    assert "UPTODATE 1:3 < p" in r.text and "own establishment as leader at 1:4" in r.text
    assert "3 committed p" in r.text and "p survived: delivered by [1, 2, 3]" in r.text


def test_3911_holds_when_p_dies_uncommitted_and_nobody_delivers_it() -> None:
    leader = [r for r in leader_3911() if r["kind"] != "deliver"]  # the leader died before committing p
    follower = [*follower_3911()[:6], state("LOOKING", 1, -1, inc=1), msg("send", "FOLLOWERINFO", 2, P, inc=1),
                msg("recv", "TRUNC", 2, B, inc=1), msg("recv", "NEWLEADER", 2, N, inc=1)]
    r = uncommitted_diff({1: follower, 3: leader, 2: new_leader(2.0)})
    assert r.ok, r.text
    assert "it never delivered it; 3 never committed p; p died uncommitted: nobody delivered it" in r.text


def test_3911_fails_when_the_follower_delivers_p_at_uptodate() -> None:
    r = uncommitted_diff({1: follower_3911(deliver_at_uptodate=True), 3: leader_3911()})
    assert not r.ok
    assert "before learning it committed (highest commit it knew: 1:3)" in r.text


def test_3911_not_shown_when_the_diff_carried_only_committed_txns() -> None:
    r = uncommitted_diff({1: follower_3911(), 3: leader_3911(commit_before_diff=True)})
    assert not r.ok and "no follower received in a DIFF" in r.text


def test_3911_fails_when_another_value_is_delivered_at_p() -> None:
    other = [{**ev("deliver", P), "digest": "other"}]
    r = uncommitted_diff({1: follower_3911(), 3: leader_3911(), 2: other})
    assert not r.ok and "delivered another value" in r.text


# -- ZOOKEEPER-2845 and 1154 ---------------------------------------------------------------------

def old_leader(restart: bool, t0: float = 1.0, t1: float = 3.0) -> list[dict[str, Any]]:
    inc = 1 if restart else 0
    rows = [state("LEADING", 1, 3, t=0.5), ev("propose", P, t=0.6)]
    if not restart:
        rows.append(state("LOOKING", 1, -1, t=t0))
    else:
        rows.append(state("LEADING", 1, 3, t=t0))  # its last row, then it was killed
        rows.append(state("STARTED", 1, -1, inc=1, t=t1))
    rows += [msg("send", "FOLLOWERINFO", 2, P, inc=inc, t=t1 + 0.1), msg("recv", "TRUNC", 2, B, inc=inc, t=t1 + 0.2),
             msg("recv", "DIFF", 2, N, inc=inc, t=t1 + 0.2), state("FOLLOWING", 2, 2, inc=inc, t=t1 + 0.3)]
    return rows


def new_leader(t: float) -> list[dict[str, Any]]:
    return [state("LEADING", 2, 2, t=t), ev("established", B, t=t, epoch=2), ev("propose", N, t=t), ev("deliver", N, t=t)]


def test_2845_holds_for_a_truncation_in_the_same_incarnation() -> None:
    r = truncated_without_restart({3: old_leader(restart=False), 2: new_leader(2.0)})
    assert r.ok, r.text
    assert "reported last zxid 1:4 to 2, which sent TRUNC 1:3" in r.text and "followed 2 in epoch 2" in r.text


def test_2845_fails_if_p_was_delivered_and_is_not_shown_after_a_restart() -> None:
    r = truncated_without_restart({3: old_leader(restart=False), 2: [*new_leader(2.0), ev("deliver", P)]})
    assert not r.ok and "replica(s) [2] delivered p" in r.text
    r = truncated_without_restart({3: old_leader(restart=True), 2: new_leader(2.0)})
    assert not r.ok and "without a restart" in r.text
    no_trunc = [x for x in old_leader(restart=False) if x.get("msg") != "TRUNC"]
    assert not truncated_without_restart({3: no_trunc, 2: new_leader(2.0)}).ok


def test_1154_holds_when_the_election_happened_while_it_was_down() -> None:
    r = truncated_after_absence({3: old_leader(restart=True), 2: new_leader(2.0)})
    assert r.ok, r.text
    assert "1.000 s after that incarnation's last row, replica 2 established epoch 2" in r.text
    assert "reported last zxid 1:4 (p on its disk)" in r.text


def test_1154_not_shown_if_the_election_was_not_during_its_absence_or_p_was_delivered() -> None:
    r = truncated_after_absence({3: old_leader(restart=True), 2: new_leader(3.5)})  # after it came back
    assert not r.ok and "after missing an election" in r.text
    assert not truncated_after_absence({3: old_leader(restart=False), 2: new_leader(2.0)}).ok  # no restart
    r = truncated_after_absence({3: old_leader(restart=True), 2: [*new_leader(2.0), ev("deliver", P, t=2.5)]})
    assert not r.ok and "delivered p" in r.text
