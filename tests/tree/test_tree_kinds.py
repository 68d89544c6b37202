"""Containers, TTL znodes, create modes, ZooKeeper's own subtree and the read operations of
ZooKeeper 3.8 (getEphemerals, getAllChildrenNumber, getChildren2, multiRead), with the
answers a live ZooKeeper 3.8 gave."""

from __future__ import annotations

import pytest
from tree_harness import Leader, replica

from zabray.tree import (
    BadArgumentsError,
    BadVersionError,
    Create,
    DataTree,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OpCode,
    create,
    create_op,
    create_session,
    delete,
    delete_container,
    multi,
    set_data,
)
from zabray.tree.znode import CONTAINER_OWNER, TTL_MAX, TTL_OWNER
from zabray.wire.zkproto import CreateMode
from zabray.wire.zkproto import OpCode as Zk


@pytest.fixture
def ld() -> Leader:
    return Leader()


def err(r):  # type: ignore[no-untyped-def]
    assert not r.ok
    return type(r.error)


def test_zookeeper_subtree_is_protected(ld: Leader) -> None:
    for p in ("/zookeeper", "/zookeeper/quota", "/zookeeper/config", "/"):
        assert err(ld.write(delete(p, time_ms=1))) is BadArgumentsError
    assert err(ld.write(create("/zookeeper", time_ms=1))) is NodeExistsError
    assert err(ld.write(create("/zookeeper/config/x", time_ms=1))) is NoAuthError  # READ-only ACL
    assert err(ld.write(set_data("/zookeeper/config", b"x", time_ms=1))) is NoAuthError
    # ZooKeeper lets anyone create and delete under /zookeeper and /zookeeper/quota
    assert ld.write(create("/zookeeper/x", time_ms=1)).ok and ld.write(delete("/zookeeper/x", time_ms=1)).ok
    r = ld.write(set_data("/zookeeper", b"x", time_ms=5))
    assert r.ok and r.value.cversion == 0 and r.value.num_children == 2  # 2 * 1 creation - 2 children
    assert ld.tree.all_children_number("/") == 3 and ld.tree.all_children_number("/zookeeper") == 2


def test_create_modes_as_zookeeper_maps_them() -> None:
    acl = ((31, "world", "anyone"),)
    assert create_op(Zk.CREATE, "/a", b"", acl, CreateMode.EPHEMERAL_SEQUENTIAL) == Create(
        "/a", b"", True, True, acl
    )
    assert create_op(Zk.CREATE2, "/a", b"", acl, CreateMode.PERSISTENT).stat
    c = create_op(Zk.CREATE_CONTAINER, "/c", b"", acl, CreateMode.PERSISTENT_SEQUENTIAL)
    assert c.container and c.sequential and c.stat
    assert create_op(Zk.CREATE_TTL, "/t", b"", acl, CreateMode.PERSISTENT_WITH_TTL, TTL_MAX).ttl == TTL_MAX
    # a CONTAINER mode through plain create makes a persistent znode, as in ZooKeeper 3.8
    assert not create_op(Zk.CREATE, "/c", b"", acl, CreateMode.CONTAINER).container
    for opcode, flags, ttl in (
        (Zk.CREATE_TTL, CreateMode.PERSISTENT_WITH_TTL, 0),
        (Zk.CREATE_TTL, CreateMode.PERSISTENT_WITH_TTL, TTL_MAX + 1),
        (Zk.CREATE_TTL, CreateMode.PERSISTENT, 100),  # a ttl needs a TTL mode
        (Zk.CREATE, CreateMode.PERSISTENT_WITH_TTL, -1),  # and a TTL mode needs a ttl
        (Zk.CREATE2, 7, -1),  # no such mode
    ):
        with pytest.raises(BadArgumentsError):
            create_op(opcode, "/x", b"", acl, flags, ttl)


def test_container_lifecycle(ld: Leader) -> None:
    r = ld.write(create("/c", container=True, stat=True, time_ms=10))
    path, st = r.value
    assert path == "/c" and st.ephemeral_owner == 0 and st.czxid == r.zxid  # containers report owner 0
    assert ld.tree.expired(10**9) == []  # never had a child: kept (ZooKeeper's cversion > 0 rule)
    assert ld.tree.expired(10**9, max_never_used_ms=100) == ["/c"]
    assert ld.write(create("/c/x", time_ms=11)).ok  # containers may have children
    assert ld.tree.expired(10**9) == []
    assert err(ld.write(delete_container("/c", time_ms=12))) is NotEmptyError
    ld.write(delete("/c/x", time_ms=13))
    assert ld.tree.expired(14) == ["/c"]
    r = ld.write(delete_container("/c", time_ms=14))
    assert r.ok and r.op is OpCode.DELETE_CONTAINER and ld.tree.exists("/c") is None
    assert [(c.path, c.event.value) for c in r.changes] == [("/c", "deleted"), ("/", "child")]
    # a stale candidate fails harmlessly
    assert err(ld.write(delete_container("/c", time_ms=15))) is NoNodeError
    ld.write(create("/p", time_ms=1))
    assert err(ld.write(delete_container("/p", time_ms=15))) is BadVersionError  # not a container
    assert err(ld.write(delete_container("/zookeeper/quota", time_ms=15))) is BadArgumentsError
    assert ld.tree.expired(10**9) == []


