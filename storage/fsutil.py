"""Small durable-I/O helpers shared by the storage modules.

Every write, sync, rename, unlink and truncate in ``storage`` goes through ``os.<name>`` looked up
at call time, so tests can wrap those functions to inject failures or crashes at each point.
These helpers raise ``OSError`` untouched; ``DiskStore`` turns that into ``StorageError`` and
stops accepting calls.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

TMP_SUFFIX = ".tmp"
_ZERO_CHUNK = bytes(1 << 20)


def fsync_dir(path: str) -> None:
    """Make a directory's entries (creates, renames, unlinks) durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    """Write all of ``data`` at ``offset``; a short write is continued, never silently dropped."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        if n <= 0:
            raise OSError(f"pwrite wrote {n} bytes")
        view = view[n:]
        offset += n


_IOV_MAX = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 16, 1024)


def write_parts(fd: int, parts: list[bytes], size: int, offset: int) -> None:
    """Write the concatenation of ``parts`` (``size`` bytes) at ``offset`` with ONE system call:
    a gathering ``pwritev`` when the parts fit in one, else one ``pwrite`` of them joined.
    A short write is continued (never silently dropped)."""
    if len(parts) <= _IOV_MAX and hasattr(os, "pwritev"):
        n = os.pwritev(fd, parts, offset)
        if n < size:
            pwrite_all(fd, memoryview(b"".join(parts))[n:], offset + n)
    else:
        pwrite_all(fd, b"".join(parts), offset)


def zero_fill(fd: int, start: int, end: int) -> None:
    """Write real zeros over [start, end) so later overwrites need no block allocation.

    (``posix_fallocate`` leaves unwritten extents whose first write costs a metadata commit at
    every fdatasync, which makes small group commits several times slower on ext4.)
    """
    offset = start
    while offset < end:
        n = min(len(_ZERO_CHUNK), end - offset)
        pwrite_all(fd, memoryview(_ZERO_CHUNK)[:n], offset)
        offset += n


def atomic_write(dirpath: str, name: str, chunks: Iterable[bytes | memoryview]) -> None:
    """Replace ``dirpath/name`` with the concatenation of ``chunks``, atomically and durably.

    Temp file, write, fsync, rename over the target, fsync the directory. A crash at any point
    leaves either the old file or the new one (plus perhaps a temp file, reaped at open).
    """
    final = os.path.join(dirpath, name)
    tmp = final + TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        offset = 0
        for chunk in chunks:
            pwrite_all(fd, chunk, offset)
            offset += len(chunk)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)
    fsync_dir(dirpath)


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def is_zero(data: bytes, start: int = 0, end: int | None = None) -> bool:
    """Whether every byte of ``data[start:end]`` is zero (no copy)."""
    stop = len(data) if end is None else min(end, len(data))
    step = len(_ZERO_CHUNK)
    for i in range(start, stop, step):
        n = min(step, stop - i)
        if data[i : i + n] != (_ZERO_CHUNK if n == step else _ZERO_CHUNK[:n]):
            return False
    return True
