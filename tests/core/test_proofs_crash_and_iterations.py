"""The proofs of ZOOKEEPER-4643, 4646 and 4712's preconditions (zabray/replay/proofs.py) on hand-built
trace rows: each proves the moment it names, and refuses rows that miss one part of it; and the
scenario condition ``epoch`` (a replica's epochs on disk) is validated like the others."""

from __future__ import annotations

from typing import Any

import pytest

from zabray.errors import ConfigError
from zabray.protocol.zxid import Zxid
from zabray.replay.proofs import PROOFS
from zabray.replay.scenario import parse

Z5, Z25 = int(Zxid.of(1, 5)), int(Zxid.of(1, 25))


def msg(inc: int, d: str, name: str, peer: int, zxid: int | None = None) -> dict[str, Any]:
    return {"kind": "message", "inc": inc, "dir": d, "msg": name, "peer": peer, "zxid": zxid}


def state(inc: int, s: str, epoch: int, leader: int = -1) -> dict[str, Any]:
    return {"kind": "state", "inc": inc, "state": s, "epoch": epoch, "leader": leader}


def crash(inc: int, sid: int, point: str) -> dict[str, Any]:
    return {"kind": "fault", "inc": inc, "fault": "crash-point", "target": f"{sid}:{point}"}


def synced(sync: str = "DIFF") -> list[dict[str, Any]]:
    """Follower 1's second incarnation: started in epoch 1 with 1:5, synced by leader 2 into epoch 2."""
    return [state(1, "STARTED", 1), state(1, "FOLLOWING", 1, 2), msg(1, "send", "FOLLOWERINFO", 2, Z5),
            msg(1, "recv", "LEADERINFO", 2), msg(1, "send", "ACKEPOCH", 2, Z5), msg(1, "recv", sync, 2, Z25),
            msg(1, "recv", "NEWLEADER", 2, Z25), state(1, "FOLLOWING", 2, 2)]


# -- ZOOKEEPER-4643: died right after currentEpoch was durable, before its ACK of NEWLEADER --------

def test_crash_after_current_epoch_is_proven_from_the_followers_rows() -> None:
    rows = {1: [state(0, "STARTED", 0), *synced(), crash(1, 1, "persist-after:current-epoch")], 2: []}
    p = PROOFS["crash-after-current-epoch"](rows)
    assert p.ok, p.text
    assert "replica 1 (incarnation 1) started in epoch 1, was synced by DIFF 1:25" in p.text
    assert "NEWLEADER 1:25 for epoch 2 from 2" in p.text


@pytest.mark.parametrize("rows, why", [
    ([*synced(), msg(1, "send", "ACK_NEWLEADER", 2, Z25), crash(1, 1, "persist-after:current-epoch")],
     "its ACK of NEWLEADER had left: not the moment"),
    ([*synced(), crash(1, 1, "persist-after:txns")], "died at another point"),
    ([*synced()[:5], *synced()[6:], crash(1, 1, "persist-after:current-epoch")], "no sync packet before NEWLEADER"),
    ([state(1, "STARTED", 2), *synced()[1:], crash(1, 1, "persist-after:current-epoch")], "no newer epoch"),
    (synced(), "never crashed"),
])
def test_crash_after_current_epoch_refuses_rows_that_miss_a_part(rows: list[dict[str, Any]], why: str) -> None:
    p = PROOFS["crash-after-current-epoch"]({1: rows})
    assert not p.ok, why


# -- ZOOKEEPER-4646: died right after its ACK of NEWLEADER left; the leader counted it ---------------

def leader_rows(established: bool = True, before: bool = False) -> list[dict[str, Any]]:
    est = [{"kind": "established", "inc": 0, "epoch": 2, "zxid": Z25}] if established else []
    recv = [msg(0, "recv", "ACK_NEWLEADER", 1, Z25)]
    return [state(0, "LEADING", 2), *(est + recv if before else recv + est)]


def acked_then_crashed() -> list[dict[str, Any]]:
    return [*synced(), msg(1, "send", "ACK_NEWLEADER", 2, Z25), crash(1, 1, "send-after:ACK_NEWLEADER")]


def test_crash_after_newleader_ack_is_proven_from_both_traces() -> None:
    p = PROOFS["crash-after-newleader-ack"]({1: acked_then_crashed(), 2: leader_rows()})
    assert p.ok, p.text
    assert "sent ACK_NEWLEADER 1:25 and died right after it left" in p.text
    assert "leader 2 received it and established epoch 2 at 1:25" in p.text