def test_ttl_lifecycle(ld: Leader) -> None:
    assert err(ld.write(create("/t", ttl=0, time_ms=1))) is BadArgumentsError
    assert err(ld.write(create("/t", ttl=TTL_MAX + 1, time_ms=1))) is BadArgumentsError
    assert err(ld.write(create("/t", ttl=5, ephemeral=True, time_ms=1))) is BadArgumentsError
    assert err(ld.write(create("/t", container=True, ttl=5, time_ms=1))) is BadArgumentsError
    r = ld.write(create("/t", ttl=100, sequential=True, stat=True, time_ms=1000))
    path, st = r.value
    assert path == "/t0000000000" and st.ephemeral_owner == 0
    assert ld.tree.expired(1100) == [] and ld.tree.expired(1101) == [path]
    # a data change restarts the TTL: the stale candidate is refused at the request's time
    ld.write(set_data(path, b"x", time_ms=1050))
    assert ld.tree.expired(1101) == []
    assert err(ld.write(delete_container(path, time_ms=1101))) is BadVersionError
    ld.write(create_session(1, 1000, time_ms=1))
    assert ld.write(create(path + "/e", ephemeral=True, session_id=1, time_ms=1)).ok  # TTL parents are not ephemeral
    assert ld.tree.expired(10**9) == []
    ld.write(delete(path + "/e", time_ms=1))
    assert ld.write(delete_container(path, time_ms=1151)).ok
    assert ld.tree.exists(path) is None and ld.tree.expired(10**9) == []


def test_kinds_survive_replay_and_snapshot(ld: Leader) -> None:
    ld.write(create("/c", container=True, time_ms=1))
    ld.write(create("/c/x", time_ms=1))
    ld.write(delete("/c/x", time_ms=1))
    ld.write(create("/t", ttl=10, time_ms=1))
    ld.write(create("/a", acl=((1, "world", "anyone"),), time_ms=1))
    restored = DataTree()
    restored.restore(ld.tree.snapshot())
    for t in (replica(ld.log), restored):
        assert t.digest() == ld.tree.digest() and t.expired(100) == ["/c", "/t"]
        assert t.get_acl("/a") == ld.tree.get_acl("/a")
    assert ld.tree._nodes["/c"].stat.ephemeral_owner == CONTAINER_OWNER  # stored markers
    assert ld.tree._nodes["/t"].stat.ephemeral_owner == TTL_OWNER | 10


def test_ephemeral_parent_and_sequential_suffix(ld: Leader) -> None:
    ld.write(create_session(1, 1000, time_ms=1))
    ld.write(create("/e", ephemeral=True, session_id=1, time_ms=1))
    assert err(ld.write(create("/e/x", time_ms=1))) is NoChildrenForEphemeralsError
    # the suffix counts the parent's creations, zero-padded to ten digits, deletes included
    ld.write(create("/q", time_ms=1))
    for i in range(3):
        ld.write(create(f"/q/n{i}", time_ms=1))
    ld.write(delete("/q/n1", time_ms=1))
    assert ld.write(create("/q/s-", sequential=True, time_ms=1)).value == "/q/s-0000000003"
    assert ld.tree.stat("/q").cversion == 2 * 4 - 3
    # "/" as a sequential prefix: the counter is the whole name
    assert ld.write(create("/", sequential=True, time_ms=1)).value.startswith("/000000000")


def test_reads_ephemerals_counts_children2_multi_read(ld: Leader) -> None:
    ld.write(create_session(1, 1000, time_ms=1))
    ld.write(create("/m1", time_ms=1))
    ld.write(create("/m1/e2", ephemeral=True, sequential=True, session_id=1, time_ms=1))
    ld.write(create("/e1", ephemeral=True, session_id=1, time_ms=1))
    t = ld.tree
    assert t.get_ephemerals(1) == t.get_ephemerals(1, "") == ["/e1", "/m1/e20000000000"]
    assert t.get_ephemerals(1, "/m") == ["/m1/e20000000000"]  # a string prefix, as ZooKeeper
    assert t.get_ephemerals(2) == []
    assert t.all_children_number("/") == 6 and t.all_children_number("/m1") == 1
    with pytest.raises(NoNodeError):
        t.all_children_number("/nope")
    kids, st = t.children2("/m1")
    assert kids == ["e20000000000"] and st == t.stat("/m1")
    got = t.multi_read([("get", "/m1"), ("children", "/nope"), ("children", "/m1")])
    assert got[0] == t.get("/m1") and type(got[1]) is NoNodeError and got[2] == ["e20000000000"]


def test_multi_results_and_op_errors(ld: Leader) -> None:
    r = ld.write(multi([Create("/m", stat=True), Create("/m/c", container=True, stat=True), Create("/n")], time_ms=3))
    (p1, s1), (p2, s2), p3 = r.value
    assert (p1, p2, p3) == ("/m", "/m/c", "/n") and s1.czxid == s2.czxid == r.zxid
    assert r.op_errors(3) == ("OK", "OK", "OK")
    r = ld.write(multi([Create("/x"), Create("/m"), Create("/y")], time_ms=3))
    assert r.op_errors(3) == ("OK", "NODE_EXISTS", "RUNTIME_INCONSISTENCY")
    assert ld.tree.exists("/x") is None
