"""A deliberately broken build is caught from its history: with the planted bug ``resume_behind`` a
replica accepts a moving session although its tree is older than what the session already saw,
so a read right after the move returns a value older than the session's own acknowledged write.
(The real service refuses such a resume, BEHIND, and the session tries another replica.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ensemble.conftest import wait_until
from tests.histories.test_real_runs import ray_cluster, start_zk
from zabray.client.histories import HistoryRecorder
from zabray.client.session import ConnectionLossError, Session
from zabray.pipeline.session_guarantees import check_sessions

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_env() -> Iterator[None]:
    yield from ray_cluster("resume_behind")


def test_a_read_that_goes_back_in_time_after_a_move_is_caught(ray_env: None, tmp_path: Path) -> None:
    # `far` will see every proposal 5 s late; a sync limit of 10 s keeps it in broadcast meanwhile.
    ens = start_zk(tmp_path, sync_limit=500)
    rec = HistoryRecorder(None, "planted-move")
    try:
        leader = ens.wait_for_leader(60)
        near, far = [s for s in (1, 2, 3) if s != leader]
        with ens.session(timeout=5, replica=leader) as s0:
            s0.create("/k", b"v0")
        # The sessions know only `near` and `far`: when `near` dies, every one of them moves to `far`.
        addrs = {s: a for s, a in ens._addresses().items() if s in (near, far)}
        sessions = [Session(ens.name, addrs, timeout=10, replica=near) for _ in range(10)]
        z = max(s.sync("/") for s in sessions)
        # Every replica knows every session before `far` falls behind.
        wait_until(lambda: all(int(r.last_zxid) >= z for r in ens.status()), 60, "every replica has the sessions")
        ens.delay([leader], [far], 5000)
        for i, s in enumerate(sessions):
            name = f"s-{s.session_id:x}"
            p = rec.invoke(name, "/k", "write", value=f"v{i + 1}")
            stat = s.set("/k", f"v{i + 1}".encode())
            rec.complete(p, "ok", result_version=stat.version, zxid=stat.mzxid)
        ens.kill(near)  # every session moves to `far`, which has not yet seen their writes
        wait_until(lambda: all(s.connected_to == far for s in sessions), 30, "every session moved to far")

        async def read(s: object) -> None:
            name = f"s-{s.session_id:x}"  # type: ignore[attr-defined]
            for _ in range(5):  # a read in flight when its replica died is lost: read again
                p = rec.invoke(name, "/k", "read")
                try:
                    data, st = await s.get_async("/k")  # type: ignore[attr-defined]
                except ConnectionLossError:
                    rec.complete(p, "unknown")
                    continue
                rec.complete(p, "ok", result=data, result_version=st.version, zxid=st.mzxid)
                return

        async def read_all() -> None:
            await asyncio.gather(*(read(s) for s in sessions))

        asyncio.run(read_all())
        ens.heal()  # each close commits through `far` now: no 5 s lag for it
        for s in sessions:
            s.close()
    finally:
        ens.stop()
    found = check_sessions(rec.rows)
    assert found and {v.prop for v in found} == {"stale-read"}, found
    assert "goes back in time" in found[0].timeline
