"""snapshot()/restore() round trips, determinism, corruption detection, and digest()."""

from __future__ import annotations

import hashlib

import msgpack
import pytest
from tree_harness import Leader, replica

from zabray.errors import CorruptionError, FormatVersionError
from zabray.tree import (
    DataTree,
    close_session,
    create,
    create_session,
    delete,
    set_data,
)
from zabray.tree.snapshot import SNAPSHOT_MAGIC, SNAPSHOT_VERSION
from zabray.tree.znode import CONTAINER_OWNER


def populated() -> Leader:
    ld = Leader()
    for req in (
        create_session(11, 5000, time_ms=1),
        create_session(12, 6000, time_ms=2),
        create("/app", b"cfg", time_ms=3),
        create("/app/q", time_ms=4),
        create("/app/q/n", b"1", sequential=True, time_ms=5),
        create("/app/q/n", b"2", sequential=True, time_ms=6),
        create("/app/lock", ephemeral=True, session_id=11, time_ms=7),
        create("/app/q/e", ephemeral=True, sequential=True, session_id=12, time_ms=8),
        set_data("/app", b"cfg2", time_ms=9),
        delete("/app/q/n0000000000", time_ms=10),
        set_data("/", b"root", time_ms=11),
    ):
        assert ld.write(req).ok
    return ld


def test_round_trip_restores_everything() -> None:
    ld = populated()
    snap = ld.tree.snapshot()
    t = DataTree()
    t.restore(snap)
    assert t.snapshot() == snap
    assert t.digest() == ld.tree.digest()
    assert t.last_zxid == ld.tree.last_zxid
    assert t.sessions() == {11: 5000, 12: 6000}
    assert t.ephemerals(11) == ["/app/lock"] and t.ephemerals(12) == ["/app/q/e0000000002"]
    for p in ("/", "/app", "/app/q", "/app/q/n0000000001", "/app/lock"):
        assert t.get(p) == ld.tree.get(p)
        assert t.children(p) == ld.tree.children(p)


def test_restored_tree_keeps_going() -> None:
    ld = populated()
    t = Leader(DataTree(), epoch=2)
    t.tree.restore(ld.tree.snapshot())
    # sequential numbering continues from the restored parent cversion
    assert t.write(create("/app/q/n", sequential=True, time_ms=20)).value == "/app/q/n0000000003"
    # sessions and their ephemerals came back too
    r = t.write(close_session(11, time_ms=21))
    assert r.value == ("/app/lock",)
    ld.new_epoch()
    ld.write(create("/app/q/n", sequential=True, time_ms=20))
    ld.write(close_session(11, time_ms=21))
    assert ld.tree.digest() == t.tree.digest()


def test_snapshot_is_deterministic_and_replay_over_it_is_safe() -> None:
    ld = populated()
    a, b = replica(ld.log), replica(ld.log)
    assert a.snapshot() == b.snapshot() == ld.tree.snapshot()
    # a snapshot midway plus the whole log (old txns skipped) gives the same tree
    mid = replica(ld.log[:5])
    t = DataTree()
    t.restore(mid.snapshot())
    for txn in ld.log:
        t.apply(txn)
    assert t.snapshot() == ld.tree.snapshot()


def test_snapshot_excludes_and_restore_drops_pending() -> None:
    ld = populated()
    snap = ld.tree.snapshot()
    ld.prepare(create("/pending", time_ms=1))
    assert ld.tree.snapshot() == snap
    ld.tree.restore(snap)
    assert ld.tree.pending == 0
    ld.queue.clear()
    assert ld.write(create("/pending", time_ms=1)).ok  # not NodeExists: the overlay is gone


def test_empty_tree_round_trip() -> None:
    t = DataTree()
    u = DataTree()
    u.restore(t.snapshot())
    assert u.digest() == t.digest() and u.last_zxid == 0


def test_every_flipped_byte_is_detected() -> None:
    snap = populated().tree.snapshot()
    for i in range(len(snap)):
        bad = bytearray(snap)
        bad[i] ^= 0x40
        t = DataTree()
        with pytest.raises(CorruptionError):
            t.restore(bytes(bad))


