"""``TreeRestore``: a tree snapshot checked and decoded a slice at a time, then installed whole.

Decoding a large snapshot takes long: 300,000 1 KB znodes cost about 4.5 s of CPU. A learner that
decoded a SNAP in one go on its event loop answered nobody meanwhile, and its leader dropped it
after ``init_limit``. A restore instead checks the body's checksum, then decodes its rows, a
slice per ``decode`` call, between the replica's other work.

Invariants:
- Nothing of the tree changes until ``install``, and ``install`` refuses a restore that has not
  decoded, and checked, every row: a snapshot that fails half-way leaves the tree as it was.
- The checks are the format's (``zabray.tree.snapshot``) whether decoded in one call or many:
  ``decode_snapshot`` is a restore run to the end. Rows are checked before the sessions that
  follow them are read, so an ephemeral's owner is checked once the sessions are in.
- The body is read where it lies (``io.BytesIO`` shares a ``bytes`` object's buffer): a 320 MB
  SNAP is not copied again to be decoded.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import msgpack

from zabray.errors import CorruptionError, FormatVersionError
from zabray.tree import quotas
from zabray.tree.errors import BadArgumentsError
from zabray.tree.paths import ROOT, SPECIAL_PATHS, name_of, parent_of, validate_path
from zabray.tree.snapshot import SNAPSHOT_MAGIC, SNAPSHOT_VERSION, Node
from zabray.tree.znode import ACL, Kind, Stat, kind_of, valid_owner

HASH_SLICE = 8 << 20
"""Body bytes checksummed per ``decode`` call (about 10 ms of blake2b here)."""

_U64 = 1 << 64
_I64 = 1 << 63
_I32 = 1 << 31
_HEAD = 64  # the wrapper's bytes before the body: array, magic, version, 16-byte checksum, bin header


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


class Restored:
    """A snapshot's content, every check passed: what ``DataTree`` installs."""

    __slots__ = ("last", "nodes", "sessions", "ephemerals", "containers", "ttls", "quotas")

    def __init__(self, last: int, nodes: dict[str, Node], sessions: dict[int, int],
                 ephemerals: dict[int, set[str]], containers: set[str], ttls: set[str], quota_paths: set[str]) -> None:
        self.last, self.nodes, self.sessions, self.ephemerals = last, nodes, sessions, ephemerals
        self.containers, self.ttls, self.quotas = containers, ttls, quota_paths


