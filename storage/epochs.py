"""The two epoch files: acceptedEpoch (epoch and the leader it was accepted from) and currentEpoch.

Each is one fixed-size record replaced atomically (temp file, fsync, rename, fsync directory):

    magic "ZBEP" | version u16 | kind u16 | epoch i64 | leader i64 | crc32c u32 (of the 24 bytes before)

A missing file means "never written" (epoch 0, leader -1). A file that exists but is not exactly
one valid record is corruption: epochs are never torn, because they are only ever renamed into place.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass

from storage import fsutil
from storage.checksum import crc32c, reject_format_1
from zabray.errors import ConfigError, CorruptionError

log = logging.getLogger(__name__)

ACCEPTED_EPOCH = "acceptedEpoch"
CURRENT_EPOCH = "currentEpoch"

_MAGIC = b"ZBEP"
_VERSION = 2
_KIND = {ACCEPTED_EPOCH: 1, CURRENT_EPOCH: 2}
_BODY = struct.Struct("<4sHHqq")
_CRC = struct.Struct("<I")
SIZE = _BODY.size + _CRC.size
MAX_EPOCH = (1 << 32) - 1


@dataclass(frozen=True, slots=True)
class EpochRecord:
    """One epoch file's content; ``leader`` is -1 for currentEpoch and for "no leader yet"."""

    epoch: int = 0
    leader: int = -1


def encode(name: str, rec: EpochRecord) -> bytes:
    body = _BODY.pack(_MAGIC, _VERSION, _KIND[name], rec.epoch, rec.leader)
    return body + _CRC.pack(crc32c(body))


def decode(name: str, data: bytes) -> EpochRecord:
    """Parse an epoch file's bytes; raises ``CorruptionError`` naming the file and offset."""
    if len(data) != SIZE:
        raise CorruptionError(f"{name}: {len(data)} bytes at offset 0, expected {SIZE}")
    (crc,) = _CRC.unpack_from(data, _BODY.size)
    if crc32c(data[: _BODY.size]) != crc:
        reject_format_1(name, data, _MAGIC, data[: _BODY.size], crc)
        raise CorruptionError(f"{name}: checksum mismatch at offset 0")
    magic, version, kind, epoch, leader = _BODY.unpack_from(data)
    if magic != _MAGIC or version != _VERSION or kind != _KIND[name]:
        raise CorruptionError(f"{name}: bad magic/version/kind at offset 0")
    if not 0 <= epoch <= MAX_EPOCH:
        raise CorruptionError(f"{name}: epoch {epoch} out of range at offset 8")
    return EpochRecord(epoch, leader)


def read(dirpath: str, name: str) -> EpochRecord:
    path = os.path.join(dirpath, name)
    try:
        data = fsutil.read_file(path)
    except FileNotFoundError:
        return EpochRecord()
    return decode(name, data)


def validate(epoch: int, leader: int = -1) -> None:
    """Reject values the file cannot hold, before any I/O (a caller error, not a storage failure)."""
    if not isinstance(epoch, int) or not 0 <= epoch <= MAX_EPOCH:
        raise ConfigError(f"epoch must be an int in [0, {MAX_EPOCH}], got {epoch!r}")
    if not isinstance(leader, int) or not -1 <= leader < 1 << 63:
        raise ConfigError(f"leader must be an int >= -1, got {leader!r}")


def write(dirpath: str, name: str, rec: EpochRecord) -> None:
    """Atomically and durably replace the epoch file ``name``."""
    fsutil.atomic_write(dirpath, name, [encode(name, rec)])
    log.debug("%s: wrote %s", name, rec)
