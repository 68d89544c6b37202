"""A deliberately broken build is caught from its history: with the planted bug ``stale_reads`` a replica
answers a read as soon as it arrives, ahead of the session's earlier (pipelined) write, so the
read returns a state older than one the session already saw in issue order."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.histories.test_real_runs import ray_cluster, start_zk
from zabray.client.histories import HistoryRecorder
from zabray.pipeline.session_guarantees import check_sessions

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_env() -> Iterator[None]:
    yield from ray_cluster("stale_reads")


def test_planted_stale_reads_are_caught(ray_env: None, tmp_path: Path) -> None:
    ens = start_zk(tmp_path)
    rec = HistoryRecorder(None, "planted")
    try:
        s = ens.session(timeout=5)
        s.create("/p", b"0")

        async def write_then_read(i: int) -> None:
            # Pipelined, like a ZooKeeper async client: the read is issued after the write.
            name = f"s-{s.session_id:x}"
            pw = rec.invoke(name, "/p", "write", value=f"v{i}")
            tw = asyncio.ensure_future(s.set_async("/p", f"v{i}".encode()))
            pr = rec.invoke(name, "/p", "read")
            tr = asyncio.ensure_future(s.get_async("/p"))
            stat = await tw
            rec.complete(pw, "ok", result_version=stat.version, zxid=stat.mzxid)
            data, st = await tr
            rec.complete(pr, "ok", result=data, result_version=st.version, zxid=st.mzxid)

        for i in range(5):
            asyncio.run(write_then_read(i))
        s.close()
    finally:
        ens.stop()
    found = check_sessions(rec.rows)
    assert found and {v.prop for v in found} == {"stale-read"}
    assert "goes back in time" in found[0].timeline
