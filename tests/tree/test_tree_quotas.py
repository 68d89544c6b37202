"""Quota stats the tree keeps (zabray.tree.quotas) survive a snapshot, and odd stats values never
stop a replica: the exact values are checked against Apache ZooKeeper in test_tree_vs_zookeeper."""

from __future__ import annotations

from tree_harness import Leader

from zabray.tree import DataTree, create, delete, quotas, set_data

STATS = "/zookeeper/quota/q/zookeeper_stats"


def quota_on_q() -> Leader:
    ld = Leader()
    for path, data in (("/q", b"hello"), ("/q/a", b"1"), ("/zookeeper/quota/q", b""),
                       ("/zookeeper/quota/q/zookeeper_limits", b"count=5,bytes=-1"), (STATS, b"count=0,bytes=0")):
        ld.write(create(path, data, time_ms=1)).unwrap()
    return ld


def test_a_tree_restored_from_a_snapshot_keeps_counting() -> None:
    ld = quota_on_q()
    assert ld.tree.get(STATS)[0] == b"count=2,bytes=6"
    restored = DataTree()
    restored.restore(ld.tree.snapshot())
    follower = Leader(restored)
    for req in (create("/q/b", b"abc", time_ms=2), set_data("/q/a", b"", time_ms=3), delete("/q/b", time_ms=4)):
        ld.write(req).unwrap()
        follower.tree.apply(ld.log[-1])
    data, stat = follower.tree.get(STATS)
    assert data == b"count=2,bytes=5" and stat.data_length == len(data) and stat.version == 0
    assert follower.tree.digest() == ld.tree.digest()


def test_deleting_the_limit_znode_ends_the_counting() -> None:
    ld = quota_on_q()
    ld.write(delete("/zookeeper/quota/q/zookeeper_limits", time_ms=2)).unwrap()
    ld.write(create("/q/c", b"xyz", time_ms=3)).unwrap()
    assert ld.tree.get(STATS)[0] == b"count=2,bytes=6"


def test_stats_values_zookeeper_could_not_parse_are_read_leniently() -> None:
    assert quotas.parse(b"count=4,bytes=5=;countHardLimit=10;byteHardLimit=7") == {
        "count": 4, "bytes": 5, "countHardLimit": 10, "byteHardLimit": 7}
    assert quotas.parse(b"junk,count=x,=3,bytes=") == {"junk": -1, "bytes": -1}
    assert quotas.adjusted(b"", 1, 5) == b"count=0,bytes=4"
    assert quotas.render({"count": 1, "bytes": 2, "z": 3, "a": 4}) == b"count=1,bytes=2=;a=4;z=3"
