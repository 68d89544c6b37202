"""CRC-32C (Castagnoli): the checksum of every log record, segment header, epoch file and snapshot.

``crc32c(data, crc=0)`` continues ``crc`` over ``data`` (any buffer, memoryviews included), so a
checksum over several pieces needs no concatenation. The ``crc32c`` package computes it with the
CPU's CRC instruction (SSE 4.2, ARMv8), several times faster than ``zlib.crc32``; that matters
because a group commit checksums every record it writes, on the commit path. The same polynomial
protects ext4 metadata, Kafka record batches and iSCSI.

Every storage file starts with a 4-byte magic and a u16 format version. Format 1 used zlib's
CRC-32, so its checksums fail here; ``reject_format_1`` recognizes such a file by its old
checksum and says what it is, instead of reporting damage.
"""

from __future__ import annotations

import logging
import struct
import zlib

import crc32c as _crc32c

from zabray.errors import FormatVersionError

log = logging.getLogger(__name__)

crc32c = _crc32c.crc32c

HARDWARE = bool(getattr(_crc32c, "hardware_based", False))
if not HARDWARE:
    log.warning("crc32c: no hardware CRC instruction on this CPU; log writes will be slower")


def reject_format_1(name: str, data: bytes, magic: bytes, covered: bytes | memoryview, stored: int) -> None:
    """Raise ``FormatVersionError`` when ``data`` is a ``magic`` file of format version 1:
    its version field says 1 and ``stored`` is the zlib CRC-32 of ``covered`` (so it is not damage)."""
    if data[:4] == magic and len(data) >= 6 and struct.unpack_from("<H", data, 4)[0] == 1:
        if zlib.crc32(covered) == stored:
            raise FormatVersionError(
                f"{name}: written in storage format version 1 by an older zabray; this one reads "
                "version 2 only. Move the data directory aside (or recreate the ensemble)."
            )