class TreeRestore:
    """One snapshot being restored. ``decode(budget)`` checks or decodes about ``budget`` more
    rows (or ``HASH_SLICE`` bytes of checksum) and says whether all is done; ``install`` then
    hands the content to the tree. Any failure raises ``CorruptionError`` (``FormatVersionError``
    for format 1) and the restore stays failed."""

    __slots__ = ("stale", "_install", "_data", "_body_at", "_hashed", "_hash", "_check", "_version",
                 "_unpacker", "_left", "_last", "_nodes", "_owned", "_prev", "_containers", "_ttls",
                 "_quotas", "_result", "_failed")

    def __init__(self, data: bytes, install: Callable[[Restored], None]) -> None:
        self.stale = False  # set by whoever gives up on it (the core: a newer SNAP, a crash)
        self._install = install
        self._failed: CorruptionError | None = None
        self._result: Restored | None = None
        self._nodes: dict[str, Node] = {}
        self._owned: list[tuple[str, int]] = []  # (path, owner) of ephemerals, in row order
        self._containers: set[str] = set()
        self._ttls: set[str] = set()
        self._quotas: set[str] = set()
        self._prev = ""
        self._left = -1  # rows still to decode; -1 while the checksum is being checked
        self._last = 0
        self._unpacker: msgpack.Unpacker | None = None
        if type(data) is not bytes:
            raise _bad(f"expected bytes, got {type(data).__name__}")
        self._data = data
        self._hashed = 0
        self._hash = hashlib.blake2b(digest_size=16)
        self._body_at, self._check, self._version = self._wrapper(data)

    @staticmethod
    def _wrapper(data: bytes) -> tuple[int, bytes, Any]:
        """(where the body starts, its checksum, the version): ``[magic, version, check, body]``
        read up to the body, which must run to the end of ``data``."""
        try:
            u = msgpack.Unpacker(raw=False)
            u.feed(data[:_HEAD])
            if u.read_array_header() != 4:
                raise _bad("not a [magic, version, checksum, body] list")
            magic, version, check = u.unpack(), u.unpack(), u.unpack()
            at = u.tell()
        except CorruptionError:
            raise
        except Exception as e:  # msgpack raises several unrelated types on garbage
            raise _bad(f"undecodable ({type(e).__name__}: {e})") from None
        if magic != SNAPSHOT_MAGIC:
            raise _bad(f"wrong magic {magic!r:.40}")
        kind = data[at] if at < len(data) else None
        width = {0xC4: 1, 0xC5: 2, 0xC6: 4}.get(kind)  # type: ignore[arg-type]
        if type(check) is not bytes or width is None:
            raise _bad("checksum and body must be bytes")
        length = int.from_bytes(data[at + 1 : at + 1 + width], "big")
        body_at = at + 1 + width
        if body_at + length != len(data):
            raise _bad("the body does not end the snapshot (truncated, or bytes after it)")
        return body_at, check, version

    def decode(self, budget: int) -> bool:
        if self._result is not None:
            return True
        if self._failed is not None:
            raise self._failed
        try:
            if self._left < 0:
                self._check_slice()
            else:
                self._rows(max(1, budget))
        except CorruptionError as e:
            self._failed = e
            raise
        except Exception as e:  # msgpack raises several unrelated types on garbage
            self._failed = _bad(f"undecodable ({type(e).__name__}: {e})")
            raise self._failed from None
        return self._result is not None

    def install(self) -> None:
        """Replace the tree's content with the snapshot's (every row decoded and checked)."""
        if self._result is None or self.stale:
            raise RuntimeError("install of a tree restore that is not done, or was given up")
        self._install(self._result)

    def decode_all(self) -> Restored:
        while not self.decode(1 << 30):
            pass
        assert self._result is not None
        return self._result

    # -- the slices ------------------------------------------------------------------------------

    def _check_slice(self) -> None:
        data = self._data
        start = self._body_at + self._hashed
        end = min(len(data), start + HASH_SLICE)
        with memoryview(data) as view:
            self._hash.update(view[start:end])
        self._hashed = end - self._body_at
        if end < len(data):
            return
        if self._hash.digest() != self._check:
            raise _bad("checksum mismatch")
        version = self._version
        if version == 1 and type(version) is int:
            raise FormatVersionError(
                "tree snapshot written in format 1 by an older zabray (no ACLs, containers, TTL "
                "znodes or /zookeeper); this one reads format 2 only. Move the data directory "
                "aside (or recreate the ensemble)."
            )
        if version != SNAPSHOT_VERSION or type(version) is not int:
            raise _bad(f"unsupported version {version!r:.20}")
        body = io.BytesIO(data)  # shares the bytes: nothing is copied
        body.seek(self._body_at)
        size = max(1, len(data) - self._body_at)
        u = self._unpacker = msgpack.Unpacker(body, raw=False, max_buffer_size=size, read_size=min(size, 1 << 20))
        if u.read_array_header() != 3:
            raise _bad("body is not [last_zxid, nodes, sessions]")
        self._last = _int(u.unpack(), 0, _U64, "last zxid")
        self._left = u.read_array_header()

    def _rows(self, budget: int) -> None:
        u = self._unpacker
        assert u is not None
        n = min(budget, self._left)
        unpack, row = u.unpack, self._row
        for _ in range(n):
            row(unpack())
        self._left -= n
        if self._left == 0:
            self._finish(u)

    def _row(self, row: Any) -> None:
        if type(row) is not list or len(row) != 12:
            raise _bad("node row is not [path, data, *stat, acl]")
        path, ndata = row[0], row[1]
        if type(path) is not str or (ndata is not None and type(ndata) is not bytes):
            raise _bad("node path/data of the wrong type")
        try:
            validate_path(path)
        except BadArgumentsError as e:
            raise _bad(str(e)) from None
        if path <= self._prev:
            raise _bad("nodes not sorted by path or repeated")
        self._prev = path
        czxid, mzxid, ctime, mtime, version, cversion, aversion = (
            _int(v, -_I64, _I64, "stat field") for v in row[2:9]
        )
        owner = _int(row[9], 0, _U64, "owner")
        pzxid = _int(row[10], -_I64, _I64, "pzxid")
        if not valid_owner(owner):
            raise _bad(f"{path}: invalid owner 0x{owner:x}")
        stat = Stat(czxid, mzxid, ctime, mtime, version, cversion, aversion, owner,
                    0 if ndata is None else len(ndata), 0, pzxid)
        node = Node(ndata, stat, _acl(row[11], path))
        nodes = self._nodes
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
        if owner:
            kind = kind_of(owner)
            if kind is Kind.EPHEMERAL:
                self._owned.append((path, owner))
            elif kind is Kind.CONTAINER:
                self._containers.add(path)
            elif kind is Kind.TTL:
                self._ttls.add(path)
        quota = quotas.quota_of_limit_node(path)
        if quota is not None:
            self._quotas.add(quota)
        nodes[path] = node

    def _finish(self, u: msgpack.Unpacker) -> None:
        session_rows = u.unpack()
        try:
            u.unpack()
        except msgpack.OutOfData:
            pass
        else:
            raise _bad("body is not [last_zxid, nodes, sessions]")
        if type(session_rows) is not list:
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
        for path, owner in self._owned:
            owned = ephemerals.get(owner)
            if owned is None:
                raise _bad(f"{path}: owner session 0x{owner:x} is not live")
            owned.add(path)
        nodes = self._nodes
        missing = SPECIAL_PATHS - nodes.keys()
        if missing:
            raise _bad(f"missing {', '.join(sorted(missing))}")
        for node in nodes.values():
            if node.children:
                node.stat = replace(node.stat, num_children=len(node.children))
        self._result = Restored(self._last, nodes, sessions, ephemerals, self._containers, self._ttls, self._quotas)
        self._unpacker = None
        self._owned = []


def decode_snapshot(data: bytes) -> tuple[int, dict[str, Node], dict[int, int], dict[int, set[str]]]:
    """(last zxid, nodes, sessions, ephemerals by session); CorruptionError unless the snapshot
    checks out and describes a consistent tree."""
    r = TreeRestore(data, lambda _: None).decode_all()
    return r.last, r.nodes, r.sessions, r.ephemerals
