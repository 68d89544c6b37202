"""Message holds on a real ensemble (real Ray, TCP, fsync): a follower held back and released,
release order across channels, and FIFO within a channel whatever the hold matches."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ensemble.conftest import assert_no_loss, converged, wait_until
from zabray.driver.ensemble import Ensemble
from zabray.errors import ConfigError
from zabray.protocol.zxid import Zxid
from zabray.trace.files import fault_rows, message_rows
from zabray.trace.records import digest

pytestmark = pytest.mark.ray

# A learner drops a silent leader (and a leader a silent learner) after sync_limit ticks: holding
# a channel for seconds needs a longer one than the local default of 1 s.
SLOW = {"sync_limit": 500, "trace_messages": True}


def roles(ens: Ensemble) -> tuple[int, list[int]]:
    leader = ens.wait_for_leader(30)
    return leader, sorted(s.sid for s in ens.status() if s.sid != leader)


def last_zxid(ens: Ensemble, sid: int) -> Zxid:
    return next(s.last_zxid for s in ens.status() if s.sid == sid)


def put(ens: Ensemble, value: bytes, acked: dict[int, str | None]) -> Zxid:
    z = ens.submit(value)
    acked[int(z)] = digest(value)
    return z


def test_held_proposals_stop_a_follower_until_released(start) -> None:  # type: ignore[no-untyped-def]
    ens = start(3, **SLOW)
    leader, (f, other) = roles(ens)
    acked: dict[int, str | None] = {}
    base = put(ens, b"before", acked)
    wait_until(lambda: converged(ens), what="convergence")
    hid = ens.hold(src=leader, dst=f, types="PROPOSAL")
    zs = [put(ens, f"held-{i}".encode(), acked) for i in range(5)]  # the leader and `other` commit them
    wait_until(lambda: len([m for m in ens.held() if m.type == "PROPOSAL"]) == 5, timeout=10, what="5 held")
    held = ens.held()
    assert {(m.src, m.dst) for m in held} == {(leader, f)}
    assert [m.zxid for m in held if m.type == "PROPOSAL"] == [int(z) for z in zs]
    assert last_zxid(ens, f) == base  # nothing reached its log
    assert ens.inspect(f).last_zxid == base
    assert last_zxid(ens, other) == zs[-1]
    released = ens.release(hid, count=2)
    assert [m.zxid for m in released if m.type == "PROPOSAL"] == [int(z) for z in zs[:2]]
    wait_until(lambda: last_zxid(ens, f) == zs[1], timeout=10, what="the first two released")
    assert [m.zxid for m in ens.held() if m.type == "PROPOSAL"] == [int(z) for z in zs[2:]]
    ens.release(hid, stop=True)
    wait_until(lambda: converged(ens), timeout=30, what="the follower catching up")
    assert ens.held() == []
    put(ens, b"after", acked)  # the hold is stopped: nothing is held any more
    wait_until(lambda: converged(ens), timeout=30, what="convergence")
    assert ens.held() == []
    assert_no_loss(ens, acked)
    kinds = [r["fault"] for r in fault_rows(ens.info["run_dir"])]
    assert kinds.count("hold") == 1 and kinds.count("release") == 2
    with pytest.raises(ConfigError, match="unknown packet 'ACKNEWLEADER'"):
        ens.hold(types=["ACKNEWLEADER"])
    with pytest.raises(ConfigError, match="no replica 9"):
        ens.hold(src=9)
    with pytest.raises(ConfigError, match="no hold #7"):
        ens.release(7)


def test_release_order_across_channels_is_the_callers(start) -> None:  # type: ignore[no-untyped-def]
    ens = start(3, **SLOW)
    leader, (a, b) = roles(ens)
    acked: dict[int, str | None] = {}
    put(ens, b"warm", acked)
    wait_until(lambda: converged(ens), what="convergence")
    run = Path(ens.info["run_dir"])
    for first, second in ((b, a), (a, b)):
        hid = ens.hold(src=leader, types="COMMIT")
        z = put(ens, f"order-{first}".encode(), acked)
        wait_until(lambda z=z: {m.dst for m in ens.held() if m.type == "COMMIT" and m.zxid == int(z)} == {a, b},
                   timeout=10, what="both COMMITs held")
        ens.release(hid, src=leader, dst=first)
        ens.release(hid, src=leader, dst=second, stop=True)

        def got(sid: int, z: Zxid = z) -> list[float]:
            return [r["t"] for r in message_rows(run, sid, direction="recv") if r["msg"] == "COMMIT" and r["zxid"] == int(z)]

        wait_until(lambda: got(a) and got(b), timeout=10, what="both COMMITs received")
        assert got(first)[0] < got(second)[0], (first, second)
        rel = [r for r in message_rows(run, leader, direction="release") if r["zxid"] == int(z)]
        assert [r["peer"] for r in rel] == [first, second]
    wait_until(lambda: converged(ens), timeout=30, what="convergence")
    assert_no_loss(ens, acked)


def test_a_later_proposal_never_overtakes_a_held_commit(start) -> None:  # type: ignore[no-untyped-def]
    ens = start(3, **SLOW)
    leader, (f, _) = roles(ens)
    acked: dict[int, str | None] = {}
    put(ens, b"warm", acked)
    wait_until(lambda: converged(ens), what="convergence")
    hid = ens.hold(src=leader, dst=f, types="COMMIT")
    z1 = put(ens, b"first", acked)   # its PROPOSAL reaches f; its COMMIT is held
    z2 = put(ens, b"second", acked)  # its PROPOSAL does not match, but must queue behind
    wait_until(lambda: any(m.type == "PROPOSAL" and m.zxid == int(z2) and m.hold is None for m in ens.held()),
               timeout=10, what="the second PROPOSAL queued behind the COMMIT")
    # (A heartbeat may queue between them on the held channel too: PINGs are not what is at stake.)
    assert [(m.type, m.zxid) for m in ens.held() if m.type != "PING"][:2] == [("COMMIT", int(z1)), ("PROPOSAL", int(z2))]
    assert last_zxid(ens, f) == z1  # the second PROPOSAL did not overtake
    ens.unhold(hid)  # stop and release
    wait_until(lambda: converged(ens), timeout=30, what="convergence")
    recv = [(r["msg"], r["zxid"]) for r in message_rows(ens.info["run_dir"], f, direction="recv")
            if r["msg"] in ("PROPOSAL", "COMMIT") and r["zxid"] in (int(z1), int(z2))]
    assert recv == [("PROPOSAL", int(z1)), ("COMMIT", int(z1)), ("PROPOSAL", int(z2)), ("COMMIT", int(z2))]
    assert_no_loss(ens, acked)


def test_held_messages_die_with_their_channel_and_the_next_iteration_starts_clean(start) -> None:  # type: ignore[no-untyped-def]
    ens = start(3, **SLOW)
    leader, (f, _) = roles(ens)
    acked: dict[int, str | None] = {}
    put(ens, b"warm", acked)
    wait_until(lambda: converged(ens), what="convergence")
    assert ens.hold(src=leader, dst=f, types="PROPOSAL") == 1  # ids count from 1 per ensemble
    z = put(ens, b"held then dropped", acked)
    wait_until(lambda: [m.zxid for m in ens.held() if m.type == "PROPOSAL"] == [int(z)], timeout=10, what="held")
    old_channel = ens.held()[0].channel
    assert ens.cut([f], [leader]) == 1  # f ends its iteration: both ends close the channel
    wait_until(lambda: not any(m.channel == old_channel for m in ens.held()), timeout=10,
               what="the held PROPOSAL dying with its channel")
    # The next iteration syncs f with a DIFF (not a PROPOSAL): it catches up though the hold still catches.
    wait_until(lambda: converged(ens), timeout=30, what="f resynced on a fresh channel")
    z2 = put(ens, b"held on the new channel", acked)
    wait_until(lambda: [m.zxid for m in ens.held() if m.type == "PROPOSAL"] == [int(z2)], timeout=10,
               what="the hold catching on the new channel")
    assert ens.held()[0].channel != old_channel
    drops = [r for r in message_rows(ens.info["run_dir"], leader, direction="drop") if r["zxid"] == int(z)]
    assert [r["msg"] for r in drops] == ["PROPOSAL", "COMMIT"]  # its COMMIT queued behind it, and died too
    ens.heal()  # stops every hold and releases what it held
    wait_until(lambda: converged(ens), timeout=30, what="convergence")
    assert ens.held() == []
    assert_no_loss(ens, acked)
    assert [r["fault"] for r in fault_rows(ens.info["run_dir"]) if r["fault"] in ("hold", "unhold")] == ["hold", "unhold"]
