"""Shared by the storage tests that build or take apart segment images by hand."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from storage.checksum import crc32c
from storage.records import (
    GROUP_HEAD,
    GROUP_HEADER_SIZE,
    GROUP_MAGIC_BYTES,
    REC_HEADER_SIZE,
    encode_txns,
    group_frames,
)
from storage.records_v3 import REC_FULL, REC_HEAD, REC_MAGIC
from storage.segments import SEG_HEADER_SIZE
from zabray.protocol.messages import Txn


def group_spans(data: bytes) -> list[tuple[int, int, list[int]]]:
    """(start, end, zxids) of each group frame of a segment image, up to the first frame that
    is not a group."""
    out = []
    off = SEG_HEADER_SIZE
    while off + GROUP_HEADER_SIZE <= len(data) and data[off : off + 4] == GROUP_MAGIC_BYTES:
        _magic, count, length = GROUP_HEAD.unpack_from(data, off)
        zxids, pos = [], off + GROUP_HEADER_SIZE
        for _ in range(count):
            n, z = struct.unpack_from("<IQ", data, pos)
            zxids.append(z)
            pos += REC_HEADER_SIZE + n
        out.append((off, off + GROUP_HEADER_SIZE + length, zxids))
        off += GROUP_HEADER_SIZE + length
    return out


def encode_groups(batches: Sequence[Sequence[Txn]], seed: int = 0) -> bytes:
    """The group frames of ``batches``, one group each, as consecutive syncs write them."""
    out = b""
    after = 0
    for batch in batches:
        parts: list[bytes] = []
        size = encode_txns(batch, after, parts, [])
        out += b"".join(group_frames(parts, size, seed)[0])
        after = batch[-1].zxid
    return out


def encode_v3_records(txns: Sequence[Txn], seed: int = 0) -> bytes:
    """Records of formats 2 (``seed`` 0) and 3, a checksum each, as older zabray wrote them."""
    out = b""
    for t in txns:
        head = REC_HEAD.pack(REC_MAGIC, len(t.value), t.zxid, t.origin, t.request_id)
        out += REC_FULL.pack(REC_MAGIC, len(t.value), t.zxid, t.origin, t.request_id, crc32c(t.value, crc32c(head, seed)))
        out += t.value
    return out
