"""The tree's snapshot format (version 2) and the committed znode record it holds.

``[MAGIC, VERSION, blake2b-128(body), body]`` with body = msgpack of
``[last_zxid, [row sorted by path], [[session_id, timeout_ms] sorted]]`` and
``row = [path, data, czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, pzxid,
[[perms, scheme, id], ...]]``: data is bin, or nil for ZooKeeper's null; the stored stat
(cversion counts child creations, owner is the stored owner with the container / TTL markers)
and the ACL; dataLength and numChildren follow from the rest. Version 1 (no ACLs, no ZooKeeper
subtree) is refused by name. ``zabray.tree.image`` encodes it in slices, ``zabray.tree.restore``
checks and decodes it in slices.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack

from zabray.tree.znode import ACL, Stat

SNAPSHOT_MAGIC = "zabray.tree"
SNAPSHOT_VERSION = 2


NO_CHILDREN: frozenset[str] = frozenset()


class Node:
    """A committed znode: data, stored stat, ACL. ``children`` holds child names (not paths).

    A leaf shares ``NO_CHILDREN`` until its first child (``add_child``): most znodes are leaves,
    and a set each would be one more object per znode for memory and for every full collection
    of the garbage collector to walk."""

    __slots__ = ("data", "stat", "children", "acl")

    def __init__(self, data: bytes | None, stat: Stat, acl: tuple[ACL, ...]) -> None:
        self.data = data
        self.stat = stat
        self.acl = acl
        self.children: set[str] | frozenset[str] = NO_CHILDREN

    def add_child(self, name: str) -> None:
        c = self.children
        if type(c) is frozenset:
            self.children = {name}
        else:
            c.add(name)  # type: ignore[union-attr]

    def remove_child(self, name: str) -> None:
        c = self.children
        if type(c) is not frozenset:
            c.discard(name)  # type: ignore[union-attr]


def node_row(path: str, n: Node) -> list[Any]:
    st = n.stat
    return [
        path, n.data, st.czxid, st.mzxid, st.ctime, st.mtime, st.version, st.cversion,
        st.aversion, st.ephemeral_owner, st.pzxid, [list(a) for a in n.acl],
    ]


def encode_snapshot(last_zxid: int, nodes: list[list[Any]], sessions: list[list[int]]) -> bytes:
    body = msgpack.packb([last_zxid, nodes, sessions], use_bin_type=True)
    check = hashlib.blake2b(body, digest_size=16).digest()
    out: bytes = msgpack.packb([SNAPSHOT_MAGIC, SNAPSHOT_VERSION, check, body], use_bin_type=True)
    return out