@pytest.mark.parametrize("rows, why", [
    ({1: acked_then_crashed(), 2: leader_rows(established=False)}, "the leader never counted it"),
    ({1: acked_then_crashed(), 2: leader_rows(before=True)}, "established before the ACK came: not counted"),
    ({1: acked_then_crashed(), 2: [state(0, "LEADING", 2)]}, "the ACK never reached the leader"),
    ({1: [*synced(), msg(1, "hold", "ACK_NEWLEADER", 2, Z25), crash(1, 1, "send-after:ACK_NEWLEADER")],
      2: leader_rows()}, "the ACK was held, never sent"),
    ({1: [*synced(), crash(1, 1, "persist-after:current-epoch")], 2: leader_rows()}, "died before acking"),
])
def test_crash_after_newleader_ack_refuses_rows_that_miss_a_part(rows: dict[int, list[dict[str, Any]]],
                                                                 why: str) -> None:
    assert not PROOFS["crash-after-newleader-ack"](rows).ok, why


# -- ZOOKEEPER-4712: proposals left open by an iteration that ended without a restart ----------------

P1, P2, P3 = (int(Zxid.of(1, c)) for c in (1, 2, 3))


def iterations(*, ack_sent: bool = False, committed: bool = False, restart: bool = False,
               same_epoch: bool = False) -> list[dict[str, Any]]:
    """Follower 1 follows 3 in epoch 1 (1:1 committed), gets 1:2 and 1:3 whose ACK is held, loses
    3 and syncs with 2 in epoch 2 (or 1, with ``same_epoch``)."""
    first = [state(0, "STARTED", 0), state(0, "FOLLOWING", 1, 3), msg(0, "recv", "NEWLEADER", 3, 0),
             state(0, "FOLLOWING", 1, 3), msg(0, "recv", "UPTODATE", 3, 0),
             msg(0, "recv", "PROPOSAL", 3, P1), msg(0, "send", "ACK", 3, P1), msg(0, "recv", "COMMIT", 3, P1),
             msg(0, "recv", "PROPOSAL", 3, P2), msg(0, "recv", "PROPOSAL", 3, P3)]
    first += [msg(0, "send", "ACK", 3, P3)] if ack_sent else [msg(0, "hold", "ACK", 3, P3), msg(0, "drop", "ACK", 3, P3)]
    first += [msg(0, "recv", "COMMIT", 3, P3)] if committed else []
    inc = 1 if restart else 0
    second = ([state(1, "STARTED", 1)] if restart else [state(0, "LOOKING", 1)]) + [
        state(inc, "FOLLOWING", 1, 2), msg(inc, "recv", "NEWLEADER", 2, P3),
        state(inc, "FOLLOWING", 1 if same_epoch else 2, 2), msg(inc, "recv", "UPTODATE", 2, P3)]
    return first + second


def test_proposals_across_iterations_is_proven_from_one_incarnation() -> None:
    p = PROOFS["proposals-across-iterations"]({1: iterations(), 2: [], 3: []})
    assert p.ok, p.text
    assert "replica 1 (incarnation 0, no restart) received 2 PROPOSAL(s) 1:2..1:3 from 3 in epoch 1" in p.text
    assert "(1 ACK(s) dropped with the channel)" in p.text and "NEWLEADER 1:3 from 2 and followed it in epoch 2" in p.text


@pytest.mark.parametrize("kw, why", [
    ({"ack_sent": True}, "the leader had its ACK: not left open"),
    ({"committed": True}, "committed before the iteration ended"),
    ({"restart": True}, "a restart in between: ZooKeeper's bug needs the same process"),
    ({"same_epoch": True}, "no sync in a later epoch"),
])
def test_proposals_across_iterations_refuses_rows_that_miss_a_part(kw: dict[str, bool], why: str) -> None:
    assert not PROOFS["proposals-across-iterations"]({1: iterations(**kw)}).ok, why


# -- the scenario condition on a replica's disk epochs ------------------------------------------------

def test_epoch_condition_parses() -> None:
    sc = parse({"name": "t", "steps": [{"bind": {"F": "follower"}},
                                       {"expect": {"epoch": {"sid": "F", "current": 2, "accepted": 2}}},
                                       {"wait": {"epoch": {"sid": 1, "accepted": 3}, "not": True, "timeout": 4}}]})
    c1, c2 = sc.steps[1].condition, sc.steps[2].condition
    assert c1 is not None and c1.what == "epoch" and c1.arg("current") == 2 and c1.arg("sid") == "F"
    assert c2 is not None and c2.negate and c2.arg("current") is None and sc.steps[2].timeout == 4
    assert c1.describe() == "epoch(accepted=2 current=2 sid=F)"


@pytest.mark.parametrize("cond, message", [
    ({"sid": 1}, r"step 1 \(expect\): epoch: expected current, accepted or both"),
    ({"sid": 1, "current": "2"}, r"step 1 \(expect\): current: expected an epoch"),
    ({"sid": 1, "accepted": -1}, r"step 1 \(expect\): accepted: expected an epoch"),
    ({"current": 1}, r"step 1 \(expect\): sid: missing"),
    ({"sid": 1, "current": 1, "last": 2}, r"step 1 \(expect\): last: unknown key"),
])
def test_bad_epoch_conditions_name_the_key(cond: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse({"name": "t", "steps": [{"expect": {"epoch": cond}}]})
