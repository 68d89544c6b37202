"""A log segment's name, header and records as read back: the on-disk format the writer
(``storage.txnlog``) produces and recovery (``storage.recovery``) scans.

Segment file ``log.<generation:08x>.<seq:08x>``::

    header (32 bytes)  magic "ZBLG" | version u16 | flags u16 | generation u32 | seq u32 | prev zxid u64
                       | seed u32 | crc32c u32 of the 28 bytes before
                       (flags bit 0: preallocated, so the file is never shorter than its records;
                        bit 1: recycled, so bytes past the end may be an older segment's records)
    frames             back to back from offset 32: groups of records, each checksummed once from
                       the seed, and cut frames (``storage.records``)
    zeros              up to the preallocated size; in a recycled file, one all-zero frame
                       header after the last frame, then whatever the file held before

Formats 2 and 3 (read, never appended to: the writer starts a new segment) held records with a
checksum each (``storage.records_v3``); format 2 had no seed (checksums from 0), and 4 zero
bytes after the header's checksum. The first all-zero header marks the end of a segment's data.
"""

from __future__ import annotations

import os
import re
import struct
from array import array
from dataclasses import dataclass

from storage import fsutil
from storage.checksum import crc32c, reject_format_1
from storage.records import (
    CUT_MAGIC,
    CUT_MAGIC_BYTES,
    CUT_SIZE,
    GROUP_HEAD,
    GROUP_HEADER_SIZE,
    GROUP_MAGIC,
    U32,
    ZERO_FRAME,
    Record,
    any_valid_frame_after,
    read_cut,
    read_group,
)
from storage.records_v3 import REC_HEAD, REC_HEADER_SIZE, REC_MAGIC, ZERO_HEADER, any_valid_record_after
from zabray.errors import CodecError, CorruptionError
from zabray.protocol.membership import Membership
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid, fmt

SEG_MAGIC = b"ZBLG"
SEG_VERSION = 4
_SEG_BODY = struct.Struct("<4sHHIIQI")  # versions 3 and 4: the seed is part of the checksummed body
_SEG_BODY_V2 = struct.Struct("<4sHHIIQ")
SEG_HEADER_SIZE = 32
FLAG_PREALLOCATED = 1
FLAG_RECYCLED = 2

_NAME = re.compile(r"^log\.([0-9a-f]{8})\.([0-9a-f]{8})$")


# -- names and headers ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A segment of the current log: its sequence number, its ``prev`` zxid and file name, and
    the ``seed`` its records' checksums start from, and its format ``version``."""

    generation: int
    seq: int
    prev: Zxid
    name: str
    preallocated: bool = False
    seed: int = 0
    recycled: bool = False
    version: int = SEG_VERSION


def segment_name(generation: int, seq: int) -> str:
    return f"log.{generation:08x}.{seq:08x}"


def parse_segment_name(name: str) -> tuple[int, int] | None:
    m = _NAME.match(name)
    return None if m is None else (int(m.group(1), 16), int(m.group(2), 16))


def encode_segment_header(
    generation: int, seq: int, prev: int, preallocated: bool, seed: int = 0, recycled: bool = False
) -> bytes:
    flags = (FLAG_PREALLOCATED if preallocated else 0) | (FLAG_RECYCLED if recycled else 0)
    body = _SEG_BODY.pack(SEG_MAGIC, SEG_VERSION, flags, generation, seq, prev, seed)
    return body + U32.pack(crc32c(body))


def new_seed() -> int:
    """A fresh segment's seed: random, so an older file's record checks out under it only by a
    2^-32 chance (and recovery reads past the end only after a torn write)."""
    return int.from_bytes(os.urandom(4), "little")


