"""Recycled log segments: a segment purged after a snapshot becomes the file of a later one.

The file keeps its older frames past the new segment's end. These tests pin down that they
can never be read back as part of the log, that the end is still found after a clean close, a
crash or a torn write, and that damage inside a recycled segment is still refused.
"""

from __future__ import annotations

import logging
import os
import struct

import pytest
from frames import encode_groups, encode_v3_records, group_spans
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import DiskStore, txnlog
from storage.checksum import crc32c
from storage.records import GROUP_HEADER_SIZE, ZERO_FRAME
from storage.segments import (
    SEG_HEADER_SIZE,
    SegmentInfo,
    decode_segment_header,
    encode_segment_header,
    parse_segment_name,
    scan_segment,
)
from zabray.errors import CorruptionError
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid

SEG = 4096
VALUE = 200


@pytest.fixture(autouse=True)
def no_background_fill(monkeypatch):  # type: ignore[no-untyped-def]
    # Only recycled files serve as spares here, so every rollover either recycles or makes its
    # own file in line, the same way on every run.
    monkeypatch.setattr(txnlog, "BACKGROUND_PREALLOCATION", False)


def txn(i: int) -> Txn:
    # Sizes vary, so a recycled segment's records end where its older ones did not.
    return Txn(Zxid.of(1, i), bytes([i % 251]) * (VALUE + i % 7 * 13), i % 3, i)


def segments(path: str) -> list[tuple[str, SegmentInfo]]:
    out = []
    for name in sorted(os.listdir(path)):
        p = parse_segment_name(name)
        if p is not None:
            with open(os.path.join(path, name), "rb") as f:
                out.append((name, decode_segment_header(name, f.read(SEG_HEADER_SIZE), *p)))
    return out


def fill(path: str, upto: int, *, start: int = 1, snapshot_every: int = 10, keep: int = 1) -> None:
    """Append txns start..upto in groups of 3, snapshotting (and so purging) as a replica does."""
    with DiskStore(path, segment_bytes=SEG, keep_snapshots=keep) as s:
        s.recover()
        for i in range(start, upto + 1, 3):
            s.append([txn(j) for j in range(i, min(i + 3, upto + 1))])
            s.sync()
            if i % snapshot_every == 1 and i > 1:
                s.save_snapshot(Zxid.of(1, i), b"state")


def group_starts(data: bytes) -> list[int]:
    """Offsets of the groups before the first zero frame header, and that header's offset."""
    spans = group_spans(data)
    end = spans[-1][1] if spans else SEG_HEADER_SIZE
    assert data[end : end + GROUP_HEADER_SIZE] == ZERO_FRAME[: len(data) - end]  # or the file ends
    return [a for a, _, _ in spans] + [end]


def end_of_log(data: bytes) -> int:
    return group_starts(data)[-1]


def test_purged_segments_are_recycled_and_their_old_records_never_come_back(tmp_path):
    d = str(tmp_path / "s")
    fill(d, 200, keep=2)
    older = [(n, i) for n, i in segments(d)[:-1] if i.recycled]
    assert len(older) >= 2, segments(d)
    # In recycled segments that are not the newest, older records are still there past the end.
    stale = 0
    for name, _ in older:
        data = open(os.path.join(d, name), "rb").read()
        end = end_of_log(data)
        assert len(data) == SEG
        stale += any(data[end + GROUP_HEADER_SIZE :])  # (nothing past the end of a full one)
    assert stale, "no older records past any end: nothing tested"
    with DiskStore(d, segment_bytes=SEG, keep_snapshots=2) as s:
        st = s.recover()
    assert [t.zxid for t in st.txns] == [Zxid.of(1, i) for i in range(st.snapshot_zxid.counter + 1, 201)]
    assert list(st.txns) == [txn(i) for i in range(st.snapshot_zxid.counter + 1, 201)]


def test_appends_after_reopen_continue_a_recycled_segment(tmp_path):
    d = str(tmp_path / "s")
    fill(d, 120)
    last_name, last = segments(d)[-1]
    assert last.recycled
    with DiskStore(d, segment_bytes=SEG, keep_snapshots=1) as s:
        s.recover()
        s.append([txn(121)])
        s.sync()
    assert segments(d)[-1][0] == last_name  # the same segment, written on after the reopen
    with DiskStore(d, segment_bytes=SEG, keep_snapshots=1) as s:
        assert s.recover().txns[-1] == txn(121)


