"""The snapshot actor: many snapshots and purges; a restarted replica and a wiped one end with the same tree.
Snapshots of a tree larger than one slice are encoded over several loop turns, and a SNAP larger
than ``snap_chunk`` reaches the learner in parts and is decoded over several loop turns."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.client.conftest import session_on, wait_until

pytestmark = pytest.mark.ray


def digests(ens) -> dict[int, tuple[str, int]]:
    return {int(s): (d, z) for s, (d, z) in ens._call("tree_digests").items()}


def same_tree(ens, n: int = 3) -> bool:
    d = digests(ens)
    return len(d) == n and len(set(d.values())) == 1


def write_burst(s, tag: str, n: int, parent: str = "/snap", size: int = 0) -> None:
    value = tag.encode() * 10 if not size else b"v" * size

    async def go() -> None:
        await asyncio.gather(*(s.create_async(f"{parent}/{tag}-", value, sequential=True) for _ in range(n)))
    asyncio.run(go())


def test_restart_from_snapshots_and_rebuild_by_snap(start, tmp_path: Path) -> None:
    # snap_chunk: the wiped replica's SNAP (the tree is over 1.2 MB) comes in parts over TCP.
    ens = start(3, snapshot_actor=True, snapshot_every=60, keep_snapshots=2, diff_window=50, snap_chunk=64 << 10)
    # The session stays on the leader, which this test never kills: ops in flight on a replica
    # that dies fail with ConnectionLoss, as in ZooKeeper, and that is not what is tested here.
    s = session_on(ens, ens.wait_for_leader())
    s.create("/snap")
    s.create("/big")
    # 2,500 znodes of 512 bytes: the leader encodes a snapshot in slices of 500 znodes, and a SNAP
    # of the tree (over 1.2 MB) is decoded in slices of 2,000 (``_RESTORE_SLICE``) — at least two,
    # whatever number of bursts below it takes until the snapshots are there.
    write_burst(s, "big", 2_500, parent="/big", size=512)
    i = 0

    def burst_until_snapshots() -> bool:
        nonlocal i
        i += 1
        write_burst(s, f"a{i}", 60)
        s.set("/snap", str(i).encode())
        taken = ens._call("snapshot_stats")
        return len(taken) == 3 and all(v >= 3 for v in taken.values())

    wait_until(burst_until_snapshots, timeout=90, what="several snapshots per replica")
    leader = ens.wait_for_leader()
    victim = [x for x in (1, 2, 3) if x != leader][0]
    store = Path(ens.info["config"]["data_dir"]) / ens.name / f"replica-{victim}" / "store"
    snaps = [p for p in store.rglob("*") if "snap" in p.name]
    assert 0 < len(snaps) <= 4, snaps  # purged down to keep_snapshots (plus any temp)
    ens.kill(victim)
    write_burst(s, "b", 100)
    ens.restart(victim)
    wait_until(lambda: same_tree(ens), timeout=60, what="the restarted replica to match")
    # A wiped replica is rebuilt (by SNAP: it is far beyond diff_window behind).
    other = [x for x in (1, 2, 3) if x not in (leader, victim)][0]
    ens.kill(other)
    write_burst(s, "c", 100)
    ens.restart(other, fresh=True)
    wait_until(lambda: same_tree(ens), timeout=60, what="the wiped replica to match")
    st = {r.sid: r.stats for r in ens.status()}
    # Over 1.2 MB in 64 KiB parts: at least 18 SNAP messages for the one rebuild.
    assert st[leader].get("sent_SNAP", 0) >= 18
    # The leader (never restarted) encoded each of its snapshots in three slices or more.
    encoded = st[leader]["snapshots_encoded"]
    assert encoded >= 3 and st[leader]["snapshot_slices"] >= 3 * encoded
    # The wiped replica decoded the SNAP (over 2,500 znodes) in slices: its checksum, then rows in two or more.
    decoded = st[other]["snaps_decoded"]
    assert decoded >= 1 and st[other]["snap_decode_slices"] >= 3 * decoded
    s.close()