def decode_segment_header(name: str, data: bytes, generation: int, seq: int) -> SegmentInfo:
    """Verify a segment header (format 4, 3 or 2) against its file name; ``CorruptionError``
    otherwise."""
    if len(data) < SEG_HEADER_SIZE:
        raise CorruptionError(f"{name}: {len(data)} bytes at offset 0, shorter than the segment header")
    v2 = data[4:6] == b"\x02\x00"
    body = _SEG_BODY_V2 if v2 else _SEG_BODY
    (crc,) = U32.unpack_from(data, body.size)
    if crc32c(data[: body.size]) != crc:
        reject_format_1(name, data, SEG_MAGIC, data[: _SEG_BODY_V2.size], U32.unpack_from(data, 24)[0])
        raise CorruptionError(f"{name}: segment header checksum mismatch at offset 0")
    if v2:
        magic, version, flags, gen, sq, prev = _SEG_BODY_V2.unpack_from(data)
        seed, known = 0, FLAG_PREALLOCATED
    else:
        magic, version, flags, gen, sq, prev, seed = _SEG_BODY.unpack_from(data)
        known = FLAG_PREALLOCATED | FLAG_RECYCLED
    if magic != SEG_MAGIC or version not in (2, 3, SEG_VERSION) or flags & ~known:
        raise CorruptionError(f"{name}: bad segment magic/version/flags at offset 0")
    if (gen, sq) != (generation, seq):
        raise CorruptionError(f"{name}: header names generation {gen} seq {sq}, not its file name")
    return SegmentInfo(
        generation,
        seq,
        Zxid(prev),
        name,
        bool(flags & FLAG_PREALLOCATED),
        seed,
        bool(flags & FLAG_RECYCLED),
        version,
    )


def read_segment_header(dirpath: str, name: str, generation: int, seq: int) -> SegmentInfo:
    with open(os.path.join(dirpath, name), "rb") as f:
        return decode_segment_header(name, f.read(SEG_HEADER_SIZE), generation, seq)


@dataclass(frozen=True, slots=True)
class SegmentScan:
    """What reading one segment found.

    ``txns`` holds the records with zxid > the ``keep_after`` asked for; ``zxids``/``offsets``
    index every valid record; ``end`` is the offset just past the last valid frame (or record);
    ``torn`` is the offset of a torn last frame that must be cut off (None when the segment is
    clean). ``cp_zxids``/``cp_offsets`` are the writer's checkpoints: where each group starts
    and its first zxid (every record, in formats 2 and 3).
    """

    info: SegmentInfo
    txns: list[Txn]
    zxids: array[int]
    offsets: array[int]
    end: int
    size: int
    torn: int | None
    cp_zxids: array[int]
    cp_offsets: array[int]

    @property
    def tail(self) -> Zxid:
        return Zxid(self.zxids[-1]) if self.zxids else self.info.prev


