"""CRC-32C (Castagnoli): the checksum of every log record, segment header, epoch file and snapshot.

``crc32c(data, crc=0)`` continues ``crc`` over ``data`` (any buffer, memoryviews included), so a
checksum over several pieces needs no concatenation. The ``crc32c`` package computes it with the
CPU's CRC instruction (SSE 4.2, ARMv8), several times faster than ``zlib.crc32``; that matters
because a group commit checksums every record it writes, on the commit path. The same polynomial
protects ext4 metadata, Kafka record batches and iSCSI.
"""

from __future__ import annotations

import logging

import crc32c as _crc32c

log = logging.getLogger(__name__)

crc32c = _crc32c.crc32c

HARDWARE = bool(getattr(_crc32c, "hardware_based", False))
if not HARDWARE:
    log.warning("crc32c: no hardware CRC instruction on this CPU; log writes will be slower")
