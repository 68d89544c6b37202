"""A replica says in its log why it went silent or went looking: the stall watch names what held
its event loop, and a change of role is logged with the reason the last iteration ended."""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import time
from pathlib import Path

import pytest

from actors.replica import ReplicaServer
from actors.stall_watch import StallWatch
from tests.polling import until

pytestmark = pytest.mark.timeout(60)


def hold_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # what a long computation on the loop looks like to the watch


def test_a_held_loop_is_counted_and_logged_with_the_stack_that_held_it(caplog: pytest.LogCaptureFixture) -> None:
    stats: dict[str, int] = {}
    watch = StallWatch("replica 9", stats, threshold_s=0.05)

    async def body() -> None:
        watch.start(asyncio.get_running_loop())
        try:
            await asyncio.sleep(0.05)
            assert stats["loop_stalls"] == 0, "an idle loop is not a stall"
            asyncio.get_running_loop().call_soon(hold_the_loop, 0.4)
            await until(lambda: stats["loop_stalls"] >= 1, what="the stall to be counted", timeout=10)
        finally:
            watch.stop()

    with caplog.at_level(logging.WARNING, logger="actors.stall_watch"):
        asyncio.run(body())
    assert stats["loop_stall_max_ms"] >= 50
    text = caplog.text
    assert "replica 9: event loop held for" in text and "hold_the_loop" in text, text
    assert "replica 9: event loop was held for" in text


def test_a_long_collection_is_logged_and_the_hook_goes_with_the_watch(caplog: pytest.LogCaptureFixture) -> None:
    stats: dict[str, int] = {}
    watch = StallWatch("replica 8", stats, threshold_s=1e-7)  # any collection is "long" here

    async def body() -> None:
        watch.start(asyncio.get_running_loop())
        try:
            cycles = [[] for _ in range(10_000)]
            for c in cycles:
                c.append(c)
            del cycles
            with caplog.at_level(logging.WARNING, logger="actors.stall_watch"):
                gc.collect()
        finally:
            watch.stop()

    asyncio.run(body())
    assert stats["gc_long"] >= 1 and "garbage collection took" in caplog.text
    assert watch._gc not in gc.callbacks
    n = stats["gc_long"]
    gc.collect()
    assert stats["gc_long"] == n, "a stopped watch still counts collections"


def test_followers_log_why_they_went_looking(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> None:
        servers = {sid: ReplicaServer(ensemble="why", sid=sid, config={"fsync": False}, voters=[1, 2, 3],
                                      observers=[], data_dir=str(tmp_path / f"r{sid}")) for sid in (1, 2, 3)}
        infos = {sid: await s.start() for sid, s in servers.items()}
        try:
            for s in servers.values():
                s.set_peers({sid: tuple(i["quorum"]) for sid, i in infos.items()})
            await until(lambda: any(s.status().established for s in servers.values()), what="a leader", timeout=30)
            leader = next(sid for sid, s in servers.items() if s.status().established)
            await servers.pop(leader).stop()
            await until(lambda: any(s.status().established for s in servers.values()), what="a new leader", timeout=30)
        finally:
            for s in servers.values():
                await s.stop()

    with caplog.at_level(logging.INFO, logger="actors.replica"):
        asyncio.run(body())
    looking = [r.getMessage() for r in caplog.records if "looking for a leader" in r.getMessage()]
    why = re.compile(r"looking for a leader \(epoch \d+\): (channel to leader \d+ closed|leader \d+ silent)")
    assert any(why.search(m) for m in looking), looking
    assert any(" leading, leader " in r.getMessage() for r in caplog.records)
