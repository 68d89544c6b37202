"""Truncating inside a durable group commit: the group stays whole on disk and a cut frame
after it says how much of it is still the log. Records the cut keeps were acknowledged, so no
crash during the truncation may lose them; the records it drops may come back only as the
whole group, the state before the truncation began."""

from __future__ import annotations

import logging
import os

import pytest
from frames import group_spans

from storage import DiskStore, records
from storage.records import CUT_MAGIC_BYTES, CUT_SIZE, cut_frame
from storage.segments import SegmentInfo, decode_segment_header, scan_segment
from zabray.errors import CorruptionError
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid

SEG = 64 << 10


def txns(first: int, n: int, size: int = 100) -> list[Txn]:
    return [Txn(Zxid.of(1, i), bytes([i]) * size, 1, i) for i in range(first, first + n)]


def zxids(d: str, seg: int = SEG) -> list[int]:
    with DiskStore(d, segment_bytes=seg) as s:
        return [t.zxid.counter for t in s.recover().txns]


def only_segment(d: str) -> tuple[str, bytes]:
    (name,) = [n for n in os.listdir(d) if n.startswith("log.")]
    return name, open(os.path.join(d, name), "rb").read()


def test_a_cut_inside_a_group_keeps_the_group_and_appends_a_cut_frame(tmp_path):
    d = str(tmp_path / "s")
    with DiskStore(d, segment_bytes=SEG) as s:
        s.append(txns(1, 6))
        s.sync()
        s.truncate(Zxid.of(1, 4))
        s.sync()
        assert [t.zxid.counter for t in s.recover().txns] == [1, 2, 3, 4]
    _, data = only_segment(d)
    (start, end, group) = group_spans(data)[0]
    assert group == [Zxid.of(1, i) for i in range(1, 7)]  # durable frames are never rewritten
    assert data[end : end + 4] == CUT_MAGIC_BYTES
    assert zxids(d) == [1, 2, 3, 4]
    with DiskStore(d, segment_bytes=SEG) as s:  # appends go on after the cut frame
        s.recover()
        s.append(txns(5, 2, 7))
        s.sync()
    assert zxids(d) == [1, 2, 3, 4, 5, 6]


def test_cuts_of_one_group_stack(tmp_path):
    d = str(tmp_path / "s")
    with DiskStore(d, segment_bytes=SEG) as s:
        s.append(txns(1, 8))
        s.sync()
        s.truncate(Zxid.of(1, 6))
        s.sync()
    assert zxids(d) == [1, 2, 3, 4, 5, 6]
    with DiskStore(d, segment_bytes=SEG) as s:
        s.recover()
        s.truncate(Zxid.of(1, 2))
        s.sync()
        s.truncate(Zxid.of(1, 1))
        s.sync()
    assert zxids(d) == [1]
    with DiskStore(d, segment_bytes=SEG) as s:  # a cut before the group's first record drops it
        s.recover()
        s.truncate(Zxid(0))
        s.sync()
    assert zxids(d) == []


def test_a_torn_cut_frame_leaves_the_whole_group(tmp_path, caplog):
    """A crash while the cut frame was being written: the truncation never happened."""
    d = str(tmp_path / "s")
    with DiskStore(d, segment_bytes=SEG) as s:
        s.append(txns(1, 5))
        s.sync()
        s.truncate(Zxid.of(1, 2))
        s.sync()
    name, data = only_segment(d)
    end = group_spans(data)[0][1]
    torn = bytearray(data)
    torn[end + 8 : end + CUT_SIZE] = bytes(CUT_SIZE - 8)  # only its first 8 bytes reached the disk
    open(os.path.join(d, name), "wb").write(torn)
    with caplog.at_level(logging.WARNING):
        assert zxids(d) == [1, 2, 3, 4, 5]
    assert "torn" in caplog.text


def test_a_cut_frame_that_cuts_nothing_is_corruption(tmp_path):
    d = str(tmp_path / "s")
    with DiskStore(d, segment_bytes=SEG) as s:
        s.append(txns(1, 3))
        s.sync()
    name, data = only_segment(d)
    info = decode_segment_header(name, data, 0, 0)
    end = group_spans(data)[0][1]
    for keep, z in [(3, Zxid.of(1, 3)), (0, Zxid(0)), (2, Zxid.of(1, 3))]:
        img = bytearray(data)
        img[end : end + CUT_SIZE] = cut_frame(keep, z, info.seed)
        with pytest.raises(CorruptionError, match=rf"cut frame at offset {end}"):
            scan_segment(info, bytes(img), keep_after=0, may_be_torn=True)


def test_a_cut_in_a_full_preallocated_segment_extends_the_file_by_the_frame(tmp_path):
    d = str(tmp_path / "s")
    seg = 4096
    with DiskStore(d, segment_bytes=seg) as s:
        # One group that fills the segment to within a few bytes of its end.
        value = seg - 32 - 16 - 2 * 28 - 1 - 8
        s.append([Txn(Zxid.of(1, 1), b"a"), Txn(Zxid.of(1, 2), b"b" * value)])
        s.sync()
        name, data = only_segment(d)
        assert len(data) == seg and group_spans(data)[0][1] + CUT_SIZE > seg
        s.truncate(Zxid.of(1, 1))
        s.sync()
    name, data = only_segment(d)
    assert len(data) > seg
    info = decode_segment_header(name, data, 0, 0)
    assert isinstance(info, SegmentInfo) and info.preallocated
    assert zxids(d, seg) == [1]
    with DiskStore(d, segment_bytes=seg) as s:  # the next group goes to a new segment
        s.recover()
        s.append([Txn(Zxid.of(1, 2), b"c")])
        s.sync()
    assert zxids(d, seg) == [1, 2]


def test_a_sync_larger_than_a_group_writes_several_and_each_can_be_cut(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "MAX_GROUP_BODY", 400)  # about three 100-byte records a group
    d = str(tmp_path / "s")
    with DiskStore(d, segment_bytes=SEG) as s:
        s.append(txns(1, 10))
        s.sync()
        _, data = only_segment(d)
        spans = group_spans(data)
        assert len(spans) > 2 and [z for _, _, zs in spans for z in zs] == [Zxid.of(1, i) for i in range(1, 11)]
        inside = spans[1][2][1]  # the second record of the second group
        s.truncate(Zxid(inside))
        s.sync()
        expect = list(range(1, Zxid(inside).counter + 1))
        assert [t.zxid.counter for t in s.recover().txns] == expect
    assert zxids(d) == expect


def test_a_group_damaged_under_a_running_store_stops_the_cut_with_a_corruption_error(tmp_path):
    d = str(tmp_path / "s")
    with DiskStore(d, segment_bytes=SEG) as s:
        s.append(txns(1, 4))
        s.sync()
        name, data = only_segment(d)
        start = group_spans(data)[0][0]
        with open(os.path.join(d, name), "r+b") as f:  # the disk changed what this process wrote
            f.seek(start + 60)
            f.write(b"\xff")
        s.truncate(Zxid.of(1, 2))
        with pytest.raises(CorruptionError, match="region written by this process"):
            s.sync()
