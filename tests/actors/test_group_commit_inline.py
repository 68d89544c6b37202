"""Which persists a replica may make durable on its event loop: a lone small append that fits in
the active log segment, nothing else. A snapshot (the whole tree) or a segment rollover (a
64 MiB file created and fsynced) on the loop held every replica at once for most of a second in
a benchmark run, long enough for peers to drop a silent leader. Three real replica servers on
one loop, real files; each store operation records the thread it ran on."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from actors import group_commit
from actors.replica import ReplicaServer
from storage.disk import DiskStore
from storage.txnlog import TxnLog
from tests.polling import until
from zabray.client.broadcast import EnsembleClient
from zabray.net.keyfiles import new_secret

pytestmark = pytest.mark.timeout(60)


def recorded(monkeypatch: pytest.MonkeyPatch, ran: dict[str, set[str]], cls: Any, name: str) -> None:
    """Record in ``ran[name]`` whether each call of ``cls.name`` ran on the loop or elsewhere."""
    orig = getattr(cls, name)

    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        ran[name].add("loop" if threading.current_thread() is threading.main_thread() else "io")
        return orig(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, wrapper)


@asynccontextmanager
async def ensemble(tmp_path: Path, secret: Any, config: dict[str, Any]
                   ) -> AsyncIterator[tuple[dict[int, ReplicaServer], EnsembleClient]]:
    """Three replica servers on this loop and a broadcast client, stopped on the way out."""
    servers = {sid: ReplicaServer(ensemble="inline", sid=sid, voters=[1, 2, 3], observers=[], config=config,
                                  secret=secret, data_dir=str(tmp_path / f"r{sid}")) for sid in (1, 2, 3)}
    client = None
    try:
        infos = {sid: await s.start() for sid, s in servers.items()}
        for s in servers.values():
            s.set_peers({sid: tuple(i["quorum"]) for sid, i in infos.items()})
        client = EnsembleClient("inline", {sid: tuple(i["client"]) for sid, i in infos.items()}, secret=secret)
        yield servers, client
    finally:
        if client is not None:
            client.close()
        for s in servers.values():
            await s.stop()


def test_snapshots_and_rollovers_run_on_the_io_thread_and_lone_appends_on_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: dict[str, set[str]] = defaultdict(set)

    recorded(monkeypatch, ran, DiskStore, "save_snapshot")
    recorded(monkeypatch, ran, DiskStore, "sync")
    recorded(monkeypatch, ran, TxnLog, "_roll")
    secret = new_secret()

    async def body() -> None:
        async with ensemble(tmp_path, secret, {"fsync": True, "snapshot_every": 20}) as (servers, client):
            for i in range(60):  # one at a time: each is a lone append on every replica
                await client.submit(b"v%d" % i, timeout=30)
            await until(lambda: sum(s.stats["snapshots_encoded"] for s in servers.values()) >= 3
                        and bool(ran["save_snapshot"]), 40, "three snapshots encoded and one saved")
            # The first segment's creation was slow enough to send syncs to the IO thread for a
            # while (see the next test): write on until one runs on the loop again.
            while "loop" not in ran["sync"]:
                await client.submit(b"more", timeout=30)

    asyncio.run(asyncio.wait_for(body(), 50))
    assert ran["_roll"] == {"io"}, f"a segment was created on the event loop: {dict(ran)}"
    assert ran["save_snapshot"] == {"io"}, f"a snapshot was written on the event loop: {dict(ran)}"
    assert "loop" in ran["sync"], f"lone appends no longer sync on the loop: {dict(ran)}"


def test_after_a_slow_group_commit_appends_leave_the_loop_to_the_io_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that became slow (another process writing a snapshot) would hold the loop in every
    sync made there: after one slow group commit, the next ones go to the IO thread."""
    ran: dict[str, set[str]] = defaultdict(set)
    recorded(monkeypatch, ran, DiskStore, "sync")
    secret = new_secret()

    async def body() -> None:
        async with ensemble(tmp_path, secret, {"fsync": False}) as (servers, client):
            while "loop" not in ran["sync"]:  # (after any backoff the first segment's creation began)
                await client.submit(b"light load", timeout=30)
            monkeypatch.setattr(group_commit, "_INLINE_BACKOFF_S", 3600.0)  # not over before the test ends
            for s in servers.values():
                s.faults.sync_delay_s = 2 * group_commit._INLINE_SLOW_S  # the injected slow disk
            await client.submit(b"slow", timeout=30)
            await client.submit(b"slow", timeout=30)  # the first may have waited for the second
            for s in servers.values():
                s.faults.sync_delay_s = 0.0
            ran.clear()
            for i in range(10):
                await client.submit(b"fast again %d" % i, timeout=30)

    asyncio.run(asyncio.wait_for(body(), 50))
    assert ran["sync"] == {"io"}, f"a sync ran on the loop after a slow one: {dict(ran)}"