def scan_segment(info: SegmentInfo, data: bytes, *, keep_after: int, may_be_torn: bool) -> SegmentScan:
    """Read and verify every record of one segment (``data`` is the whole file).

    Raises ``CorruptionError`` naming the file and offset for: a bad frame that is not a torn
    tail, zxids not strictly increasing (from ``info.prev``), a cut frame that cuts nothing or
    follows no group, or non-zero bytes after the end. A torn tail (only when ``may_be_torn``)
    is a damaged frame with no valid frame anywhere after it and only zeros past its claimed
    extent; it is reported in ``torn``, not raised. In a recycled segment, "zeros" after the
    end read "no frame valid under the seed": the file's older contents lie there.
    """
    if info.version < 4:
        return _scan_records(info, data, keep_after=keep_after, may_be_torn=may_be_torn)
    name = info.name
    seed = info.seed
    n = len(data)
    txns: list[Txn] = []
    zxids = array("Q")
    offsets = array("Q")
    cp_zxids = array("Q")
    cp_offsets = array("Q")
    last = int(info.prev)
    group_size = 0  # records of the latest group still in force (what a cut frame may cut)
    off = SEG_HEADER_SIZE
    damaged = False
    while off + GROUP_HEADER_SIZE <= n:
        (magic,) = U32.unpack_from(data, off)
        if magic == GROUP_MAGIC:
            try:
                group = read_group(data, off, seed)
            except ValueError as e:
                raise CorruptionError(f"{name}: {e}") from None
            if group is None:
                damaged = True
                break
            cp_zxids.append(group.records[0].zxid)
            cp_offsets.append(off)
            for r in group.records:
                if r.zxid <= last:
                    raise CorruptionError(
                        f"{name}: zxid {fmt(r.zxid)} at offset {r.offset} does not follow {fmt(last)} "
                        "(log must strictly increase)"
                    )
                zxids.append(r.zxid)
                offsets.append(r.offset)
                if r.zxid > keep_after:
                    if r.config is None:
                        txns.append(Txn(Zxid(r.zxid), data[r.start : r.end], r.origin, r.request_id))
                    else:
                        txns.append(_config_txn(name, r, data))
                last = r.zxid
            group_size = len(group.records)
            off = group.end
        elif magic == CUT_MAGIC:
            cut = read_cut(data, off, seed)
            if cut is None:
                damaged = True
                break
            keep, z = cut
            if not 0 < keep < group_size or zxids[len(zxids) - group_size + keep - 1] != z:
                raise CorruptionError(
                    f"{name}: cut frame at offset {off} (keep {keep}, {fmt(z)}) does not cut the group before it"
                )
            drop = group_size - keep
            del zxids[len(zxids) - drop :], offsets[len(offsets) - drop :]
            while txns and txns[-1].zxid > z:
                txns.pop()
            group_size, last = keep, z
            off += CUT_SIZE
        elif data[off : off + GROUP_HEADER_SIZE] == ZERO_FRAME:
            break
        else:
            damaged = True
            break
    else:
        # Fewer bytes left than a frame header: zeros are the end; anything else is a short
        # frame (in a recycled file, older contents: the last group left no room for a zero header).
        damaged = not info.recycled and not fsutil.is_zero(data, off)
    cps = (cp_zxids, cp_offsets)
    if not damaged:
        if info.recycled:
            later = any_valid_frame_after(data, off, seed)
            if later is not None:
                raise CorruptionError(
                    f"{name}: the log ends at offset {off} but a valid frame follows at offset {later}"
                )
        elif not fsutil.is_zero(data, off):
            raise CorruptionError(f"{name}: non-zero bytes after the end of the log at offset {off}")
        return SegmentScan(info, txns, zxids, offsets, off, n, None, *cps)
    # A damaged frame. Torn only if it is the last thing in the newest segment.
    if not may_be_torn:
        raise CorruptionError(f"{name}: bad frame at offset {off} (checksum, magic or length)")
    later = any_valid_frame_after(data, off + 1, seed)
    if later is not None:
        raise CorruptionError(f"{name}: bad frame at offset {off} followed by a valid frame at offset {later}")
    if off + GROUP_HEADER_SIZE <= n:
        magic, _count, length = GROUP_HEAD.unpack_from(data, off)
        claimed_end = off + (GROUP_HEADER_SIZE + length if magic == GROUP_MAGIC else CUT_SIZE)
        # (In a recycled file older contents past a torn frame are expected, not damage.)
        known = magic in (GROUP_MAGIC, CUT_MAGIC)
        if known and claimed_end <= n and not info.recycled and not fsutil.is_zero(data, claimed_end):
            raise CorruptionError(
                f"{name}: bad frame at offset {off} followed by non-zero bytes at offset {claimed_end}"
            )
        # A cut frame may extend a full preallocated file by its own size; a group never does.
        if magic == GROUP_MAGIC and claimed_end > n and info.preallocated:
            raise CorruptionError(
                f"{name}: group at offset {off} runs past the end of the preallocated file ({n} bytes): "
                "the file was cut short"
            )
    elif info.preallocated and data[off : off + 4] != CUT_MAGIC_BYTES[: n - off]:
        raise CorruptionError(f"{name}: frame header at offset {off} cut off by the end of the preallocated file")
    return SegmentScan(info, txns, zxids, offsets, off, n, off, *cps)


def _config_txn(name: str, r: Record, data: bytes) -> Txn:
    """A reconfiguration record as its txn; a configuration that does not parse is corruption."""
    assert r.config is not None
    try:
        config = Membership.parse(r.config, r.zxid)
    except CodecError as e:
        raise CorruptionError(f"{name}: reconfiguration record at offset {r.offset}: {e}") from None
    return Txn(Zxid(r.zxid), data[r.start : r.end], r.origin, r.request_id, config)


