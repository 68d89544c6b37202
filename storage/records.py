"""Log frames of segment format 4: a group commit's records under one checksum, and cut frames.

A segment's data is a run of frames from offset 32 (``storage.segments``)::

    group   magic "ZBG4" u32 | count u32 | body length u32 | crc32c u32 | body
            body: ``count`` records back to back, each
                  value length u32 | zxid u64 | origin i64 | request_id i64 | value
    cut     magic "ZBC4" u32 | keep u32 | zxid u64 | crc32c u32

A reconfiguration txn's record has bit 31 of its value length set (``CONFIG_FLAG``; no value is
that long: a group holds at most ``MAX_GROUP_BODY``); what the length covers is then
``config length u32 | the configuration's member lines (UTF-8) | value``. Logs written before
reconfiguration existed never set it, so they read as they did.

A group is what one ``sync`` wrote. Its crc32c covers its first 12 header bytes and its body,
starting from the segment's random ``seed``, so a whole group commit costs one checksum call
instead of two per record (with 1 KiB values, the per-record calls took more CPU than the disk
took to write the record). A group is valid whole or not at all: a torn write loses the group,
which is fine because nothing in it was acknowledged before the fdatasync covering all of it.

A cut frame truncates the group before it (after any earlier cuts of that group) to its first
``keep`` records, the last of which has zxid ``zxid``; its crc32c covers its first 16 bytes from
the seed. A truncation that falls inside a durable group appends one, instead of rewriting the
group in place: a crash leaves either the whole group (no cut yet, as if the truncation had
not begun) or the group and a complete cut, never a group damaged by a torn rewrite. Records
before the cut were acknowledged, and so must survive any crash during the truncation.

The first all-zero frame header (16 bytes) marks the end of a segment's data; neither magic is
zero. Records of format 2 and 3, which had a checksum each, are ``storage.records_v3``'s.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from storage.checksum import crc32c
from zabray.errors import ConfigError, CorruptionError
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import fmt

U32 = struct.Struct("<I")
GROUP_MAGIC = 0x3447425A  # b"ZBG4" little-endian
CUT_MAGIC = 0x3443425A  # b"ZBC4"
GROUP_MAGIC_BYTES = U32.pack(GROUP_MAGIC)
CUT_MAGIC_BYTES = U32.pack(CUT_MAGIC)
GROUP_HEAD = struct.Struct("<III")  # magic, count, body length; the crc follows
GROUP_HEADER_SIZE = GROUP_HEAD.size + U32.size  # 16
REC = struct.Struct("<IQqq")  # value length, zxid, origin, request_id
REC_HEADER_SIZE = REC.size  # 28
CUT_BODY = struct.Struct("<IIQ")  # magic, keep, zxid; the crc follows
CUT_SIZE = CUT_BODY.size + U32.size  # 20
ZERO_FRAME = bytes(GROUP_HEADER_SIZE)
MAX_GROUP_BODY = 1 << 30
"""A sync with more pending bytes than this writes several groups (a body length is a u32)."""
CONFIG_FLAG = 1 << 31
"""Set in a record's value length: a reconfiguration txn (see the module doc)."""


def encode_txns(txns: Sequence[Txn], after: int, parts: list[bytes], zxids: list[int]) -> int:
    """Encode txns as records onto ``parts`` (header, then value: two per record) and ``zxids``;
    returns the number of bytes added. The group's checksum is computed at sync, over them all.

    All or nothing: raises ``ConfigError`` and leaves both lists as they were when zxids do not
    strictly increase from ``after`` or a field does not fit its slot, since such a record could
    never be recovered. (The hot path of group commit: kept lean on purpose.)
    """
    n_parts, n_zxids = len(parts), len(zxids)
    pack = REC.pack
    add = parts.append
    add_z = zxids.append
    last = after
    size = 0
    try:
        for t in txns:
            z = t.zxid
            if z <= last:
                raise ConfigError(
                    f"append: zxid {fmt(z)} does not follow {fmt(last)}; the log must strictly increase"
                )
            v = t.value
            if type(v) is not bytes:
                if not isinstance(v, (bytes, bytearray, memoryview)):
                    raise ConfigError(f"append: txn {fmt(z)} value must be bytes, got {type(v).__name__}")
                v = bytes(v)
            cfg = t.config
            if cfg is not None:  # (rare: kept off the common path)
                text = cfg.body().encode()
                v = U32.pack(len(text)) + text + v
            n = len(v)
            try:
                add(pack(n | CONFIG_FLAG if cfg is not None else n, z, t.origin, t.request_id))
            except struct.error as e:
                raise ConfigError(f"append: txn {fmt(z)} does not fit a log record: {e}") from e
            add(v)
            add_z(z)
            size += n
            last = z
    except BaseException:
        del parts[n_parts:], zxids[n_zxids:]
        raise
    return size + REC_HEADER_SIZE * (len(zxids) - n_zxids)


