"""Files from the older storage format (version 1, zlib CRC-32) are refused by name, not reported
as damage: ``FormatVersionError``, and nothing in the directory is set aside or repaired."""

from __future__ import annotations

import os
import struct
import zlib

import pytest

from storage import DiskStore, epochs, snapshots, txnlog
from storage.segments import SEG_HEADER_SIZE, decode_segment_header
from zabray.errors import CorruptionError, FormatVersionError
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid

_VERSION_AT = 4  # every storage file: 4-byte magic, then a u16 format version


def _as_format_1(path: str) -> None:
    """Rewrite one of today's files the way format 1 wrote it: version 1, zlib CRC-32."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    struct.pack_into("<H", data, _VERSION_AT, 1)
    name = os.path.basename(path)
    if name in (epochs.ACCEPTED_EPOCH, epochs.CURRENT_EPOCH):
        struct.pack_into("<I", data, 24, zlib.crc32(data[:24]))
    elif name.startswith("log."):
        struct.pack_into("<I", data, 24, zlib.crc32(data[:24]))
    elif name.startswith("snap."):
        struct.pack_into("<I", data, len(data) - 8, zlib.crc32(data[:-8]))
    else:
        raise AssertionError(name)
    with open(path, "wb") as f:
        f.write(data)


def _store(path: str) -> list[str]:
    """A store with both epochs, a snapshot and log segments; returns its data files."""
    with DiskStore(path, segment_bytes=1024) as s:
        s.write_accepted_epoch(2, 1)
        s.write_current_epoch(2)
        s.append([Txn(Zxid.of(2, i), b"v" * 100) for i in range(1, 30)])
        s.sync()
        s.save_snapshot(Zxid.of(2, 10), b"state")
        s.append([Txn(Zxid.of(2, 30), b"w")])
        s.sync()
    return sorted(n for n in os.listdir(path) if n != "LOCK" and not txnlog.is_spare(n))


def _snapshot_file(path: str) -> snapshots.SnapshotFile:
    (snap,) = [snapshots.parse_name(n) for n in os.listdir(path) if n.startswith("snap.")]
    assert snap is not None
    return snap


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_each_format_1_file_is_named_as_such(tmp_path):
    d = str(tmp_path / "s")
    names = _store(d)
    for name in names:
        _as_format_1(os.path.join(d, name))
    with pytest.raises(FormatVersionError, match="format version 1"):
        epochs.read(d, epochs.CURRENT_EPOCH)
    with pytest.raises(FormatVersionError, match="format version 1"):
        snapshots.read(d, _snapshot_file(d))
    seg = next(n for n in names if n.startswith("log."))
    with pytest.raises(FormatVersionError, match="format version 1"):
        decode_segment_header(seg, _read(os.path.join(d, seg))[:SEG_HEADER_SIZE], 0, int(seg[-8:], 16))


@pytest.mark.parametrize("which", ["epochs", "snapshot", "segments", "all"])
def test_opening_a_format_1_directory_refuses_and_changes_nothing(tmp_path, which):
    d = str(tmp_path / "s")
    names = _store(d)
    picked = {
        "epochs": [epochs.ACCEPTED_EPOCH, epochs.CURRENT_EPOCH],
        "snapshot": [n for n in names if n.startswith("snap.")],
        "segments": [n for n in names if n.startswith("log.")],
        "all": names,
    }[which]
    for name in picked:
        _as_format_1(os.path.join(d, name))
    before = {n: _read(os.path.join(d, n)) for n in names}
    with pytest.raises(FormatVersionError, match="older zabray"):
        DiskStore(d)
    # Not treated as damage: no snapshot quarantined, no tail cut, nothing rewritten.
    after = sorted(n for n in os.listdir(d) if n != "LOCK")
    assert after == names
    assert {n: _read(os.path.join(d, n)) for n in names} == before


def test_a_damaged_version_field_is_still_plain_corruption(tmp_path):
    """Version 1 without format 1's checksum is damage, not an old file."""
    d = str(tmp_path / "s")
    _store(d)
    path = os.path.join(d, epochs.CURRENT_EPOCH)
    data = bytearray(_read(path))
    struct.pack_into("<H", data, _VERSION_AT, 1)
    with open(path, "wb") as f:
        f.write(data)
    with pytest.raises(CorruptionError) as info:
        DiskStore(d)
    assert not isinstance(info.value, FormatVersionError)
    assert "checksum mismatch" in str(info.value)
