"""ZooKeeper 3.8's rules the service follows where they are not the obvious ones; each case was a
difference the differential test (tests/zkcompat/test_differential.py) found. Pure: no Ray."""

from __future__ import annotations

import pytest

from tests.zk.test_zk_service_core import Harness
from zabray.tree import (
    BadArgumentsError,
    Create,
    DataTree,
    EventType,
    NoNodeError,
    NoWatcherError,
    SetACL,
    SetData,
)
from zabray.tree.acl import digest_id
from zabray.zk import messages as zm
from zabray.zk import reads
from zabray.zk.watches import WatchTables

BAD_PATHS = ["d", "/d/", "/d//a", "/d/./a", "/d/../a", "/d/a\x00"]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_a_read_of_a_malformed_path_is_no_node(path: str) -> None:
    # FinalRequestProcessor looks the path up without judging it: NO_NODE, not BAD_ARGUMENTS.
    tree, w = DataTree(), WatchTables()
    for op in (zm.GetData(path), zm.GetChildren(path), zm.GetChildren(path, stat=True), zm.GetACL(path),
               zm.GetAllChildrenNumber(path)):
        with pytest.raises(NoNodeError):
            reads.read(tree, w, 1, (), op)
    if "\x00" in path:  # exists has one check of its own (FinalRequestProcessor): no NUL
        with pytest.raises(BadArgumentsError):
            reads.read(tree, w, 1, (), zm.Exists(path, watch=True))
    else:
        assert reads.read(tree, w, 1, (), zm.Exists(path, watch=True)) is None
    got = reads.read(tree, w, 1, (), zm.MultiRead((("get", path), ("children", "/"))))
    assert isinstance(got[0], NoNodeError) and got[1] == ["zookeeper"]


def test_watch_ops_do_not_judge_paths() -> None:
    w = WatchTables()
    reads.watch_op(w, 1, zm.AddWatch("d", recursive=False))
    reads.watch_op(w, 1, zm.CheckWatches("d", 4))
    with pytest.raises(NoWatcherError):
        reads.watch_op(w, 1, zm.CheckWatches("/d/", 3))


def _events(h: Harness, conn: int) -> list[tuple[str, str]]:
    return [(a.path, a.event) for a in h.sent(conn) if type(a) is zm.WatchFired]


def test_a_watcher_is_told_only_what_it_may_read() -> None:
    # ZooKeeper 3.8 checks READ on the znode's ACL (the parent's for a child event) with the
    # watcher's ids when a watch triggers: no event otherwise, and the one-shot watch is used up.
    h = Harness()
    for conn in (1, 2):
        h.feed(zm.ClientRequest(conn, 1, zm.Connect(0, 4000, 0, auth=(("ip", "127.0.0.1"),))))
        h.commit()
    h.feed(zm.ClientRequest(2, 2, zm.AddAuth("digest", b"alice:pw1")))
    alice = ((31, "digest", digest_id("alice:pw1")),)
    h.feed(zm.ClientRequest(1, 2, zm.Exists("/p", watch=True)))
    h.feed(zm.ClientRequest(2, 3, zm.Exists("/p", watch=True)))
    h.feed(zm.ClientRequest(2, 4, Create("/p", b"", acl=alice)))
    h.commit()
    assert _events(h, 1) == [] and _events(h, 2) == [("/p", "created")]
    h.feed(zm.ClientRequest(1, 3, zm.Exists("/p", watch=True)))
    h.feed(zm.ClientRequest(2, 5, SetACL("/p", (*alice, (1, "world", "anyone")), -1)))
    h.commit()
    h.feed(zm.ClientRequest(2, 6, SetData("/p", b"x", -1)))
    h.commit()
    assert _events(h, 1) == [("/p", "changed")]  # READ for anyone now: told
    h.feed(zm.ClientRequest(1, 4, zm.Exists("/p", watch=True)))
    h.feed(zm.ClientRequest(2, 7, SetACL("/p", alice, -1)))
    h.commit()
    h.feed(zm.ClientRequest(2, 8, SetData("/p", b"y", -1)))
    h.commit()
    h.feed(zm.ClientRequest(2, 9, SetACL("/p", (*alice, (1, "world", "anyone")), -1)))
    h.commit()
    h.feed(zm.ClientRequest(2, 10, SetData("/p", b"z", -1)))
    h.commit()
    assert _events(h, 1) == [("/p", "changed")]  # the denied event used the watch up


def test_a_persistent_watch_hears_every_change_of_a_multi() -> None:
    # ZooKeeper triggers watches once per sub-txn: two creates under a persistently watched
    # parent are two child events, two sets of it two data events.
    h = Harness()
    h.session(1)
    h.feed(zm.ClientRequest(1, 2, Create("/pw")))
    h.commit()
    h.feed(zm.ClientRequest(1, 3, zm.AddWatch("/pw")))
    h.feed(zm.ClientRequest(1, 4, zm.Multi((Create("/pw/a"), Create("/pw/b"), SetData("/pw", b"1"),
                                             SetData("/pw", b"2")))))
    h.commit()
    assert _events(h, 1) == [("/pw", "child"), ("/pw", "child"), ("/pw", "changed"), ("/pw", "changed")]


def test_a_read_with_a_field_of_the_wrong_type_is_answered() -> None:
    h = Harness()
    h.session(1)
    h.feed(zm.ClientRequest(1, 2, zm.GetEphemerals(None)))  # type: ignore[arg-type]
    rep = h.replies(1)[-1]
    assert rep.xid == 2 and rep.error is not None and rep.error.code == "BAD_ARGUMENTS"


def test_a_recursive_watch_sits_in_both_tables() -> None:
    # ZooKeeper 3.8.0's addWatch registers in the data and the child table whatever the mode:
    # CHILDREN finds a recursive watch, and removing it there leaves the data entry.
    w = WatchTables()
    reads.watch_op(w, 1, zm.AddWatch("/k", recursive=True))
    for kind in (1, 2, 3, 5):
        reads.watch_op(w, 1, zm.CheckWatches("/k", kind))
    reads.watch_op(w, 1, zm.RemoveWatches("/k", 1))
    with pytest.raises(NoWatcherError):
        reads.watch_op(w, 1, zm.CheckWatches("/k", 1))
    reads.watch_op(w, 1, zm.CheckWatches("/k", 2))
    # Still only what a recursive watch hears: no child events, one event per change.
    assert [(f.path, f.event) for f in w.fire("/k/a", EventType.CREATED)] == [("/k/a", "created")]
    assert w.fire("/k", EventType.CHILD) == []


def test_a_recursive_watch_is_told_of_a_delete_once() -> None:
    w = WatchTables()
    w.add_watch("/k", 1, recursive=True)
    assert [(f.kind, f.path, f.event) for f in w.fire("/k/a", EventType.DELETED)] == [("data", "/k/a", "deleted")]
    assert [(f.kind, f.path, f.event) for f in w.fire("/k", EventType.DELETED)] == [("data", "/k", "deleted")]