def framed_size(size: int) -> int:
    """At most the bytes ``group_frames`` makes of ``size`` bytes of records (two consecutive
    groups together exceed ``MAX_GROUP_BODY``, or they would have been one)."""
    return size + GROUP_HEADER_SIZE * (2 * size // MAX_GROUP_BODY + 1)


def group_frames(parts: list[bytes], size: int, seed: int) -> tuple[list[bytes], list[tuple[int, int]]]:
    """The group frames (header, body, header, body...) holding the records in ``parts`` (``size``
    bytes), one group unless they exceed ``MAX_GROUP_BODY`` bytes; and for each group, its
    offset in the frames and the index of its first record."""
    if size <= MAX_GROUP_BODY:  # the usual case: no walk over the records
        return [*_group(parts, seed)], [(0, 0)]
    out: list[bytes] = []
    starts: list[tuple[int, int]] = []
    offset = 0
    i = 0
    while i < len(parts):
        j, body = i, 0
        while j < len(parts) and (j == i or body + len(parts[j]) + len(parts[j + 1]) <= MAX_GROUP_BODY):
            body += len(parts[j]) + len(parts[j + 1])
            j += 2
        out += _group(parts[i:j], seed)
        starts.append((offset, i // 2))
        offset += GROUP_HEADER_SIZE + body
        i = j
    return out, starts


def _group(parts: list[bytes], seed: int) -> tuple[bytes, bytes]:
    body = b"".join(parts)
    head = GROUP_HEAD.pack(GROUP_MAGIC, len(parts) // 2, len(body))
    return head + U32.pack(crc32c(body, crc32c(head, seed))), body


def cut_frame(keep: int, zxid: int, seed: int) -> bytes:
    body = CUT_BODY.pack(CUT_MAGIC, keep, zxid)
    return body + U32.pack(crc32c(body, seed))


class Record(NamedTuple):
    """A record found in a group: where it starts, its fields, and where its value lies
    (``config``: a reconfiguration txn's member lines, else None)."""

    offset: int
    zxid: int
    origin: int
    request_id: int
    start: int
    end: int
    config: str | None = None


class Group(NamedTuple):
    end: int
    records: list[Record]


def read_group(data: bytes, off: int, seed: int) -> Group | None:
    """The group frame at ``off`` if it is whole and its checksum holds, else None.

    A group whose checksum holds but whose records do not fill its body exactly was written
    wrong, not torn: that raises ``ValueError`` for the caller to report as corruption.
    """
    n = len(data)
    if off + GROUP_HEADER_SIZE > n:
        return None
    magic, count, length = GROUP_HEAD.unpack_from(data, off)
    body = off + GROUP_HEADER_SIZE
    end = body + length
    if magic != GROUP_MAGIC or end > n:
        return None
    mv = memoryview(data)
    if crc32c(mv[body:end], crc32c(mv[off : off + GROUP_HEAD.size], seed)) != U32.unpack_from(data, off + 12)[0]:
        return None
    records: list[Record] = []
    unpack = REC.unpack_from
    pos = body
    while pos < end:
        if pos + REC_HEADER_SIZE > end:
            raise ValueError(f"group at offset {off}: record header at offset {pos} runs past the group")
        length, z, origin, rid = unpack(data, pos)
        start = pos + REC_HEADER_SIZE
        flagged = length & CONFIG_FLAG
        length &= ~CONFIG_FLAG
        if start + length > end:
            raise ValueError(f"group at offset {off}: record at offset {pos} runs past the group")
        config, skip = _config_of(data, start, length, pos) if flagged else (None, 0)
        records.append(Record(pos, z, origin, rid, start + skip, start + length, config))
        pos = start + length
    if len(records) != count or count == 0:
        raise ValueError(f"group at offset {off} holds {len(records)} records, its header says {count}")
    return Group(end, records)


def _config_of(data: bytes, start: int, length: int, pos: int) -> tuple[str, int]:
    """A reconfiguration record's member lines and how many bytes of its value they take."""
    if length < U32.size or start + length > len(data):
        raise ValueError(f"reconfiguration record at offset {pos} is too short for its configuration")
    (n,) = U32.unpack_from(data, start)
    if U32.size + n > length:
        raise ValueError(f"reconfiguration record at offset {pos}: its configuration runs past the record")
    try:
        text = bytes(data[start + U32.size : start + U32.size + n]).decode()
    except UnicodeDecodeError:
        raise ValueError(f"reconfiguration record at offset {pos}: its configuration is not UTF-8") from None
    return text, U32.size + n


def read_cut(data: bytes, off: int, seed: int) -> tuple[int, int] | None:
    """(keep, zxid) of the cut frame at ``off`` if it is whole and its checksum holds, else None."""
    if off + CUT_SIZE > len(data):
        return None
    magic, keep, zxid = CUT_BODY.unpack_from(data, off)
    if magic != CUT_MAGIC or crc32c(memoryview(data)[off : off + CUT_BODY.size], seed) != U32.unpack_from(
        data, off + CUT_BODY.size
    )[0]:
        return None
    return keep, zxid


def any_valid_frame_after(data: bytes, start: int, seed: int) -> int | None:
    """Offset of any group or cut frame at or after ``start`` valid under ``seed``, else None."""
    found = []
    for magic, valid in ((GROUP_MAGIC_BYTES, _valid_group_at), (CUT_MAGIC_BYTES, _valid_cut_at)):
        pos = data.find(magic, start)
        while pos != -1 and not valid(data, pos, seed):
            pos = data.find(magic, pos + 1)
        if pos != -1:
            found.append(pos)
    return min(found) if found else None


def _valid_group_at(data: bytes, off: int, seed: int) -> bool:
    try:
        return read_group(data, off, seed) is not None
    except ValueError:
        return True  # its checksum holds: a group was written there


def _valid_cut_at(data: bytes, off: int, seed: int) -> bool:
    return read_cut(data, off, seed) is not None


class Cut(NamedTuple):
    """How to drop a region's records after a zxid: ``ftruncate`` at ``at`` then, if ``frame``
    is set, append it there; ``tail`` is the last record kept (None if the region keeps none)."""

    at: int
    frame: bytes | None
    tail: int | None


def plan_cut(data: bytes, zxid: int, seed: int) -> Cut:
    """Where to cut ``data`` (one group and its cut frames, as written by this process) so that
    only its records <= ``zxid`` remain. Offsets are relative to ``data``. ``CorruptionError``
    if the region no longer reads back as written."""
    try:
        group = read_group(data, 0, seed)
    except ValueError as e:
        raise CorruptionError(f"{e}, in a region written by this process") from None
    if group is None:
        raise CorruptionError("no valid group at the start of a region written by this process")
    records = group.records
    off = group.end
    while off < len(data):
        cut = read_cut(data, off, seed)
        if cut is None:
            raise CorruptionError(f"bad cut frame at offset {off} of a region written by this process")
        records = records[: cut[0]]
        off += CUT_SIZE
    keep = sum(1 for r in records if r.zxid <= zxid)
    if keep == 0:
        return Cut(0, None, None)
    tail = records[keep - 1].zxid
    if keep == len(records):
        return Cut(off, None, tail)
    return Cut(off, cut_frame(keep, tail, seed), tail)
