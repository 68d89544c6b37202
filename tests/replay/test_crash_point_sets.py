"""Several crash points armed at once in one replica's fault hooks (pure: no Ray, no process dies)."""

from __future__ import annotations

import pytest

from actors.faultpoints import ReplicaFaults
from zabray.errors import ConfigError
from zabray.replay.crashpoints import CrashPoint, crash_points


def test_the_shapes_the_api_takes() -> None:
    want = (CrashPoint("recv:NEWLEADER", 1), CrashPoint("send-before:ACK", 3))
    assert crash_points([("recv:NEWLEADER", 1), ("send-before:ACK", 3)]) == want
    assert crash_points({"recv:NEWLEADER": 1, "send-before:ACK": 3}) == want
    assert crash_points(["recv:NEWLEADER", CrashPoint("send-before:ACK", 3)]) == want
    assert crash_points(None) == crash_points([]) == ()
    assert crash_points(["recv:DIFF@synchronization"]) == (CrashPoint("recv:DIFF@synchronization"),)


@pytest.mark.parametrize("bad,msg", [
    (["recv:NOPE"], "unknown crash point 'recv:NOPE'"),
    ([("recv:DIFF", 0)], "nth must be an integer >= 1"),
    ([("recv:DIFF", True)], "nth must be an integer >= 1"),
    ({"recv:DIFF": "2"}, "nth must be an integer >= 1"),
    (["recv:DIFF", ("recv:DIFF", 2)], "named twice"),
    ("recv:DIFF", "not the single string"),
    ([3], "a crash point is a name"),
    (["recv:DIFF@lunch"], "phase must be"),
])
def test_bad_points_are_config_errors(bad: object, msg: str) -> None:
    with pytest.raises(ConfigError, match=msg):
        crash_points(bad)  # type: ignore[arg-type]


def test_the_first_point_to_reach_its_nth_pass_fires() -> None:
    f = ReplicaFaults([("recv:TRUNC", 1), ("recv:PROPOSAL", 3)])
    assert f.armed() == (("recv:TRUNC", 1), ("recv:PROPOSAL", 3))
    assert not f.hit("recv:PROPOSAL", "broadcast") and not f.hit("recv:COMMIT", "broadcast")
    assert not f.hit("recv:PROPOSAL", "broadcast")
    assert f.describe().crash_points == (("recv:TRUNC", 1), ("recv:PROPOSAL", 1))
    assert f.hit("recv:PROPOSAL", "broadcast")
    assert f.crash is None and f.armed() == ()  # the process dies: nothing stays armed


def test_a_phase_narrows_a_point_and_arming_replaces() -> None:
    f = ReplicaFaults()
    assert f.crash is None  # what the shell's hot paths test
    f.arm_all([("recv:DIFF@synchronization", 1), ("recv:PING", 2)])
    assert not f.hit("recv:DIFF", "broadcast")
    f.arm("recv:COMMIT", 2)  # arm() replaces the whole set
    assert f.armed() == (("recv:COMMIT", 2),)
    f.arm_all([])
    assert f.crash is None
    f.arm_all([("recv:DIFF@synchronization", 1)])
    assert f.hit("recv:DIFF", "synchronization")
