"""ZooKeeper 3.8's rules the service follows where they are not the obvious ones; each case was a
difference the differential test (tests/zkcompat/test_differential.py) found. Pure: no Ray."""

from __future__ import annotations

import pytest

from zabray.tree import DataTree, NoNodeError, NoWatcherError
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
    assert reads.read(tree, w, 1, (), zm.Exists(path, watch=True)) is None
    got = reads.read(tree, w, 1, (), zm.MultiRead((("get", path), ("children", "/"))))
    assert isinstance(got[0], NoNodeError) and got[1] == ["zookeeper"]


def test_watch_ops_do_not_judge_paths() -> None:
    w = WatchTables()
    reads.watch_op(w, 1, zm.AddWatch("d", recursive=False))
    reads.watch_op(w, 1, zm.CheckWatches("d", 4))
    with pytest.raises(NoWatcherError):
        reads.watch_op(w, 1, zm.CheckWatches("/d/", 3))
