"""Snapshot files: ``snap.<generation:08x>.<zxid:016x>``.

Layout:

    header  magic "ZBSN" | version u16 | flags u16 | generation u32 | zxid u64 | length u64
    payload ``length`` bytes of application state
    trailer crc32c u32 (running checksum of header and payload) | magic "ZBSE"

A snapshot is written to a temp file with its checksum computed as it goes, fsynced, renamed
into place and the directory fsynced; so a snapshot file, once visible under its final name, is
complete. Any damage found later is corruption (see ``storage.recovery`` for the fallback rule).
The generation and zxid in the header must match the file name.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from storage import fsutil
from storage.checksum import crc32c, reject_format_1
from zabray.errors import CorruptionError
from zabray.protocol.zxid import Zxid, fmt

log = logging.getLogger(__name__)

_MAGIC = b"ZBSN"
_END = b"ZBSE"
_VERSION = 2
_HEADER = struct.Struct("<4sHHIQQ")
_TRAILER = struct.Struct("<I4s")
_CHUNK = 1 << 20
_NAME = re.compile(r"^snap\.([0-9a-f]{8})\.([0-9a-f]{16})$")


@dataclass(frozen=True, slots=True, order=True)
class SnapshotFile:
    """A snapshot file found by name (its content is not yet verified)."""

    generation: int
    zxid: Zxid
    name: str


def file_name(generation: int, zxid: int) -> str:
    return f"snap.{generation:08x}.{zxid:016x}"


def parse_name(name: str) -> SnapshotFile | None:
    m = _NAME.match(name)
    if m is None:
        return None
    return SnapshotFile(int(m.group(1), 16), Zxid(int(m.group(2), 16)), name)


def write(dirpath: str, generation: int, zxid: Zxid, state: Sequence[bytes]) -> SnapshotFile:
    """Atomically and durably write a snapshot whose state is the concatenation of ``state``'s
    parts (never joined: a tree's is hundreds of megabytes); returns its file."""
    name = file_name(generation, zxid)
    size = sum(len(p) for p in state)
    header = _HEADER.pack(_MAGIC, _VERSION, 0, generation, zxid, size)

    def chunks() -> Iterator[bytes | memoryview]:
        crc = crc32c(header)
        yield header
        for p in state:
            view = memoryview(p)
            for i in range(0, len(view), _CHUNK):
                part = view[i : i + _CHUNK]
                crc = crc32c(part, crc)
                yield part
        yield _TRAILER.pack(crc, _END)

    fsutil.atomic_write(dirpath, name, chunks())
    log.debug("snapshot %s written (%d bytes)", name, size)
    return SnapshotFile(generation, zxid, name)


def decode(snap: SnapshotFile, data: bytes) -> bytes:
    """Verify a snapshot file's bytes and return the state; ``CorruptionError`` says where it failed."""
    where = snap.name
    if len(data) < _HEADER.size + _TRAILER.size:
        raise CorruptionError(f"{where}: only {len(data)} bytes at offset 0, shorter than header and trailer")
    magic, version, _flags, generation, zxid, length = _HEADER.unpack_from(data)
    end = _HEADER.size + length
    if magic == _MAGIC and version != _VERSION and end + _TRAILER.size == len(data):
        reject_format_1(where, data, _MAGIC, memoryview(data)[:end], _TRAILER.unpack_from(data, end)[0])
    if magic != _MAGIC or version != _VERSION:
        raise CorruptionError(f"{where}: bad magic/version at offset 0")
    if end + _TRAILER.size != len(data):
        raise CorruptionError(
            f"{where}: header says {length} state bytes but file has {len(data)} bytes (offset 20)"
        )
    crc, end_magic = _TRAILER.unpack_from(data, end)
    if crc32c(memoryview(data)[:end]) != crc or end_magic != _END:
        raise CorruptionError(f"{where}: checksum mismatch over offsets 0..{end}")
    if generation != snap.generation or zxid != snap.zxid:
        raise CorruptionError(
            f"{where}: header names generation {generation} zxid {fmt(zxid)}, not what the file name says"
        )
    return data[_HEADER.size : end]


def read(dirpath: str, snap: SnapshotFile) -> bytes:
    """Read and verify one snapshot; ``CorruptionError`` on any damage (a missing file included)."""
    try:
        data = fsutil.read_file(os.path.join(dirpath, snap.name))
    except FileNotFoundError as e:
        raise CorruptionError(f"{snap.name}: vanished while reading") from e
    return decode(snap, data)
