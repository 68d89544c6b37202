"""Log records of segment format versions 2 and 3, read and cut but no longer written.

Format 4 (``storage.records``) checksums a group commit once; these formats checksummed every
record, which cost more CPU per record than the disk took to write it. Data directories written
by older zabray are still read, truncated and recovered with these functions; appends always go
to a new format-4 segment.

Record (36-byte header, then the value)::

    magic u32 | value length u32 | zxid u64 | origin i64 | request_id i64 | crc32c u32 | value

The record's crc32c covers its first 32 header bytes and the value, starting from its segment's
``seed`` (a random salt in the segment header; 0 in format-2 segments). A segment file recycled
from an old one still holds the old records past its end: under the new seed they fail their
checksums, so they can never be taken for records of the new segment. A record header is never
all zeros (the magic is not zero), so the first all-zero header marks the end of a segment's data.
"""

from __future__ import annotations

import struct

from storage.checksum import crc32c
from zabray.errors import CorruptionError

U32 = struct.Struct("<I")

REC_MAGIC = 0x3152425A  # b"ZBR1" little-endian
REC_MAGIC_BYTES = U32.pack(REC_MAGIC)
REC_HEAD = struct.Struct("<IIQqq")
REC_FULL = struct.Struct("<IIQqqI")
REC_HEADER_SIZE = REC_HEAD.size + U32.size  # 36
ZERO_HEADER = bytes(REC_HEADER_SIZE)


def first_after(data: bytes, zxid: int, seed: int = 0) -> tuple[int, int | None]:
    """In a run of whole records, the offset of the first with zxid > ``zxid`` (len(data) if none)
    and the zxid of the last one <= it (None if none). Checksums are verified on the way."""
    off = 0
    last = None
    mv = memoryview(data)
    while off < len(data):
        magic, length, z, _o, _r = REC_HEAD.unpack_from(data, off)
        end = off + REC_HEADER_SIZE + length
        (crc,) = U32.unpack_from(data, off + REC_HEAD.size)
        if (
            magic != REC_MAGIC
            or end > len(data)
            or crc32c(mv[off + REC_HEADER_SIZE : end], crc32c(mv[off : off + REC_HEAD.size], seed)) != crc
        ):
            raise CorruptionError(f"bad record at offset {off} of a region written by this process")
        if z > zxid:
            break
        last = z
        off = end
    return off, last


def valid_record_at(data: bytes, off: int, seed: int = 0) -> bool:
    n = len(data)
    if off + REC_HEADER_SIZE > n:
        return False
    magic, length, _z, _o, _r = REC_HEAD.unpack_from(data, off)
    end = off + REC_HEADER_SIZE + length
    if magic != REC_MAGIC or end > n:
        return False
    (crc,) = U32.unpack_from(data, off + REC_HEAD.size)
    mv = memoryview(data)
    return bool(crc32c(mv[off + REC_HEADER_SIZE : end], crc32c(mv[off : off + REC_HEAD.size], seed)) == crc)


def any_valid_record_after(data: bytes, start: int, seed: int = 0) -> int | None:
    """Offset of any record at or after ``start`` valid under ``seed``, else None."""
    pos = data.find(REC_MAGIC_BYTES, start)
    while pos != -1:
        if valid_record_at(data, pos, seed):
            return pos
        pos = data.find(REC_MAGIC_BYTES, pos + 1)
    return None
