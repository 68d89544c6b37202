"""Which persists a replica may make durable on its event loop: a lone small append that fits in
the active log segment, nothing else. A snapshot (the whole tree) or a segment rollover (a
64 MiB file created and fsynced) on the loop held every replica at once for most of a second in
a benchmark run, long enough for peers to drop a silent leader. Three real replica servers on
one loop, real files; each store operation records the thread it ran on."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from actors.replica import ReplicaServer
from storage.disk import DiskStore
from storage.txnlog import TxnLog
from zabray.client import EnsembleClient
from zabray.keyfiles import new_secret

pytestmark = pytest.mark.timeout(60)


def test_snapshots_and_rollovers_run_on_the_io_thread_and_lone_appends_on_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: dict[str, set[str]] = defaultdict(set)

    def recorded(cls: Any, name: str) -> None:
        orig = getattr(cls, name)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            ran[name].add("loop" if threading.current_thread() is threading.main_thread() else "io")
            return orig(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, wrapper)

    recorded(DiskStore, "save_snapshot")
    recorded(DiskStore, "sync")
    recorded(TxnLog, "_roll")
    secret = new_secret()

    async def body() -> None:
        servers = {sid: ReplicaServer(ensemble="inline", sid=sid, voters=[1, 2, 3], observers=[],
                                      config={"fsync": True, "snapshot_every": 20}, secret=secret,
                                      data_dir=str(tmp_path / f"r{sid}")) for sid in (1, 2, 3)}
        infos = {sid: await s.start() for sid, s in servers.items()}
        client = None
        try:
            for s in servers.values():
                s.set_peers({sid: tuple(i["quorum"]) for sid, i in infos.items()})
            client = EnsembleClient("inline", {sid: tuple(i["client"]) for sid, i in infos.items()}, secret=secret)
            for i in range(60):  # one at a time: each is a lone append on every replica
                await client.submit(b"v%d" % i, timeout=30)
            while sum(s.stats["snapshots_encoded"] for s in servers.values()) < 3 or not ran["save_snapshot"]:
                await asyncio.sleep(0.01)
        finally:
            if client is not None:
                client.close()
            for s in servers.values():
                await s.stop()

    asyncio.run(asyncio.wait_for(body(), 50))
    assert ran["_roll"] == {"io"}, f"a segment was created on the event loop: {dict(ran)}"
    assert ran["save_snapshot"] == {"io"}, f"a snapshot was written on the event loop: {dict(ran)}"
    assert "loop" in ran["sync"], f"lone appends no longer sync on the loop: {dict(ran)}"
