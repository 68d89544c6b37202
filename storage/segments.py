"""A log segment's name, header and records as read back: the on-disk format the writer
(``storage.txnlog``) produces and recovery (``storage.recovery``) scans.

Segment file ``log.<generation:08x>.<seq:08x>``::

    header (32 bytes)  magic "ZBLG" | version u16 | flags u16 | generation u32 | seq u32 | prev zxid u64
                       | seed u32 | crc32c u32 of the 28 bytes before
                       (flags bit 0: preallocated, so the file is never shorter than its records;
                        bit 1: recycled, so bytes past the end may be an older segment's records)
    records            back to back from offset 32, checksummed from the seed (``storage.records``)
    zeros              up to the preallocated size; in a recycled file, one all-zero record
                       header after the last record, then whatever the file held before

Format version 2 (read, never written) had no seed (its records are checksummed from 0), and
4 zero bytes after the header's checksum.

Records follow each other from offset 32; the first all-zero record header marks the end of a
segment's data.
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
    REC_HEAD,
    REC_HEADER_SIZE,
    REC_MAGIC,
    U32,
    ZERO_HEADER,
    any_valid_record_after,
)
from zabray.errors import CorruptionError
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid, fmt

SEG_MAGIC = b"ZBLG"
SEG_VERSION = 3
_SEG_BODY = struct.Struct("<4sHHIIQI")  # version 3: the seed is part of the checksummed body
_SEG_BODY_V2 = struct.Struct("<4sHHIIQ")
SEG_HEADER_SIZE = 32
FLAG_PREALLOCATED = 1
FLAG_RECYCLED = 2

_NAME = re.compile(r"^log\.([0-9a-f]{8})\.([0-9a-f]{8})$")


# -- names and headers ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A segment of the current log: its sequence number, its ``prev`` zxid and file name, and
    the ``seed`` its records' checksums start from."""

    generation: int
    seq: int
    prev: Zxid
    name: str
    preallocated: bool = False
    seed: int = 0
    recycled: bool = False


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
    """Verify a segment header (format 3, or format 2) against its file name; ``CorruptionError``
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
    if magic != SEG_MAGIC or version not in (2, SEG_VERSION) or flags & ~known:
        raise CorruptionError(f"{name}: bad segment magic/version/flags at offset 0")
    if (gen, sq) != (generation, seq):
        raise CorruptionError(f"{name}: header names generation {gen} seq {sq}, not its file name")
    return SegmentInfo(
        generation, seq, Zxid(prev), name, bool(flags & FLAG_PREALLOCATED), seed, bool(flags & FLAG_RECYCLED)
    )


def read_segment_header(dirpath: str, name: str, generation: int, seq: int) -> SegmentInfo:
    with open(os.path.join(dirpath, name), "rb") as f:
        return decode_segment_header(name, f.read(SEG_HEADER_SIZE), generation, seq)


@dataclass(frozen=True, slots=True)
class SegmentScan:
    """What reading one segment found.

    ``txns`` holds the records with zxid > the ``keep_after`` asked for; ``zxids``/``offsets``
    index every valid record; ``end`` is the offset just past the last valid record; ``torn`` is
    the offset of a torn last record that must be cut off (None when the segment is clean).
    """

    info: SegmentInfo
    txns: list[Txn]
    zxids: array[int]
    offsets: array[int]
    end: int
    size: int
    torn: int | None

    @property
    def tail(self) -> Zxid:
        return Zxid(self.zxids[-1]) if self.zxids else self.info.prev


def scan_segment(info: SegmentInfo, data: bytes, *, keep_after: int, may_be_torn: bool) -> SegmentScan:
    """Read and verify every record of one segment (``data`` is the whole file).

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
        return SegmentScan(info, txns, zxids, offsets, off, n, None)
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
    return SegmentScan(info, txns, zxids, offsets, off, n, off)


def read_segment(dirpath: str, info: SegmentInfo, *, keep_after: int, may_be_torn: bool) -> SegmentScan:
    data = fsutil.read_file(os.path.join(dirpath, info.name))
    return scan_segment(info, data, keep_after=keep_after, may_be_torn=may_be_torn)
