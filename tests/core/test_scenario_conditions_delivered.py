"""The ``delivered`` condition and ``held`` with ``as`` (a zxid named from held packets) are
validated without Ray (zabray.replay.scenario)."""

from __future__ import annotations

from typing import Any

import pytest

from zabray.errors import ConfigError
from zabray.protocol.zxid import Zxid
from zabray.replay.scenario import parse


def base(*steps: Any) -> dict[str, Any]:
    return {"name": "t", "replicas": 3, "steps": list(steps)}


def test_held_names_a_zxid_that_later_steps_use() -> None:
    sc = parse(base({"bind": {"L": "leader", "F": "follower"}},
                    {"wait": {"held": {"src": "L", "types": "PROPOSAL", "as": "P"}, "timeout": 5}},
                    {"expect": {"delivered": {"zxid": "P"}, "not": True}},
                    {"wait": {"delivered": {"zxid": "P", "sid": "F"}}},
                    {"expect": {"delivered": {"zxid": "1:7"}}}))
    held, nobody, on_f, lit = (s.condition for s in sc.steps[1:])
    assert held is not None and held.arg("as") == "P" and held.arg("count") == 1
    assert nobody is not None and nobody.negate and nobody.arg("sid") is None and nobody.arg("zxid") == "P"
    assert on_f is not None and on_f.arg("sid") == "F"
    assert lit is not None and lit.arg("zxid") == int(Zxid.of(1, 7))
    assert sc.steps[2].describe() == "expect not delivered(zxid=P)"


@pytest.mark.parametrize("data, message", [
    (base({"expect": {"delivered": {"sid": 1}}}), r"step 1 \(expect\): zxid: missing"),
    (base({"expect": {"delivered": {"zxid": "1:1", "by": 2}}}), r"step 1 \(expect\): by: unknown key"),
    (base({"expect": {"delivered": {"zxid": "P"}}}), r"step 1 \(expect\): zxid: expected a zxid"),
    (base({"expect": {"delivered": {"zxid": "1:1", "sid": "X"}}}), r"step 1 \(expect\): sid: expected a sid"),
    (base({"wait": {"held": {"types": "ACK", "as": "1p"}}}), r"step 1 \(wait\): as: expected a name"),
    (base({"wait": {"held": {"types": "ACK", "as": "P"}, "not": True}}), r"step 1 \(wait\): as: names a zxid"),
])
def test_bad_delivered_and_held_as(data: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        parse(data)
    assert "\n" not in str(e.value)
