"""Every op's effect on the tree, its Stat bookkeeping, its watch changes and its error cases."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest
from tree_harness import Leader

from zabray.tree import (
    BadArgumentsError,
    BadVersionError,
    Change,
    Check,
    Create,
    DataTooLargeError,
    DataTree,
    Delete,
    EventType,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OpCode,
    SessionExistsError,
    SessionExpiredError,
    SetData,
    Stat,
    ZooKeeperError,
    check,
    close_session,
    create,
    create_session,
    delete,
    multi,
    set_data,
    sync,
)

C, D, M, K = EventType.CREATED, EventType.DELETED, EventType.CHANGED, EventType.CHILD


def ch(*pairs: tuple[str, EventType]) -> tuple[Change, ...]:
    return tuple(Change(p, e) for p, e in pairs)


@pytest.fixture
def ld() -> Leader:
    return Leader()


def fails(r, exc: type[ZooKeeperError]) -> ZooKeeperError:  # type: ignore[no-untyped-def]
    assert not r.ok and r.changes == () and r.value is None
    assert type(r.error) is exc
    with pytest.raises(exc) as info:
        r.unwrap()
    assert info.value.code == exc.code
    return info.value


# -- root and reads --------------------------------------------------------------------------------


def test_fresh_tree_is_zookeepers() -> None:
    """A fresh ZooKeeper 3.8 shows these (checked against a live server): cversion is
    2 * child creations - children, so the root with only `zookeeper` shows -1."""
    t = DataTree()
    zero = Stat(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    assert t.get("/") == (b"", replace(zero, cversion=-1, num_children=1))
    assert t.get("/zookeeper") == (b"", replace(zero, cversion=-2, num_children=2))
    assert t.get("/zookeeper/quota") == (b"", zero)
    assert t.get("/zookeeper/config") == (b"", replace(zero, aversion=-1))
    assert t.children("/") == ["zookeeper"] and t.children("/zookeeper") == ["config", "quota"]
    assert t.get_acl("/zookeeper/config") == (((1, "world", "anyone"),), replace(zero, aversion=-1))
    assert t.get_acl("/")[0] == ((31, "world", "anyone"),)
    assert len(t) == 4 and t.last_zxid == 0 and t.all_children_number("/") == 3


def test_reads_of_missing_and_bad_paths() -> None:
    t = DataTree()
    assert t.exists("/nope") is None
    for read in (t.get, t.stat, t.children):
        with pytest.raises(NoNodeError):
            read("/nope")
        with pytest.raises(BadArgumentsError):
            read("nope")


# -- create ------------------------------------------------------------------------------------------


def test_create_sets_stat_and_parent(ld: Leader) -> None:
    r = ld.write(create("/a", b"hello", time_ms=100))
    assert r.ok and r.op is OpCode.CREATE and r.value == "/a" and r.time_ms == 100
    z = r.zxid
    assert r.changes == ch(("/a", C), ("/", K))
    data, st = ld.tree.get("/a")
    assert data == b"hello"
    assert st == Stat(czxid=z, mzxid=z, ctime=100, mtime=100, version=0, cversion=0, aversion=0,
                      ephemeral_owner=0, data_length=5, num_children=0, pzxid=z)  # fmt: skip
    root = ld.tree.stat("/")
    assert (root.cversion, root.pzxid, root.num_children) == (0, z, 2)  # 2 * 1 creation - 2 children
    assert (root.version, root.mzxid, root.mtime) == (0, 0, 0)  # a child change is not a data change


def test_create_nested_and_children_sorted(ld: Leader) -> None:
    for p in ("/a", "/a/z", "/a/b", "/a/m"):
        assert ld.write(create(p, time_ms=1)).ok
    assert ld.tree.children("/a") == ["b", "m", "z"]
    st = ld.tree.stat("/a")
    assert (st.num_children, st.cversion) == (3, 3)
    assert ld.write(delete("/a/m", time_ms=1)).ok
    st = ld.tree.stat("/a")
    assert (st.num_children, st.cversion) == (2, 4)  # a delete is a child change too


def test_create_errors(ld: Leader) -> None:
    ld.write(create("/a", time_ms=1))
    e = fails(ld.write(create("/x/y", time_ms=1)), NoNodeError)
    assert e.path == "/x"
    e = fails(ld.write(create("/a", time_ms=1)), NodeExistsError)
    assert e.path == "/a"
    fails(ld.write(create("/", time_ms=1)), NodeExistsError)
    for bad in ("a", "/a/", "//a", "/a/.", "/a\0b", "/a\x01", ""):
        fails(ld.write(create(bad, time_ms=1)), BadArgumentsError)
    # ZooKeeper looks the parent up before it judges the whole path: no parent "/a/" or "/a/..".
    for bad, parent in (("/a//b", "/a/"), ("/a/../b", "/a/..")):
        assert fails(ld.write(create(bad, time_ms=1)), NoNodeError).path == parent
    assert ld.write(create("/a/", sequential=True, time_ms=1)).value == "/a/0000000000"
    assert ld.tree.children("/") == ["a", "zookeeper"]


def test_error_txn_leaves_tree_unchanged_but_advances_zxid(ld: Leader) -> None:
    ld.write(create("/a", time_ms=1))
    before = ld.tree.digest()
    r = ld.write(create("/a", time_ms=1))
    assert r.op is OpCode.CREATE and not r.ok
    assert ld.tree.digest() == before and ld.tree.last_zxid == r.zxid


def test_data_size_limit() -> None:
    ld = Leader()
    limit = 1 << 20
    assert ld.write(create("/big", b"x" * limit, time_ms=1)).ok
    fails(ld.write(create("/bigger", b"x" * (limit + 1), time_ms=1)), DataTooLargeError)
    fails(ld.write(set_data("/big", b"x" * (limit + 1), time_ms=1)), DataTooLargeError)
    small = Leader(DataTree(max_data_bytes=3))
    assert small.write(create("/a", b"abc", time_ms=1)).ok
    fails(small.write(create("/b", b"abcd", time_ms=1)), DataTooLargeError)


def test_sequential_numbering_follows_parent_cversion(ld: Leader) -> None:
    ld.write(create("/q", time_ms=1))
    names = [ld.write(create("/q/n-", sequential=True, time_ms=1)).value for _ in range(3)]
    assert names == ["/q/n-0000000000", "/q/n-0000000001", "/q/n-0000000002"]
    ld.write(create("/q/plain", time_ms=1))  # any child create bumps cversion
    ld.write(delete("/q/n-0000000002", time_ms=1))  # deletes do not: names never repeat
    assert ld.write(create("/q/n-", sequential=True, time_ms=1)).value == "/q/n-0000000004"
    # a trailing slash makes the counter the whole name
    assert ld.write(create("/q/", sequential=True, time_ms=1)).value == "/q/0000000005"
    assert ld.write(create("/", sequential=True, time_ms=1)).value == "/0000000001"


def test_sequential_counter_is_per_parent(ld: Leader) -> None:
    ld.write(create("/a", time_ms=1))
    ld.write(create("/b", time_ms=1))
    assert ld.write(create("/a/x", sequential=True, time_ms=1)).value == "/a/x0000000000"
    assert ld.write(create("/b/x", sequential=True, time_ms=1)).value == "/b/x0000000000"
    assert ld.write(create("/a/x", sequential=True, time_ms=1)).value == "/a/x0000000001"


def test_sequential_name_can_collide_with_a_manual_one(ld: Leader) -> None:
    ld.write(create("/a", time_ms=1))
    ld.write(create("/a/x0000000001", time_ms=1))  # cversion 1 after this
    fails(ld.write(create("/a/x", sequential=True, time_ms=1)), NodeExistsError)
    # the failed create did not bump the counter
    assert ld.tree.stat("/a").cversion == 1


# -- ephemerals and sessions -------------------------------------------------------------------------


def test_ephemeral_owned_by_session_and_childless(ld: Leader) -> None:
    assert ld.write(create_session(7, 4000, time_ms=1)).value == 4000
    r = ld.write(create("/e", b"", ephemeral=True, session_id=7, time_ms=2))
    assert r.ok and ld.tree.stat("/e").ephemeral_owner == 7
    assert ld.tree.ephemerals(7) == ["/e"]
    e = fails(ld.write(create("/e/c", session_id=7, time_ms=3)), NoChildrenForEphemeralsError)
    assert e.path == "/e"
    fails(ld.write(create("/e/c", sequential=True, time_ms=3)), NoChildrenForEphemeralsError)


def test_ephemeral_needs_a_live_session(ld: Leader) -> None:
    fails(ld.write(create("/e", ephemeral=True, time_ms=1)), BadArgumentsError)  # session 0
    fails(ld.write(create("/e", ephemeral=True, session_id=9, time_ms=1)), SessionExpiredError)
    ld.write(create_session(9, 1000, time_ms=1))
    ld.write(close_session(9, time_ms=1))
    fails(ld.write(create("/e", ephemeral=True, session_id=9, time_ms=1)), SessionExpiredError)


def test_any_write_from_a_dead_session_fails(ld: Leader) -> None:
    for req in (
        create("/a", session_id=5, time_ms=1),
        set_data("/", b"x", session_id=5, time_ms=1),
        delete("/a", session_id=5, time_ms=1),
        check("/", session_id=5, time_ms=1),
        multi([Check("/")], session_id=5, time_ms=1),
        sync("/", session_id=5, time_ms=1),
    ):
        fails(ld.write(req), SessionExpiredError)
    ld.write(create_session(5, 1000, time_ms=1))
    assert ld.write(create("/a", session_id=5, time_ms=1)).ok


def test_session_lifecycle(ld: Leader) -> None:
    assert ld.write(create_session(1, 1000, time_ms=1)).ok
    assert ld.write(create_session(2, 3000, time_ms=1)).ok
    assert ld.tree.sessions() == {1: 1000, 2: 3000}
    fails(ld.write(create_session(1, 1000, time_ms=1)), SessionExistsError)
    fails(ld.write(create_session(0, 1000, time_ms=1)), BadArgumentsError)
    fails(ld.write(close_session(0, time_ms=1)), BadArgumentsError)
    fails(ld.write(close_session(3, time_ms=1)), SessionExpiredError)
    r = ld.write(close_session(1, time_ms=1))
    assert r.ok and r.op is OpCode.CLOSE_SESSION and r.session_id == 1 and r.value == ()
    assert ld.tree.sessions() == {2: 3000}
    fails(ld.write(close_session(1, time_ms=1)), SessionExpiredError)
    assert ld.write(create_session(1, 500, time_ms=1)).ok  # an id may be reused after close
    assert ld.tree.sessions() == {1: 500, 2: 3000}


def test_close_session_deletes_its_ephemerals_in_one_txn(ld: Leader) -> None:
    ld.write(create_session(1, 1000, time_ms=1))
    ld.write(create_session(2, 1000, time_ms=1))
    ld.write(create("/g", time_ms=1))
    ld.write(create("/g/b", ephemeral=True, session_id=1, time_ms=1))
    ld.write(create("/a", ephemeral=True, session_id=1, time_ms=1))
    ld.write(create("/g/mine", ephemeral=True, session_id=2, time_ms=1))
    ld.write(create("/g/p", session_id=1, time_ms=1))  # persistent: survives
    r = ld.write(close_session(1, time_ms=9))
    assert r.value == ("/a", "/g/b")
    assert r.changes == ch(("/a", D), ("/", K), ("/g/b", D), ("/g", K))
    assert ld.tree.children("/g") == ["mine", "p"]
    assert ld.tree.exists("/a") is None and ld.tree.ephemerals(1) == []
    g = ld.tree.stat("/g")
    assert (g.pzxid, g.num_children, g.cversion) == (r.zxid, 2, 4)  # 3 creates + 1 delete
    assert ld.tree.ephemerals(2) == ["/g/mine"]


# -- delete ------------------------------------------------------------------------------------------


def test_delete_updates_parent(ld: Leader) -> None:
    ld.write(create("/a", time_ms=1))
    ld.write(create("/a/b", time_ms=1))
    before = ld.tree.stat("/a")
    r = ld.write(delete("/a/b", time_ms=5))
    assert r.ok and r.value is None and r.changes == ch(("/a/b", D), ("/a", K))
    after = ld.tree.stat("/a")
    assert after.num_children == 0 and after.pzxid == r.zxid
    assert after.cversion == before.cversion + 1  # ZooKeeper reports deletes as child changes too
    assert (after.version, after.mzxid) == (before.version, before.mzxid)


def test_delete_errors_and_versions(ld: Leader) -> None:
    ld.write(create("/a", time_ms=1))
    ld.write(create("/a/b", time_ms=1))
    fails(ld.write(delete("/nope", time_ms=1)), NoNodeError)
    fails(ld.write(delete("/a", time_ms=1)), NotEmptyError)
    fails(ld.write(delete("/", time_ms=1)), BadArgumentsError)
    fails(ld.write(delete("/a/b", 1, time_ms=1)), BadVersionError)
    ld.write(set_data("/a/b", b"x", time_ms=1))
    assert ld.write(delete("/a/b", 1, time_ms=1)).ok
    assert ld.write(delete("/a", 0, time_ms=1)).ok
    assert ld.tree.children("/") == ["zookeeper"]


def test_bad_version_checked_before_not_empty(ld: Leader) -> None:
    ld.write(create("/a", time_ms=1))
    ld.write(create("/a/b", time_ms=1))
    fails(ld.write(delete("/a", 3, time_ms=1)), BadVersionError)


# -- set_data / check / sync ---------------------------------------------------------------------


def test_set_data_stat(ld: Leader) -> None:
    c = ld.write(create("/a", b"1", time_ms=10))
    r = ld.write(set_data("/a", b"22", time_ms=20))
    st = r.value
    assert r.changes == ch(("/a", M))
    assert st == ld.tree.stat("/a")
    assert (st.version, st.mzxid, st.mtime, st.data_length) == (1, r.zxid, 20, 2)
    assert (st.czxid, st.ctime, st.pzxid, st.cversion) == (c.zxid, 10, c.zxid, 0)
    assert ld.tree.get("/a")[0] == b"22"
    assert ld.write(set_data("/a", b"", 1, time_ms=30)).value.version == 2
    fails(ld.write(set_data("/a", b"x", 1, time_ms=30)), BadVersionError)
    fails(ld.write(set_data("/nope", b"x", time_ms=30)), NoNodeError)
    assert ld.write(set_data("/", b"root", time_ms=30)).ok  # the root has data too


def test_check_and_sync(ld: Leader) -> None:
    ld.write(create("/a", time_ms=1))
    r = ld.write(check("/a", 0, time_ms=1))
    assert r.ok and r.value is None and r.changes == ()
    assert ld.write(check("/a", time_ms=1)).ok
    fails(ld.write(check("/a", 4, time_ms=1)), BadVersionError)
    fails(ld.write(check("/b", time_ms=1)), NoNodeError)
    r = ld.write(sync("/whatever", time_ms=1))
    assert r.ok and r.op is OpCode.SYNC and r.value == "/whatever" and r.changes == ()
    r = ld.write(sync("bad", time_ms=1))  # a sync's path is echoed, never judged, as by ZooKeeper
    assert r.ok and r.value == "bad"


def test_a_delete_judges_its_path_as_zookeeper_does(ld: Leader) -> None:
    """Only what ZooKeeper needs to find the parent: a path with no "/" or with a NUL is
    BAD_ARGUMENTS; any other malformed path names no znode."""
    ld.write(create("/a", time_ms=1))
    for bad in ("a", "/a\x00", "", "/"):
        fails(ld.write(delete(bad, time_ms=1)), BadArgumentsError)
    for missing in ("/a/", "/a//b", "/a/\ue000", "/a/.", "/nope/\x01"):
        fails(ld.write(delete(missing, time_ms=1)), NoNodeError)


# -- multi -------------------------------------------------------------------------------------------


def test_multi_success(ld: Leader) -> None:
    ld.write(create("/a", b"0", time_ms=1))
    r = ld.write(
        multi(
            [
                Check("/a", 0),
                Create("/a/b", b"b"),
                Create("/a/s", sequential=True),
                SetData("/a", b"1", 0),
                Create("/c"),
                Delete("/c"),
            ],
            time_ms=5,
        )
    )
    assert r.ok and r.op is OpCode.MULTI
    assert r.value[:3] == (None, "/a/b", "/a/s0000000001")
    assert r.value[3] == ld.tree.stat("/a") and r.value[3].version == 1
    assert r.value[4:] == ("/c", None)
    assert r.changes == ch(
        ("/a/b", C), ("/a", K), ("/a/s0000000001", C), ("/a", K), ("/a", M), ("/c", C), ("/", K), ("/c", D),
        ("/", K)
    )
    assert ld.tree.children("/a") == ["b", "s0000000001"] and ld.tree.exists("/c") is None
    st = ld.tree.stat("/a")
    assert (st.cversion, st.num_children, st.pzxid, st.mzxid) == (2, 2, r.zxid, r.zxid)


def test_multi_is_all_or_nothing(ld: Leader) -> None:
    ld.write(create("/a", time_ms=1))
    before = ld.tree.digest()
    r = ld.write(multi([Create("/a/b"), SetData("/a", b"x"), Delete("/nope"), Create("/z")], time_ms=2))
    e = fails(r, NoNodeError)
    assert r.op is OpCode.MULTI and e.index == 2 and e.path == "/nope" and "multi op 2" in e.message
    assert ld.tree.digest() == before
    # the failed multi left nothing behind in the future state either
    assert ld.write(create("/a/b", time_ms=3)).ok
    assert ld.tree.stat("/a").cversion == 1


def test_multi_ops_see_earlier_ops(ld: Leader) -> None:
    r = ld.write(multi([Create("/p"), Create("/p/c"), Check("/p/c", 0), SetData("/p/c", b"x", 0)], time_ms=1))
    assert r.ok
    fails(ld.write(multi([Create("/q"), Create("/q")], time_ms=1)), NodeExistsError)
    e = fails(ld.write(multi([Delete("/p/c"), Check("/p/c")], time_ms=1)), NoNodeError)
    assert e.index == 1
    e = fails(ld.write(multi([SetData("/p", b""), SetData("/p", b"", 0)], time_ms=1)), BadVersionError)
    assert e.index == 1


def test_multi_bad_path_and_empty_multi(ld: Leader) -> None:
    e = fails(ld.write(multi([Check("/"), Create("bad")], time_ms=1)), BadArgumentsError)
    assert e.index == 1
    r = ld.write(multi([], time_ms=1))
    assert r.ok and r.value == () and r.changes == ()


def test_multi_ephemeral_and_session(ld: Leader) -> None:
    ld.write(create_session(3, 1000, time_ms=1))
    r = ld.write(multi([Create("/e", ephemeral=True), Create("/f")], session_id=3, time_ms=1))
    assert r.ok and ld.tree.ephemerals(3) == ["/e"]
    fails(ld.write(multi([Create("/g", ephemeral=True)], time_ms=1)), BadArgumentsError)


# -- results -----------------------------------------------------------------------------------------


def test_undecodable_request_becomes_error_txn(ld: Leader) -> None:
    r = ld.write(b"\xc1garbage")
    assert r.op is None and r.session_id == 0
    fails(r, BadArgumentsError)


def test_results_pickle_and_compare() -> None:
    ld = Leader()
    ok = ld.write(create("/a", time_ms=1))
    bad = ld.write(create("/a", time_ms=1))
    for r in (ok, bad):
        assert pickle.loads(pickle.dumps(r)) == r
    assert bad.error == NodeExistsError("/a already exists", path="/a")
    assert bad.error != NoNodeError("/a already exists", path="/a")


def test_replayed_txn_is_a_noop(ld: Leader) -> None:
    ld.write(create("/a", time_ms=1))
    ld.write(set_data("/a", b"x", time_ms=1))
    digest = ld.tree.digest()
    for txn in ld.log:
        assert ld.tree.apply(txn) is None
    assert ld.tree.digest() == digest and ld.tree.last_zxid == ld.log[-1].zxid
