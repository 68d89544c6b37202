"""Watch tables (``zabray.zk.watches``): ZooKeeper 3.8's WatchManager rules, pure."""

from __future__ import annotations

from zabray.tree import DataTree, EventType
from zabray.zk.watches import Fired, WatchKind, WatchTables

C, D, X, K = EventType.CREATED, EventType.DELETED, EventType.CHANGED, EventType.CHILD


def test_a_standard_watch_fires_once_and_a_persistent_one_every_time() -> None:
    w = WatchTables()
    w.watch_data("/a", 1)
    w.add_watch("/a", 2, recursive=False)
    assert w.fire("/a", X) == [Fired(1, "data", "/a", "changed"), Fired(2, "data", "/a", "changed")]
    assert w.fire("/a", X) == [Fired(2, "data", "/a", "changed")]
    assert w.fire("/a", K) == [Fired(2, "child", "/a", "child")]  # persistent watches see children too


def test_a_recursive_watch_sees_every_descendant_but_no_child_events() -> None:
    w = WatchTables()
    w.add_watch("/a", 7, recursive=True)
    assert w.fire("/a/b/c", C) == [Fired(7, "data", "/a/b/c", "created")]
    assert w.fire("/a/b", K) == []
    assert w.fire("/ab", C) == []  # a sibling sharing a prefix is not a descendant
    assert w.fire("/a", D) == [Fired(7, "data", "/a", "deleted")]


def test_a_deletion_tells_a_session_once_even_with_data_and_child_watches() -> None:
    w = WatchTables()
    w.watch_data("/a", 1)
    w.watch_children("/a", 1)
    w.watch_children("/a", 2)
    assert w.fire("/a", D) == [Fired(1, "data", "/a", "deleted"), Fired(2, "child", "/a", "deleted")]
    assert w.count() == 0  # both of session 1's one-shot watches were consumed


def test_check_and_remove_by_kind() -> None:
    w = WatchTables()
    w.watch_data("/a", 1)
    w.add_watch("/b", 1, recursive=True)
    assert w.has("/a", 1, WatchKind.DATA) and not w.has("/a", 1, WatchKind.CHILDREN)
    assert w.has("/b", 1, WatchKind.PERSISTENT_RECURSIVE) and not w.has("/b", 1, WatchKind.PERSISTENT)
    assert not w.remove("/a", 1, WatchKind.CHILDREN) and w.remove("/a", 1, WatchKind.ANY)
    assert w.remove("/b", 1, WatchKind.PERSISTENT_RECURSIVE) and w.recursive == 0 and w.count() == 0


def test_set_watches_fires_what_a_moved_session_missed_and_registers_the_rest() -> None:
    tree = DataTree()
    from zabray.protocol.messages import Txn
    from zabray.tree import ops

    for z, req in enumerate([ops.create("/a", b"", time_ms=1), ops.create("/b", b"", time_ms=1)], start=1):
        tree.apply(Txn(z, tree.prepare(req, z)))
    w = WatchTables()
    fired = w.set_watches(tree, 5, last_zxid=1, data=("/a", "/b", "/gone"), exist=("/a", "/new"),
                          child=("/a",), persistent=("/p",))
    assert fired == [Fired(5, "data", "/b", "changed"), Fired(5, "data", "/gone", "deleted"),
                     Fired(5, "data", "/a", "created")]
    # /a unchanged since zxid 1: its data and child watches are registered, as are /new and /p.
    assert w.has("/a", 5, WatchKind.DATA) and w.has("/a", 5, WatchKind.CHILDREN)
    assert w.has("/new", 5, WatchKind.DATA) and w.has("/p", 5, WatchKind.PERSISTENT)
