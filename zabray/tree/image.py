"""``TreeImage``: the committed tree as of one zxid, encoded a slice at a time while it moves on.

Encoding a large tree takes long: 35,000 1 KB znodes cost about 0.4 s of CPU. Done in one go on a
replica's event loop, that stalls the replica past ``sync_limit`` and costs an election. An image
fixes the tree's content when it is taken, and is then encoded in slices between other work.

Copy-on-write keeps it fixed. Until the image is done, the tree hands it each znode's row before
that znode's first change or removal (``keep``). A slice therefore encodes, for every path the
tree held when the image was taken, either the row kept for it or the live znode, which nothing
has changed since. Paths created later are not in the image. Sessions are few, so they are copied
when the image is taken. The bytes are exactly ``encode_snapshot``'s for the tree at that zxid,
handed back as the header and one part per slice: joining them would copy the whole snapshot in
one go on the loop, which held replicas for most of a second with a 150 MB tree.

``restore`` replaces the tree wholesale; the tree then marks the image ``stale`` and drops it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import msgpack

from zabray.protocol.statemachine import Encoded
from zabray.tree.snapshot import SNAPSHOT_MAGIC, SNAPSHOT_VERSION, Node, node_row

# A slice stops after this many encoded bytes even within its row budget (large znode values).
SLICE_BYTES = 1 << 20


def _bin_header(n: int) -> bytes:
    """msgpack's header for a bin of ``n`` bytes (the Packer has none of its own)."""
    if n < 1 << 8:
        return b"\xc4" + n.to_bytes(1, "big")
    if n < 1 << 16:
        return b"\xc5" + n.to_bytes(2, "big")
    return b"\xc6" + n.to_bytes(4, "big")


class TreeImage:
    """One snapshot in the making. ``encode(budget)`` encodes up to ``budget`` more znodes and
    returns the snapshot's bytes in parts once every znode is in; ``None`` until then."""

    __slots__ = ("zxid", "stale", "_live", "_paths", "_kept", "_sessions", "_next", "_body", "_hash",
                 "_packer", "_done", "_data")

    def __init__(self, zxid: int, live: dict[str, Node], sessions: dict[int, int],
                 done: Callable[[TreeImage], None]) -> None:
        self.zxid = zxid
        self.stale = False
        self._live = live  # the tree's own dict: read, never written
        self._paths: list[str] = list(live)  # sorted by the first slice
        self._kept: dict[str, list[Any]] = {}
        self._sessions = [[s, t] for s, t in sorted(sessions.items())]
        self._next = -1  # -1: the body's head is not written yet
        self._body: list[bytes] = []
        self._hash = hashlib.blake2b(digest_size=16)
        self._packer = msgpack.Packer(use_bin_type=True)
        self._done = done
        self._data: Encoded | None = None

    def keep(self, path: str, node: Node) -> None:
        """The tree is about to change or remove ``path``: remember its row as of the image
        (only the first time; later changes are past the image)."""
        if path not in self._kept:
            self._kept[path] = node_row(path, node)

    def encode(self, budget: int) -> Encoded | None:
        if self._data is not None:
            return self._data
        if self.stale:
            raise RuntimeError("encode of a stale tree image (the tree was restored since)")
        pack = self._packer.pack
        paths, kept, live = self._paths, self._kept, self._live
        parts: list[bytes] = []
        if self._next < 0:
            paths.sort()
            parts += [self._packer.pack_array_header(3), pack(self.zxid), self._packer.pack_array_header(len(paths))]
            self._next = 0
        i, end, size = self._next, min(len(paths), self._next + max(1, budget)), 0
        while i < end and size < SLICE_BYTES:
            p = paths[i]
            row = kept.get(p)
            b = pack(row if row is not None else node_row(p, live[p]))
            parts.append(b)
            size += len(b)
            i += 1
        self._next = i
        if i == len(paths):
            parts.append(pack(self._sessions))
        chunk = b"".join(parts)
        self._hash.update(chunk)
        self._body.append(chunk)
        if i < len(paths):
            return None
        body_len = sum(len(c) for c in self._body)
        head = (self._packer.pack_array_header(4) + pack(SNAPSHOT_MAGIC) + pack(SNAPSHOT_VERSION)
                + pack(self._hash.digest()) + _bin_header(body_len))
        self._data = (head, *self._body)  # not joined: see zabray.protocol.statemachine.Encoded
        self._body, self._kept, self._paths = [], {}, []
        self._done(self)
        return self._data
