"""Outcomes told truthfully on a real ensemble: a leader killed with writes in flight, and a
watch callback that cannot finish before the read that follows it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.zk.conftest import followers, session_on, wait_until
from zabray.client.session import ConnectionLossError, NotReadyError, WatchDispatchError, WatchedEvent
from zabray.errors import NoQuorumError, UncertainOutcomeError

pytestmark = pytest.mark.ray


def test_a_leader_kill_with_writes_in_flight_reports_each_outcome_truthfully(start) -> None:
    """Every write either succeeded (and is there), was certainly not applied (NotReadyError, a
    NoQuorumError: and is not there), or has an unknown fate (ConnectionLossError, an
    UncertainOutcomeError, never a NoQuorumError); nothing else."""
    ens = start(3)
    leader = ens.wait_for_leader()
    s = session_on(ens, followers(ens)[0], timeout=4)
    w = ens.session(timeout=4)
    try:
        s.create("/out")

        async def burst() -> list[object]:
            first = [asyncio.ensure_future(s.create_async(f"/out/a{i}")) for i in range(40)]
            # Kill once one write is answered, the rest still in flight: on a loaded machine a
            # kill issued at once can land before any commit, and then nothing is tested.
            await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
            await asyncio.get_running_loop().run_in_executor(None, ens.kill, leader)
            later = [asyncio.ensure_future(s.create_async(f"/out/b{i}")) for i in range(40)]
            return list(await asyncio.gather(*first, *later, return_exceptions=True))

        results = asyncio.run(burst())
        paths = [f"/out/a{i}" for i in range(40)] + [f"/out/b{i}" for i in range(40)]
        ok, unknown, refused = [], [], []
        for path, r in zip(paths, results, strict=True):
            if r == path:
                ok.append(path)
            elif isinstance(r, ConnectionLossError):
                assert isinstance(r, UncertainOutcomeError) and not isinstance(r, NoQuorumError)
                unknown.append(path)
            elif isinstance(r, NotReadyError):
                assert isinstance(r, NoQuorumError)
                refused.append(path)
            else:
                raise AssertionError(f"{path}: unexpected outcome {r!r}")
        assert ok, "no write survived the leader kill"

        def settled() -> bool:
            try:
                w.sync()
                return True
            except (ConnectionLossError, NotReadyError):
                return False

        wait_until(settled, timeout=60, what="a write through the new leader")
        present = {f"/out/{c}" for c in w.children("/out")}
        assert set(ok) <= present, f"acknowledged writes missing: {sorted(set(ok) - present)}"
        assert not set(refused) & present, f"writes reported NotReady yet applied: {sorted(set(refused) & present)}"
    finally:
        s.close()
        w.close()


def test_a_read_after_a_stuck_watch_callback_fails_instead_of_returning_early(zk) -> None:
    s = zk.session(timeout=5)
    w = zk.session(timeout=5)
    release = threading.Event()
    entered = threading.Event()

    def stuck(ev: WatchedEvent) -> None:
        entered.set()
        release.wait(30)

    try:
        s.create("/stuck", b"0")
        s.get("/stuck", watch=stuck)
        w.set("/stuck", b"1")
        s.dispatch_timeout = 1.0  # how long a call may wait for callbacks (normally the op timeout)
        with pytest.raises(WatchDispatchError):
            while True:  # the first read whose reply follows the notification must not return
                if s.get("/stuck")[0] == b"1":
                    raise AssertionError("a read showed the change before its watch callback ran")
        assert entered.is_set()
        release.set()
        assert s.get("/stuck")[0] == b"1"  # once the callback returned, reads return again
    finally:
        release.set()
        s.close()
        w.close()