def test_truncated_or_garbage_snapshot() -> None:
    snap = populated().tree.snapshot()
    for bad in (b"", snap[:-1], snap[: len(snap) // 2], b"\xc1", msgpack.packb([1, 2]), snap + b"x"):
        with pytest.raises(CorruptionError):
            DataTree().restore(bad)


def wrap(content: object, *, magic: str = SNAPSHOT_MAGIC, version: int = SNAPSHOT_VERSION) -> bytes:
    body = msgpack.packb(content, use_bin_type=True)
    return msgpack.packb(
        [magic, version, hashlib.blake2b(body, digest_size=16).digest(), body], use_bin_type=True
    )


OPEN = [[31, "world", "anyone"]]


def node(path: str, owner: int = 0, data: bytes = b"", acl: object = OPEN) -> list[object]:
    return [path, data, 1, 1, 0, 0, 0, 0, 0, owner, 1, acl]


ROOT_ROW = node("/")
ZK_ROWS = [node("/zookeeper"), node("/zookeeper/config"), node("/zookeeper/quota")]


def rows(*extra: list[object]) -> list[list[object]]:
    """The root, ``extra`` (paths sorting between "/" and "/zookeeper") and ZooKeeper's znodes."""
    return [ROOT_ROW, *extra, *ZK_ROWS]


@pytest.mark.parametrize(
    "content",
    [
        [0, rows(node("/a")), [], "extra"],
        [-1, rows(node("/a")), []],
        [0, [], []],  # no root
        [0, [node("/a")], []],  # no root, orphan
        [0, rows(node("/a/b")), []],  # orphan
        [0, [ROOT_ROW, node("/a")], []],  # no /zookeeper
        [0, rows(node("/a"), node("/a")), []],  # repeated
        [0, rows(node("/b"), node("/a")), []],  # unsorted
        [0, rows(node("/a", owner=5)), []],  # owner not live
        [0, rows(node("/a", owner=5), node("/a/b")), [[5, 100]]],  # ephemeral parent
        [0, rows(node("/a", owner=0xFF << 56)), []],  # a TTL marker with ttl 0
        [0, rows(node("/a", owner=0x80 << 56 | 1)), []],  # neither session nor marker
        [0, rows(node("/a", acl=[[31, "world"]])), []],  # acl entry
        [0, rows(node("/a", acl=[[2**31, "world", "anyone"]])), []],  # perms beyond int32
        [0, rows(node("/a", acl="x")), []],
        [0, [node("/", owner=5), *ZK_ROWS], [[5, 100]]],  # ephemeral root
        [0, rows(node("a")), []],  # bad path
        [0, rows(node("/a")), [[2, 100], [1, 100]]],  # sessions unsorted
        [0, rows(node("/a")), [[0, 100]]],  # session 0
        [0, rows(node("/a")), [[2**63, 100]]],  # session id beyond a Java long
        [0, rows(node("/a")), [[3, 0]]],  # timeout 0
        [0, rows(["/a", "str", 1, 1, 0, 0, 0, 0, 0, 0, 1, OPEN]), []],
        [0, rows(node("/a")[:-1]), []],
    ],
)
def test_inconsistent_content_is_corruption(content: object) -> None:
    t = populated().tree
    before = t.snapshot()
    with pytest.raises(CorruptionError):
        t.restore(wrap(content))
    assert t.snapshot() == before  # a failed restore changes nothing


def test_wrapper_checks() -> None:
    good = [0, rows(node("/a", owner=CONTAINER_OWNER), node("/t", owner=0xFF << 56 | 5)), []]
    t = DataTree()
    t.restore(wrap(good))
    assert t.children("/") == ["a", "t", "zookeeper"]
    assert t.expired(100) == ["/t"]  # restore rebuilds the container and TTL indexes
    with pytest.raises(CorruptionError):
        t.restore(wrap(good, magic="other"))
    with pytest.raises(CorruptionError):
        t.restore(wrap(good, version=3))


def test_format_1_snapshot_is_refused_by_name() -> None:
    """A snapshot of the older format (no ACLs) is not damage: it is refused, saying why."""
    old = [0, [["/", b"", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]], []]
    t = populated().tree
    before = t.snapshot()
    with pytest.raises(FormatVersionError, match="format 1"):
        t.restore(wrap(old, version=1))
    assert t.snapshot() == before


def test_null_data_survives_a_snapshot_and_is_not_empty_data() -> None:
    """ZooKeeper keeps a Java client's null data apart from empty data: getData answers null,
    with dataLength 0. A snapshot must keep it so, and the digest must tell the two apart."""
    null, empty = Leader(), Leader()
    for ld, data in ((null, None), (empty, b"")):
        assert ld.write(create("/n", data, time_ms=1)).ok
        assert ld.write(create("/s", b"x", time_ms=2)).ok
        assert ld.write(set_data("/s", data, time_ms=3)).ok
    for p in ("/n", "/s"):
        data, st = null.tree.get(p)
        assert data is None and st.data_length == 0
    assert null.tree.digest() != empty.tree.digest()
    t = DataTree()
    t.restore(null.tree.snapshot())
    assert t.get("/n")[0] is None and t.get("/s")[0] is None
    assert t.get("/s")[1] == null.tree.get("/s")[1]
    assert t.digest() == null.tree.digest() and replica(null.log).digest() == null.tree.digest()


def test_digest_tracks_content_only() -> None:
    ld = populated()
    d = ld.tree.digest()
    assert len(d) == 64 and int(d, 16) >= 0
    assert replica(ld.log).digest() == d
    ld.write(set_data("/app", b"cfg2", time_ms=9))  # same data, but version and mzxid change
    assert ld.tree.digest() != d
    e = ld.tree.digest()
    ld.write(create_session(99, 10, time_ms=1))
    assert ld.tree.digest() != e
    f = ld.tree.digest()
    ld.write(create("/app", time_ms=1))  # an error txn changes nothing
    assert ld.tree.digest() == f
