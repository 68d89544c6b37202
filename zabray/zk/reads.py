"""Reads against one replica's tree, pure: the answer to a read request and the watches it leaves.

A read runs when it reaches the head of its connection's queue (``zabray.zk.service``), so it
sees every earlier write of that connection. ACLs are checked with the connection's ids as
ZooKeeper's FinalRequestProcessor does (exists needs none), and a watch is registered only if
the read succeeded, except exists, whose watch on a missing znode waits for its creation.
"""

from __future__ import annotations

from typing import Any

from zabray.tree import AuthId, BadArgumentsError, DataTree, NoNodeError, NoWatcherError, validate_path
from zabray.zk.messages import (
    AddWatch,
    CheckWatches,
    Exists,
    GetACL,
    GetAllChildrenNumber,
    GetChildren,
    GetData,
    GetEphemerals,
    MultiRead,
    RemoveWatches,
    WhoAmI,
)
from zabray.zk.watches import WatchKind, WatchTables

TreeRead = GetData | Exists | GetChildren | GetACL | GetAllChildrenNumber | GetEphemerals | MultiRead | WhoAmI
WatchOp = AddWatch | CheckWatches | RemoveWatches


def who_am_i(auth: tuple[AuthId, ...]) -> list[tuple[str, str]]:
    """whoAmI's (scheme, user) pairs: a digest id shows its user name only, as ZooKeeper's
    DigestAuthenticationProvider.getUserName does."""
    return [(scheme, ident.split(":", 1)[0] if scheme == "digest" else ident) for scheme, ident in auth]


def _valid(path: str) -> bool:
    try:
        validate_path(path)
    except BadArgumentsError:
        return False
    return True


def _found(path: str) -> str:
    """A read looks its path up and does not judge it (ZooKeeper's FinalRequestProcessor):
    a malformed path names no znode, so it is NO_NODE, never BAD_ARGUMENTS."""
    try:
        return validate_path(path)
    except BadArgumentsError:
        raise NoNodeError(f"{path} does not exist", path=path) from None


def read(tree: DataTree, watches: WatchTables, sid: int, auth: tuple[AuthId, ...], op: TreeRead) -> Any:
    """The value of ``op``; raises the ``ZooKeeperError`` it fails with."""
    match op:
        case GetData(path, watch):
            path = _found(path)
            value: Any = tree.get(path, auth)
            if watch:
                watches.watch_data(path, sid)
            return value
        case Exists(path, watch):
            if "\0" in path:  # the one path check of ZooKeeper's exists
                raise BadArgumentsError(f"{path!r}: a path cannot hold a NUL", path=path)
            stat = tree.exists(path) if _valid(path) else None
            if watch:
                watches.watch_data(path, sid)
            return stat
        case GetChildren(path, watch, stat):
            path = _found(path)
            kids, st = tree.children2(path, auth)
            if watch:
                watches.watch_children(path, sid)
            return (kids, st) if stat else kids
        case GetACL(path):
            return tree.get_acl(_found(path), auth)
        case GetAllChildrenNumber(path):
            return tree.all_children_number(_found(path), auth)
        case GetEphemerals(prefix):
            return tree.get_ephemerals(sid, prefix)
        case MultiRead(ops):
            return [NoNodeError(f"{p} does not exist", path=p) if isinstance(r, BadArgumentsError) and not _valid(p)
                    else r for (_, p), r in zip(ops, tree.multi_read(list(ops), auth), strict=True)]
        case WhoAmI():
            return who_am_i(auth)
    raise TypeError(f"not a read: {op!r:.60}")


def watch_op(watches: WatchTables, sid: int, op: WatchOp) -> None:
    """addWatch / checkWatches / removeWatches on ``sid``'s own watches. Paths are not judged,
    as in ZooKeeper: a watch on a malformed path is kept (it can never fire)."""
    match op:
        case AddWatch(path, recursive):
            watches.add_watch(path, sid, recursive)
        case CheckWatches(path, kind):
            if not watches.has(path, sid, _kind(kind)):
                raise NoWatcherError(f"no watch of type {kind} on {path}", path=path)
        case RemoveWatches(path, kind):
            if not watches.remove(path, sid, _kind(kind)):
                raise NoWatcherError(f"no watch of type {kind} on {path}", path=path)


def _kind(kind: int) -> WatchKind:
    try:
        return WatchKind(kind)
    except ValueError:
        raise BadArgumentsError(f"watcher type must be 1..5, got {kind}") from None


__all__ = ["TreeRead", "WatchOp", "read", "watch_op", "who_am_i"]
