"""The tree's snapshot format (version 2) and the committed znode record it holds.

``[MAGIC, VERSION, blake2b-128(body), body]`` with body = msgpack of
``[last_zxid, [row sorted by path], [[session_id, timeout_ms] sorted]]`` and
``row = [path, data, czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, pzxid,
[[perms, scheme, id], ...]]``: data is bin, or nil for ZooKeeper's null; the stored stat
(cversion counts child creations, owner is the stored owner with the container / TTL markers)
and the ACL; dataLength and numChildren follow from the rest. Version 1 (no ACLs, no ZooKeeper subtree) is refused by name.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import msgpack

from zabray.errors import CorruptionError, FormatVersionError
from zabray.tree.errors import BadArgumentsError
from zabray.tree.paths import ROOT, SPECIAL_PATHS, name_of, parent_of, validate_path
from zabray.tree.znode import ACL, Kind, Stat, kind_of, valid_owner

SNAPSHOT_MAGIC = "zabray.tree"
SNAPSHOT_VERSION = 2

_U64 = 1 << 64
_I64 = 1 << 63
_I32 = 1 << 31


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


def _bad(msg: str) -> CorruptionError:
    return CorruptionError(f"bad tree snapshot: {msg}")


def _int(v: Any, lo: int, hi: int, what: str) -> int:
    if type(v) is not int or not lo <= v < hi:
        raise _bad(f"{what} out of range: {v!r:.40}")
    return v


def _acl(v: Any, path: str) -> tuple[ACL, ...]:
    if type(v) is not list:
        raise _bad(f"{path}: acl is not a list")
    out = []
    for e in v:
        if type(e) is not list or len(e) != 3 or type(e[1]) is not str or type(e[2]) is not str:
            raise _bad(f"{path}: acl entry is not [perms, scheme, id]")
        out.append((_int(e[0], -_I32, _I32, "perms"), e[1], e[2]))
    return tuple(out)


def _content(data: bytes) -> Any:
    if type(data) is not bytes:
        raise _bad(f"expected bytes, got {type(data).__name__}")
    try:
        outer = msgpack.unpackb(data, raw=False)
        if type(outer) is not list or len(outer) != 4:
            raise _bad("not a [magic, version, checksum, body] list")
        magic, version, check, body = outer
        if magic != SNAPSHOT_MAGIC:
            raise _bad(f"wrong magic {magic!r:.40}")
        if type(body) is not bytes or type(check) is not bytes:
            raise _bad("checksum and body must be bytes")
        if hashlib.blake2b(body, digest_size=16).digest() != check:
            raise _bad("checksum mismatch")
        if version == 1 and type(version) is int:
            raise FormatVersionError(
                "tree snapshot written in format 1 by an older zabray (no ACLs, containers, TTL "
                "znodes or /zookeeper); this one reads format 2 only. Move the data directory "
                "aside (or recreate the ensemble)."
            )
        if version != SNAPSHOT_VERSION or type(version) is not int:
            raise _bad(f"unsupported version {version!r:.20}")
        return msgpack.unpackb(body, raw=False)
    except CorruptionError:
        raise
    except Exception as e:  # msgpack raises several unrelated types on garbage
        raise _bad(f"undecodable ({type(e).__name__}: {e})") from None


def decode_snapshot(data: bytes) -> tuple[int, dict[str, Node], dict[int, int], dict[int, set[str]]]:
    """(last zxid, nodes, sessions, ephemerals by session); CorruptionError unless the snapshot
    checks out and describes a consistent tree."""
    content = _content(data)
    if type(content) is not list or len(content) != 3:
        raise _bad("body is not [last_zxid, nodes, sessions]")
    last_raw, node_rows, session_rows = content
    last = _int(last_raw, 0, _U64, "last zxid")
    if type(node_rows) is not list or type(session_rows) is not list:
        raise _bad("nodes and sessions must be lists")

    sessions: dict[int, int] = {}
    prev = 0
    for row in session_rows:
        if type(row) is not list or len(row) != 2:
            raise _bad("session row is not [id, timeout]")
        sid = _int(row[0], 1, _I64, "session id")
        if sid <= prev:
            raise _bad("sessions not sorted or repeated")
        prev = sid
        sessions[sid] = _int(row[1], 1, _I32, "session timeout")
    ephemerals: dict[int, set[str]] = {sid: set() for sid in sessions}

    nodes: dict[str, Node] = {}
    prev_path = ""
    for row in node_rows:
        if type(row) is not list or len(row) != 12:
            raise _bad("node row is not [path, data, *stat, acl]")
        path, ndata = row[0], row[1]
        if type(path) is not str or (ndata is not None and type(ndata) is not bytes):
            raise _bad("node path/data of the wrong type")
        try:
            validate_path(path)
        except BadArgumentsError as e:
            raise _bad(str(e)) from None
        if path <= prev_path:
            raise _bad("nodes not sorted by path or repeated")
        prev_path = path
        czxid, mzxid, ctime, mtime, version, cversion, aversion = (
            _int(v, -_I64, _I64, "stat field") for v in row[2:9]
        )
        owner = _int(row[9], 0, _U64, "owner")
        pzxid = _int(row[10], -_I64, _I64, "pzxid")
        if not valid_owner(owner):
            raise _bad(f"{path}: invalid owner 0x{owner:x}")
        stat = Stat(czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, 0 if ndata is None else len(ndata), 0, pzxid)
        node = Node(ndata, stat, _acl(row[11], path))
        if path == ROOT:
            if owner:
                raise _bad("the root must be persistent")
        else:
            parent = nodes.get(parent_of(path))  # sorting puts every parent before its children
            if parent is None:
                raise _bad(f"{path}: parent missing")
            if kind_of(parent.stat.ephemeral_owner) is Kind.EPHEMERAL:
                raise _bad(f"{path}: parent is ephemeral")
            parent.add_child(name_of(path))
        if kind_of(owner) is Kind.EPHEMERAL:
            owned = ephemerals.get(owner)
            if owned is None:
                raise _bad(f"{path}: owner session 0x{owner:x} is not live")
            owned.add(path)
        nodes[path] = node
    missing = SPECIAL_PATHS - nodes.keys()
    if missing:
        raise _bad(f"missing {', '.join(sorted(missing))}")
    for node in nodes.values():
        if node.children:
            node.stat = replace(node.stat, num_children=len(node.children))
    return last, nodes, sessions, ephemerals
