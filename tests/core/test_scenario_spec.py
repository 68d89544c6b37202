"""Scenario files are validated without Ray: every shipped scenario parses, and a bad one fails
with one line naming the step and the key (zabray.replay.scenario)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from zabray.errors import ConfigError
from zabray.protocol.zxid import Zxid
from zabray.replay.proofs import ack_during_sync, elections, proposal_during_sync
from zabray.replay.scenario import load, parse

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "configs" / "scenarios").glob("*.yaml"))


def base(*steps: Any) -> dict[str, Any]:
    return {"name": "t", "replicas": 3, "steps": list(steps)}


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenarios_parse(path: Path) -> None:
    sc = load(path)
    assert sc.steps and sc.name == yaml.safe_load(path.read_text())["name"]
    assert all(s.describe() for s in sc.steps)


def test_a_good_scenario() -> None:
    sc = parse(base({"bind": {"L": "leader", "F": "follower"}},
                    {"hold": {"as": "H", "src": "L", "dst": ["F"], "types": "COMMIT", "zxids": ["1:1", "1:9"]}},
                    {"write": {"value": "x", "as": "W", "replica": "F"}},
                    {"wait": {"held": {"src": "L", "types": "COMMIT"}, "timeout": 5}},
                    {"expect": {"durable": {"zxid": "W", "sid": "F"}, "not": True}},
                    {"release": {"hold": "H", "count": 1, "dst": "F", "stop": True}},
                    {"restart": {"sid": "F", "crash_points": ["recv:NEWLEADER"]}},
                    {"partition": [["L"], ["F", 3]]}, {"heal": None}, {"kill": 2},
                    {"wait": {"state": {"sid": "L", "is": "LEADING", "epoch": 2}}}))
    kinds = [s.kind for s in sc.steps]
    assert kinds == ["bind", "hold", "write", "wait", "expect", "release", "restart", "partition", "heal", "kill", "wait"]
    assert sc.steps[1].arg("zxids") == [int(Zxid.of(1, 1)), int(Zxid.of(1, 9))]
    assert sc.steps[3].timeout == 5 and sc.steps[10].timeout == 30
    assert sc.steps[4].condition is not None and sc.steps[4].condition.negate
    assert sc.steps[6].arg("crash_points") == [("recv:NEWLEADER", 1)]


@pytest.mark.parametrize("data, message", [
    ("just text", "a scenario is a mapping"),
    ({"name": "t", "steps": []}, "steps: expected a non-empty list"),
    ({**base({"heal": None}), "colour": 1}, "unknown key 'colour'"),
    ({**base({"heal": None}), "proofs": ["magic"]}, "unknown proof 'magic'"),
    (base({"jump": 1}), "step 1: unknown step 'jump'"),
    (base({"kill": "F"}), r"step 1 \(kill\): kill: expected a sid \(1 to 3\) or a name bound earlier"),
    (base({"kill": 9}), r"step 1 \(kill\): kill: expected a sid \(1 to 3\) .*got 9"),  # was accepted
    (base({"partition": [[0], [1, 2]]}), r"step 1 \(partition\): .*expected a sid \(1 to 3\)"),
    (base({"hold": {"types": "ACKNEWLEADER"}}), r"step 1 \(hold\): types: unknown packet 'ACKNEWLEADER'"),
    (base({"hold": {"src": 1, "colour": 2}}), r"step 1 \(hold\): colour: unknown key"),
    (base({"release": {"hold": "H"}}), r"step 1 \(release\): hold: expected a hold named earlier"),
    (base({"heal": None}, {"wait": {"state": {"sid": 1, "is": "SLEEPING"}}}), r"step 2 \(wait\): is: expected one of"),
    (base({"wait": {"down": 1, "timeout": -1}}), r"step 1 \(wait\): timeout: expected a positive number"),
    (base({"expect": {"down": 1, "timeout": 3}}), r"step 1 \(expect\): timeout: only a wait has a timeout"),
    (base({"wait": {"down": 1, "alive": 2}}), r"step 1 \(wait\): condition: expected exactly one"),
    (base({"wait": {"durable": {"zxid": "W", "sid": 1}}}), r"step 1 \(wait\): zxid: expected a zxid"),
    (base({"write": {"value": "x", "count": 0}}), r"step 1 \(write\): count: expected a positive integer"),
    (base({"restart": {"sid": 1, "crash_points": ["recv:NOPE"]}}), r"step 1 \(restart\): crash_points: unknown crash point"),
    (base({"partition": [[1]]}), r"step 1 \(partition\): partition: expected two or more"),
    (base({"bind": {"L": "boss"}}), r"step 1 \(bind\): L: expected leader, follower or a sid"),
])
def test_bad_scenarios_name_the_step_and_key(data: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        parse(data)
    assert "\n" not in str(e.value)


def test_bad_yaml_file(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load(p)


def msg(inc: int, d: str, m: str, peer: int, z: int | None) -> dict[str, Any]:
    return {"kind": "message", "inc": inc, "dir": d, "msg": m, "peer": peer, "zxid": z}


def test_the_proofs_read_orders_from_rows() -> None:
    z = lambda c: int(Zxid.of(2, c))  # noqa: E731
    follower = [msg(1, "recv", "NEWLEADER", 1, z(40)), msg(1, "hold", "ACK_NEWLEADER", 1, z(40)),
                msg(1, "recv", "PROPOSAL", 1, z(41)), msg(1, "hold", "ACK", 1, z(41)),
                msg(1, "release", "ACK_NEWLEADER", 1, z(40)), msg(1, "release", "ACK", 1, z(41)),
                msg(1, "recv", "UPTODATE", 1, z(41))]
    leader = [msg(0, "recv", "ACK_NEWLEADER", 3, z(40)), msg(0, "send", "UPTODATE", 3, z(41)),
              msg(0, "recv", "ACK", 3, z(41))]
    p = proposal_during_sync({1: leader, 3: follower})
    assert p.ok and "commits_in_window=0" in p.text
    a = ack_during_sync({1: leader, 3: follower})
    assert a.ok, a.text
    # The proposal arrived after UPTODATE: no window.
    late = [follower[0], follower[1], follower[6], follower[2]]
    assert not proposal_during_sync({3: late}).ok and not ack_during_sync({1: leader, 3: late}).ok
    # The leader saw something else right behind ACK_NEWLEADER.
    assert not ack_during_sync({1: [leader[0], msg(0, "recv", "ACK", 3, z(39))], 3: follower}).ok
    assert elections({1: [{"kind": "state", "state": "LOOKING"}] * 2, 2: []}) == {1: 2, 2: 0}


def test_notes_a_state_list_and_may_fail() -> None:
    sc = parse({**base({"write": {"value": "x", "replica": 2, "background": True, "may_fail": True}},
                       {"wait": {"state": {"sid": 1, "is": ["FOLLOWING", "LEADING"]}, "timeout": 5}}),
                "notes": ["message order not carried over"]})
    assert sc.notes == ("message order not carried over",)
    assert sc.steps[0].arg("may_fail") is True and "may_fail=True" in sc.steps[0].describe()
    assert sc.steps[1].condition is not None and sc.steps[1].condition.arg("is") == ["FOLLOWING", "LEADING"]
    assert parse({**base({"heal": None}), "notes": "one line"}).notes == ("one line",)
    assert parse(base({"write": "x"})).steps[0].arg("may_fail") is None
    with pytest.raises(ConfigError, match=r"step 1 \(wait\): is: expected one of"):
        parse(base({"wait": {"state": {"sid": 1, "is": ["FOLLOWING", "BORED"]}}}))
    with pytest.raises(ConfigError, match=r"step 1 \(wait\): is: expected one of"):
        parse(base({"wait": {"state": {"sid": 1, "is": []}}}))
    with pytest.raises(ConfigError, match="notes: expected a string or a list"):
        parse({**base({"heal": None}), "notes": [1]})