def _scan_records(info: SegmentInfo, data: bytes, *, keep_after: int, may_be_torn: bool) -> SegmentScan:
    """``scan_segment`` for formats 2 and 3: records with a checksum each.

    Raises ``CorruptionError`` naming the file and offset for: a bad record that is not a torn
    tail, zxids not strictly increasing (from ``info.prev``), or non-zero bytes after the end.
    A torn tail (only when ``may_be_torn``) is a damaged record with no valid record anywhere
    after it and only zeros past its claimed extent; it is reported in ``torn``, not raised.
    In a recycled segment, "zeros" after the end read "no record valid under the seed": the
    file's older contents lie there.
    """
    name = info.name
    seed = info.seed
    recycled = info.recycled
    n = len(data)
    mv = memoryview(data)
    unpack = REC_HEAD.unpack_from
    u32 = U32.unpack_from
    crc32 = crc32c
    txns: list[Txn] = []
    zxids = array("Q")
    offsets = array("Q")
    last = int(info.prev)
    off = SEG_HEADER_SIZE
    damaged = False
    while off + REC_HEADER_SIZE <= n:
        if data[off : off + REC_HEADER_SIZE] == ZERO_HEADER:
            break
        magic, length, z, origin, rid = unpack(data, off)
        body = off + REC_HEADER_SIZE
        end = body + length
        if (
            magic != REC_MAGIC
            or end > n
            or crc32(mv[body:end], crc32(mv[off : off + REC_HEAD.size], seed))
            != u32(data, off + REC_HEAD.size)[0]
        ):
            damaged = True
            break
        if z <= last:
            raise CorruptionError(
                f"{name}: zxid {fmt(z)} at offset {off} does not follow {fmt(last)} (log must strictly increase)"
            )
        zxids.append(z)
        offsets.append(off)
        if z > keep_after:
            txns.append(Txn(Zxid(z), data[body:end], origin, rid))
        last = z
        off = end
    else:
        # Fewer bytes left than a record header: zeros are the end, anything else a short record
        # (in a recycled file, older contents: the last group left no room for a zero header).
        damaged = not recycled and not fsutil.is_zero(data, off)
    if not damaged:
        if recycled:
            later = any_valid_record_after(data, off, seed)
            if later is not None:
                raise CorruptionError(
                    f"{name}: the log ends at offset {off} but a valid record follows at offset {later}"
                )
        elif not fsutil.is_zero(data, off):
            raise CorruptionError(f"{name}: non-zero bytes after the end of the log at offset {off}")
        return SegmentScan(info, txns, zxids, offsets, off, n, None, zxids, offsets)
    # A damaged record. Torn only if it is the last thing in the newest segment.
    if not may_be_torn:
        raise CorruptionError(f"{name}: bad record at offset {off} (checksum, magic or length)")
    later = any_valid_record_after(data, off + 1, seed)
    if later is not None:
        raise CorruptionError(
            f"{name}: bad record at offset {off} followed by a valid record at offset {later}"
        )
    if off + REC_HEADER_SIZE <= n:
        magic, length, *_ = unpack(data, off)
        claimed_end = off + REC_HEADER_SIZE + length
        # (In a recycled file older contents past a torn record are expected, not damage.)
        if magic == REC_MAGIC and claimed_end <= n and not recycled and not fsutil.is_zero(data, claimed_end):
            raise CorruptionError(
                f"{name}: bad record at offset {off} followed by non-zero bytes at offset {claimed_end}"
            )
        if magic == REC_MAGIC and claimed_end > n and info.preallocated:
            raise CorruptionError(
                f"{name}: record at offset {off} runs past the end of the preallocated file ({n} bytes): "
                "the file was cut short"
            )
    elif info.preallocated:
        raise CorruptionError(
            f"{name}: record header at offset {off} cut off by the end of the preallocated file"
        )
    return SegmentScan(info, txns, zxids, offsets, off, n, off, zxids, offsets)


def read_segment(dirpath: str, info: SegmentInfo, *, keep_after: int, may_be_torn: bool) -> SegmentScan:
    data = fsutil.read_file(os.path.join(dirpath, info.name))
    return scan_segment(info, data, keep_after=keep_after, may_be_torn=may_be_torn)
