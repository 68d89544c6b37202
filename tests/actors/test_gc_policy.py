"""A replica keeps what it loads in bulk out of the garbage collector's full collections: the
state it recovers at start and the state a SNAP installs are frozen (``actors.gc_policy``), so a
large tree is not walked again by every full collection, a stall its peers would see. Three real
replica servers on one event loop, real TCP and real files."""

from __future__ import annotations

import asyncio
import gc
import shutil
from pathlib import Path
from typing import Any

import pytest

from actors import gc_policy
from actors.replica import ReplicaServer
from tests.polling import until
from zabray.client.session import Session

pytestmark = pytest.mark.timeout(120)

ENS = "gc-policy"
CONFIG = {"fsync": False, "service": "zookeeper", "snapshot_every": 40, "diff_window": 0, "keep_snapshots": 2}


def scanned(objs: list[object]) -> int:
    """How many of ``objs`` a collection would still scan (frozen ones are in no generation)."""
    ids = {id(o) for g in range(3) for o in gc.get_objects(generation=g)}
    return sum(id(o) in ids for o in objs)


def znodes(server: ReplicaServer, prefix: str = "/g/") -> list[object]:
    nodes = server.zk.svc.tree._nodes  # type: ignore[union-attr]
    return [n for p, n in nodes.items() if p.startswith(prefix)]


def test_recovered_and_snap_installed_trees_are_frozen(tmp_path: Path) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        infos: dict[int, dict[str, Any]] = {}
        servers: dict[int, ReplicaServer] = {}

        async def start(sid: int) -> None:
            servers[sid] = ReplicaServer(ensemble=ENS, sid=sid, config=CONFIG, voters=[1, 2, 3], observers=[],
                                         data_dir=str(tmp_path / f"r{sid}"), run_dir=None)
            infos[sid] = await servers[sid].start()
            for s in servers.values():
                s.set_peers({k: tuple(i["quorum"]) for k, i in infos.items()})

        def creates(tag: str, n: int) -> None:  # a blocking client, run off this loop
            s = Session(ENS, {k: tuple(i["client"]) for k, i in infos.items()}, timeout=10)
            try:
                if tag == "a":
                    s.create("/g")

                async def go() -> None:
                    await asyncio.gather(*(s.create_async(f"/g/{tag}{i}", b"v" * 100) for i in range(n)))
                asyncio.run(go())
            finally:
                s.close()

        try:
            for sid in (1, 2, 3):
                await start(sid)
            assert gc.get_threshold()[0] == gc_policy.YOUNG
            await loop.run_in_executor(None, creates, "a", 300)
            # A durable snapshot of the whole tree on each, whatever the random snapshot points
            # fell on: the restarted replicas hold the tree before any sync, and the empty replica 3
            # needs a SNAP (a leader whose log still reached back to zxid 0 would send it a DIFF).
            # With diff_window 0, a persisted snapshot raises the history's base to its zxid.
            def applied() -> set[int]:
                return {int(s.node.applied) for s in servers.values() if s.node is not None}
            await until(lambda: len(applied()) == 1 and len(servers) == 3, what="every replica to apply every txn", timeout=30)
            for s in servers.values():
                s.request_snapshot()
            await until(lambda: all(s.node is not None and s.node.history.base == s.node.applied
                                    for s in servers.values()), what="a snapshot of the whole tree on every replica", timeout=30)
            for s in servers.values():
                await s.stop()
            servers.clear()
            infos.clear()

            # Replicas 1 and 2 restart from their snapshots and logs: the tree is frozen at start.
            await start(1)
            await start(2)
            assert len(znodes(servers[1])) == 300 and scanned(znodes(servers[1])) == 0
            # Replica 3 starts empty, and the leader's snapshot (diff_window 0) rebuilds it by SNAP.
            shutil.rmtree(tmp_path / "r3")
            await start(3)
            await until(lambda: len(znodes(servers[3])) == 300, what="replica 3 to get the tree by SNAP", timeout=30)
            assert sum(s.stats.get("sent_SNAP", 0) for s in servers.values()) >= 1
            # Frozen once the step that installed it has ended (a call_soon after it).
            await until(lambda: scanned(znodes(servers[3])) == 0, what="the installed tree to be frozen", timeout=30)
        finally:
            for s in servers.values():
                await s.stop()

    asyncio.run(asyncio.wait_for(body(), 90))


def test_a_slow_full_collection_freezes_what_it_scanned_at_the_next_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree grown by writes since the replica started is frozen too, once a full collection
    of it is slow: not inside the collector, but at the replica's next tick."""
    monkeypatch.setattr(gc_policy, "FREEZE_AFTER_S", 0.0)  # every full collection counts as slow
    gc_policy.configure()
    assert gc.get_threshold()[:2] == (gc_policy.YOUNG, gc_policy.OLDER)
    grown = [[i] for i in range(5_000)]  # lists: always tracked (a dict of ints is not)
    gc.collect(1)
    gc_policy.tick()
    assert scanned(grown) == len(grown), "a collection of the middle generation froze the heap"
    gc.collect()
    assert scanned(grown) == len(grown), "frozen inside the collector, before the tick"
    gc_policy.tick()
    assert scanned(grown) == 0, "the full collection's survivors were not frozen at the tick"
    later = [[i] for i in range(100)]
    gc_policy.tick()
    assert scanned(later) == len(later), "a tick froze again without a slow full collection"


def test_a_replica_restores_a_tree_without_collecting_meanwhile() -> None:
    # Every young collection during a bulk restore scans the tree built so far, all of which
    # stays alive: a 300,000-znode SNAP took 6.4 s to decode with them, 4.5 s without.
    from actors.zkservice import ZooKeeperService
    from zabray.tree import DataTree
    from zabray.tree.restore import decode_snapshot
    from zabray.tree.snapshot import encode_snapshot, node_row

    _, nodes, _, _ = decode_snapshot(DataTree().snapshot())
    rows = [node_row(p, nodes[p]) for p in sorted(nodes)]
    rows += [[f"/n{i:05d}", b"v"] + rows[0][2:] for i in range(3000)]  # the root's stat and ACL
    data = encode_snapshot(0, sorted(rows, key=lambda r: r[0]), [])
    starts: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            starts.append(info["generation"])

    threshold = gc.get_threshold()
    gc.set_threshold(50)
    gc.callbacks.append(count)
    try:
        DataTree().restore(data)
        assert starts, "restoring 3,000 znodes ran no collection even at a threshold of 50"
        service = ZooKeeperService(1, {})
        starts.clear()
        service.app.restore(data)
        assert len(starts) <= 1 and gc.isenabled(), starts  # at most the one the collector owes on resuming
        assert service.app.stat("/n02999").data_length == 1
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*threshold)
