"""The configuration file: the ensemble configuration this replica last put in force.

One record, replaced atomically like the epoch files (temp file, fsync, rename, fsync directory)::

    magic "ZBCF" | version u16 | flags u16 | config version u64 | text length u32 | text | crc32c u32

``text`` is the configuration's member lines (UTF-8, ``Membership.body``); flags bit 0 says the
replica had *left*: the configuration does not include it, though the one before did. A missing
file means "never written": the static configuration the replica is started with is in force.
A file that exists but is not one valid record is corruption.
"""

from __future__ import annotations

import os
import struct

from storage import fsutil
from storage.checksum import crc32c
from zabray.errors import CodecError, CorruptionError
from zabray.protocol.membership import Membership

NAME = "config"
_MAGIC = b"ZBCF"
_VERSION = 1
_HEAD = struct.Struct("<4sHHQI")
_CRC = struct.Struct("<I")
_LEFT = 1


def encode(config: Membership, left: bool) -> bytes:
    text = config.body().encode()
    body = _HEAD.pack(_MAGIC, _VERSION, _LEFT if left else 0, config.version, len(text)) + text
    return body + _CRC.pack(crc32c(body))


def decode(data: bytes) -> tuple[Membership, bool]:
    """(configuration, left); ``CorruptionError`` naming the offset otherwise."""
    if len(data) < _HEAD.size + _CRC.size:
        raise CorruptionError(f"{NAME}: {len(data)} bytes at offset 0, too short for a configuration record")
    magic, version, flags, cversion, n = _HEAD.unpack_from(data)
    if magic != _MAGIC or version != _VERSION:
        raise CorruptionError(f"{NAME}: bad magic/version at offset 0")
    end = _HEAD.size + n
    if end + _CRC.size != len(data):
        raise CorruptionError(f"{NAME}: text length {n} at offset 16 does not match the file's {len(data)} bytes")
    (crc,) = _CRC.unpack_from(data, end)
    if crc32c(data[:end]) != crc:
        raise CorruptionError(f"{NAME}: checksum mismatch at offset {end}")
    try:
        config = Membership.parse(data[_HEAD.size : end].decode(), cversion)
    except (CodecError, UnicodeDecodeError) as e:
        raise CorruptionError(f"{NAME}: the configuration at offset {_HEAD.size} does not parse: {e}") from None
    return config, bool(flags & _LEFT)


def read(dirpath: str) -> tuple[Membership | None, bool]:
    try:
        data = fsutil.read_file(os.path.join(dirpath, NAME))
    except FileNotFoundError:
        return None, False
    return decode(data)


def write(dirpath: str, config: Membership, left: bool) -> None:
    fsutil.atomic_write(dirpath, NAME, [encode(config, left)])
