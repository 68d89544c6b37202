"""Kill the replica a session is on: it moves, keeps its ephemerals and watches, never reads older state."""

from __future__ import annotations

import pytest

from tests.zk.conftest import followers, session_on, wait_until
from zabray.client.session import ConnectionLossError, WatchedEvent

pytestmark = pytest.mark.ray


@pytest.mark.parametrize("victim", ["follower", "leader"])
def test_session_moves_when_its_replica_dies(start, victim: str) -> None:
    ens = start(3)
    leader = ens.wait_for_leader()
    target = leader if victim == "leader" else followers(ens)[0]
    other = [s for s in (1, 2, 3) if s != target][0]
    w = ens.session(timeout=4, replica=other)
    s = session_on(ens, target, timeout=4)
    try:
        s.create("/mv", b"0")
        eph = s.create("/mv/eph", b"", ephemeral=True)
        fired: list[WatchedEvent] = []
        s.get("/mv", watch=fired.append)
        seen_zxid = s.last_zxid
        last_version = s.get("/mv")[1].version
        ens.kill(target)

        def moved() -> bool:
            try:
                v = s.get("/mv")[1].version
            except ConnectionLossError:
                return False
            nonlocal last_version
            assert v >= last_version  # never older state than it saw
            last_version = v
            return s.connected_to not in (None, target)

        wait_until(moved, timeout=30, what="the session to move to a live replica")
        assert s.last_zxid >= seen_zxid and s.moves >= 1 and not s.expired

        def write() -> bool:
            try:
                w.set("/mv", b"1")
                return True
            except ConnectionLossError:
                return False

        wait_until(write, timeout=30, what="a write after the kill")
        wait_until(lambda: len(fired) == 1, timeout=10, what="the watch to fire on the new replica")
        assert fired[0].path == "/mv" and fired[0].type == "changed"
        assert s.get("/mv")[0] == b"1"
        w.sync()
        st = w.exists(eph)
        assert st is not None and st.ephemeral_owner == s.session_id  # kept across the move
    finally:
        s.close()
        w.close()