def test_a_fresh_recycled_segment_reads_as_empty(tmp_path, monkeypatch, caplog):
    """Stop right after the rollover made the recycled segment (its header is durable, no record
    is): the file's first record slot holds an older record, which must not be read."""
    d = str(tmp_path / "s")
    fill(d, 60)
    real_roll = txnlog.TxnLog._roll

    class Stop(Exception):
        pass

    def roll_then_stop(log: txnlog.TxnLog, nbytes: int) -> txnlog._Active:
        act = real_roll(log, nbytes)
        if act.info.recycled:
            raise Stop
        return act

    monkeypatch.setattr(txnlog.TxnLog, "_roll", roll_then_stop)
    with pytest.raises(Stop):
        fill(d, 200, start=61)
    monkeypatch.setattr(txnlog.TxnLog, "_roll", real_roll)
    newest_name, newest = segments(d)[-1]
    assert newest.recycled
    with caplog.at_level(logging.WARNING), DiskStore(d, segment_bytes=SEG, keep_snapshots=1) as s:
        st = s.recover()
    assert st.txns[-1].zxid == newest.prev  # nothing from the new, empty segment
    assert "torn" not in caplog.text  # its end is marked, not found by a failed checksum


def _recycled_image(n_old: int, n_new: int) -> tuple[SegmentInfo, bytes, list[Txn]]:
    """A recycled segment: ``n_new`` records in groups of two under seed 7, its end, then the
    file's older groups (seed 5) as a rollover leaves them."""
    olds = [txn(i) for i in range(1, n_old + 1)]
    old = encode_segment_header(0, 0, 0, True, 5) + encode_groups([olds[i : i + 2] for i in range(0, n_old, 2)], 5)
    old += bytes(SEG - len(old))
    new = [txn(i) for i in range(1000, 1000 + n_new)]
    groups = encode_groups([new[i : i + 2] for i in range(0, n_new, 2)], 7)
    head = encode_segment_header(0, 3, 0, True, 7, recycled=True) + groups + ZERO_FRAME
    info = SegmentInfo(0, 3, Zxid(0), "log.00000000.00000003", True, 7, True)
    return info, head + old[len(head) :], new


def test_damage_in_a_recycled_segment_is_refused(tmp_path):
    info, img, new = _recycled_image(14, 6)
    assert scan_segment(info, img, keep_after=0, may_be_torn=False).txns == new
    # A zeroed group header mid-log: the groups after it are valid under the seed.
    starts = group_starts(img)
    second, last = starts[1], starts[-2]
    cut = bytearray(img)
    cut[second : second + GROUP_HEADER_SIZE] = ZERO_FRAME
    with pytest.raises(CorruptionError, match="valid frame follows"):
        scan_segment(info, bytes(cut), keep_after=0, may_be_torn=True)
    # A flipped bit mid-log.
    flip = bytearray(img)
    flip[second + 40] ^= 1
    with pytest.raises(CorruptionError, match="followed by a valid frame"):
        scan_segment(info, bytes(flip), keep_after=0, may_be_torn=True)
    # A torn last group in the newest segment is cut whole; elsewhere it is damage.
    torn = bytearray(img)
    torn[last + GROUP_HEADER_SIZE + 40] ^= 0xFF
    res = scan_segment(info, bytes(torn), keep_after=0, may_be_torn=True)
    assert res.txns == new[:-2] and res.torn == last
    with pytest.raises(CorruptionError):
        scan_segment(info, bytes(torn), keep_after=0, may_be_torn=False)


def test_the_same_file_without_its_recycled_flag_is_refused():
    """The flag is what allows older bytes past the end: without it they are damage."""
    info, img, _ = _recycled_image(14, 6)
    plain = SegmentInfo(info.generation, info.seq, info.prev, info.name, True, info.seed, False)
    with pytest.raises(CorruptionError, match="non-zero bytes after the end"):
        scan_segment(plain, img, keep_after=0, may_be_torn=True)


def test_format_2_segments_are_still_read_and_followed_by_format_4_ones(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    records = encode_v3_records([txn(1), txn(2)])  # format 2: a checksum per record, from 0
    body = struct.pack("<4sHHIIQ", b"ZBLG", 2, 1, 0, 0, 0)
    header = body + struct.pack("<I", crc32c(body)) + bytes(4)
    img = header + records
    (d / "log.00000000.00000000").write_bytes(img + bytes(SEG - len(img)))
    with DiskStore(d, segment_bytes=SEG) as s:
        assert list(s.recover().txns) == [txn(1), txn(2)]
        s.append([txn(3)])
        s.sync()
    with DiskStore(d, segment_bytes=SEG) as s:
        assert list(s.recover().txns) == [txn(1), txn(2), txn(3)]
    # Appends never mix formats in one file: they went to a new segment of the current format.
    assert [(n, i.version) for n, i in segments(str(d))] == [
        ("log.00000000.00000000", 2),
        ("log.00000000.00000001", 4),
    ]


_INFO, _IMG, _NEW = _recycled_image(14, 6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, SEG - 1), st.integers(1, 255), st.booleans())
def test_fuzz_damage_to_a_recycled_segment_never_reads_wrong_data(offset, xor, torn_ok):
    img = bytearray(_IMG)
    img[offset] ^= xor
    try:
        res = scan_segment(_INFO, bytes(img), keep_after=0, may_be_torn=torn_ok)
    except CorruptionError:
        return
    assert res.txns == _NEW[: len(res.txns)]
    if len(res.txns) < len(_NEW):
        assert torn_ok and offset >= group_starts(_IMG)[-2]
