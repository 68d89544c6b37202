"""Damaged files: every case is refused (CorruptionError naming file and offset), recovered as a
torn tail (only when the damage is at the end of the log), or, for a damaged snapshot, recovered
from an older snapshot the log still covers. Never a wrong answer, never a non-ZabError."""

from __future__ import annotations

import logging
import os
import random
import shutil
import struct

import pytest
from disk_harness import fold
from frames import encode_groups, group_spans
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import DiskStore, epochs, snapshots
from storage.checksum import crc32c
from storage.records import GROUP_HEADER_SIZE, REC_HEADER_SIZE
from storage.segments import (
    SEG_HEADER_SIZE,
    SegmentInfo,
    decode_segment_header,
    encode_segment_header,
    scan_segment,
)
from zabray.errors import CorruptionError, ZabError
from zabray.protocol.durable import DurableState
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid

SEG = 1024


@pytest.fixture
def fast_sync(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(os, "fdatasync", lambda fd: None)


def build(path: str, *, install: bool = False, seed: int = 0) -> DurableState:
    """A store with several segments, three snapshots (state = hash chain), and both epochs."""
    rng = random.Random(seed)
    history: list[Txn] = []
    base: bytes | None = None
    with DiskStore(path, segment_bytes=SEG, keep_snapshots=3) as s:
        s.write_accepted_epoch(3, 1)
        s.write_current_epoch(2)
        c = 0
        epoch = 1
        if install:
            s.append([Txn(Zxid.of(1, i), b"old") for i in range(1, 9)])
            s.sync()
            base = fold(None, []) + b"installed"
            s.install_snapshot(Zxid.of(2, 0), base)
            epoch = 2
        for round_ in range(14):
            batch = [
                Txn(Zxid.of(epoch, c + i + 1), rng.randbytes(rng.randint(1, 120)), rng.randint(0, 3), c + i)
                for i in range(rng.randint(1, 6))
            ]
            c += len(batch)
            history += batch
            s.append(batch)
            s.sync()
            if round_ in (5, 9, 12):
                z = history[-2].zxid if len(batch) > 1 else history[-1].zxid
                s.save_snapshot(
                    z, fold(base, [t for t in history if t.zxid <= z]) + b"pad" * rng.randint(0, 50)
                )
        st = s.recover()
    assert fold(st.snapshot, st.txns) == fold(base, history)
    return st


def newest(path: str, prefix: str) -> str:
    return sorted(n for n in os.listdir(path) if n.startswith(prefix) and not n.endswith(".corrupt"))[-1]


def judge(orig: DurableState, path: str, target: str, lo: int, must_keep: list[int]) -> str:
    """Open a damaged copy and classify the outcome; fails the test on a wrong answer.

    ``lo`` is the first damaged offset in ``target``; ``must_keep`` are the zxids of the newest
    segment's records lying wholly before the damage: a torn-tail recovery must keep them.
    """
    try:
        s = DiskStore(path, segment_bytes=SEG, keep_snapshots=3)
    except CorruptionError as e:
        assert target.split(".")[0] in str(e) or "offset" in str(e) or "snapshot" in str(e), str(e)
        return "refused"
    except ZabError:
        raise
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"{type(e).__name__} (not a ZabError) for damage in {target} at {lo}: {e}")
    with s:
        st = s.recover()
        # The store takes appends again.
        nxt = Zxid.of(Zxid(st.last_zxid).epoch + 1, 1)
        s.append([Txn(nxt, b"x")])
        s.sync()
    with DiskStore(path, segment_bytes=SEG, keep_snapshots=3) as s2:
        assert s2.recover().txns[-1].zxid == nxt
    if st == orig:
        return "intact"
    if (
        target == newest(path, "log.")
        and st.snapshot_zxid == orig.snapshot_zxid
        and st.snapshot == orig.snapshot
    ):
        assert st.txns == orig.txns[: len(st.txns)], "torn-tail recovery must give a prefix of the log"
        kept = {t.zxid for t in st.txns}
        assert all(z in kept or z <= st.snapshot_zxid for z in must_keep), "lost records before the damage"
        return "torn"
    if target.startswith("snap."):
        assert fold(st.snapshot, st.txns) == fold(orig.snapshot, orig.txns), (
            "fallback must give the same state"
        )
        assert st.last_zxid == orig.last_zxid and st.snapshot_zxid < orig.snapshot_zxid
        assert tuple(t for t in st.txns if t.zxid > orig.snapshot_zxid) == orig.txns
        return "fallback"
    pytest.fail(f"damage in {target} at offset {lo} gave a different answer: {st!r} vs {orig!r}")


@pytest.mark.parametrize("install", [False, True], ids=["gen0", "installed"])
def test_random_damage_is_never_a_wrong_answer(tmp_path, fast_sync, install):
    golden = str(tmp_path / "golden")
    orig = build(golden, install=install)
    files = sorted(n for n in os.listdir(golden) if n != "LOCK")
    assert sum(n.startswith("log.") for n in files) >= 3 and sum(n.startswith("snap.") for n in files) == 3
    rng = random.Random(42 + install)
    outcomes: dict[str, int] = {}
    last_seg = newest(golden, "log.")
    with open(os.path.join(golden, last_seg), "rb") as f:
        last_image = f.read()
    last_groups = group_spans(last_image)
    for case in range(300):
        d = str(tmp_path / f"c{case}")
        shutil.copytree(golden, d)
        target = last_seg if rng.random() < 0.3 else rng.choice(files)
        p = os.path.join(d, target)
        data = bytearray(open(p, "rb").read())
        kind = rng.choice(["flip", "flip", "truncate", "garble"])
        if target == last_seg and rng.random() < 0.5 and last_groups:  # aim at the log's end too
            lo = rng.randrange(last_groups[-1][0], len(data))
        else:
            lo = rng.randrange(len(data))
        if kind == "flip":
            data[lo] ^= 1 << rng.randrange(8)
        elif kind == "truncate":
            del data[lo:]
        else:
            n = rng.randint(1, 64)
            data[lo : lo + n] = rng.randbytes(len(data[lo : lo + n]))
        with open(p, "wb") as f:
            f.write(data)
        # A torn tail loses the damaged group whole; the groups before it must survive.
        must_keep = [z for _, e, zs in last_groups for z in zs if e <= lo] if target == last_seg else []
        outcome = judge(orig, d, target, lo, must_keep)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        shutil.rmtree(d)
    # The sweep must have exercised every branch, not just refused everything.
    assert outcomes.get("refused", 0) > 50 and outcomes.get("torn", 0) > 5, outcomes
    assert outcomes.get("fallback", 0) > 0 and outcomes.get("intact", 0) > 0, outcomes


# -- targeted cases ----------------------------------------------------------------------------------


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x10]))


def test_torn_last_group_is_cut_with_a_warning(tmp_path, caplog):
    d = str(tmp_path / "s")
    orig = build(d)
    seg = os.path.join(d, newest(d, "log."))
    data = open(seg, "rb").read()
    start, end, zxids = group_spans(data)[-1]
    # Crash mid-write: only the first half of the last group commit reached the file.
    torn = data[:start] + data[start : (start + end) // 2] + bytes(len(data) - (start + end) // 2)
    open(seg, "wb").write(torn)
    with caplog.at_level(logging.WARNING), DiskStore(d, segment_bytes=SEG) as s:
        st = s.recover()
    assert st.txns == orig.txns[: len(orig.txns) - len(zxids)]
    assert any("torn" in r.message and str(start) in r.message for r in caplog.records)


def test_checksum_mismatch_mid_log_is_refused(tmp_path):
    d = str(tmp_path / "s")
    build(d)
    name = newest(d, "log.")
    seg = os.path.join(d, name)
    start, _, _ = group_spans(open(seg, "rb").read())[0]
    _flip(seg, start + GROUP_HEADER_SIZE + REC_HEADER_SIZE)  # first group's first value; later groups intact
    with pytest.raises(CorruptionError, match=rf"{name}.*offset {start}"):
        DiskStore(d, segment_bytes=SEG)


def test_zeroed_header_mid_log_is_refused(tmp_path):
    d = str(tmp_path / "s")
    build(d)
    seg = os.path.join(d, newest(d, "log."))
    data = bytearray(open(seg, "rb").read())
    start, _, _ = group_spans(bytes(data))[0]
    data[start : start + GROUP_HEADER_SIZE] = bytes(GROUP_HEADER_SIZE)
    open(seg, "wb").write(data)
    with pytest.raises(CorruptionError, match="non-zero bytes after the end"):
        DiskStore(d, segment_bytes=SEG)


def _segment(info: SegmentInfo, batches: list[list[Txn]], size: int = 4096) -> bytes:
    body = encode_segment_header(info.generation, info.seq, info.prev, True) + encode_groups(batches)
    return body + bytes(size - len(body))


def test_zxids_going_backwards_are_refused(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    info = SegmentInfo(0, 0, Zxid(0), "log.00000000.00000000", True)
    a = _segment(info, [[Txn(Zxid.of(1, 5), b"a")]])
    later = encode_groups([[Txn(Zxid.of(1, 3), b"b")]])  # valid checksum, wrong order
    end = group_spans(a)[-1][1]
    img = bytearray(a)
    img[end : end + len(later)] = later
    (d / info.name).write_bytes(bytes(img))
    with pytest.raises(CorruptionError, match=r"zxid 1:3 at offset \d+ does not follow 1:5"):
        DiskStore(d)


def test_bad_epoch_file_is_refused(tmp_path):
    d = str(tmp_path / "s")
    build(d)
    _flip(os.path.join(d, "currentEpoch"), 9)
    with pytest.raises(CorruptionError, match="currentEpoch.*offset 0"):
        DiskStore(d)


def test_damaged_newest_snapshot_falls_back_when_log_covers(tmp_path, caplog):
    d = str(tmp_path / "s")
    orig = build(d)
    name = newest(d, "snap.")
    _flip(os.path.join(d, name), 40)
    with caplog.at_level(logging.WARNING), DiskStore(d, segment_bytes=SEG) as s:
        st = s.recover()
    assert st.snapshot_zxid < orig.snapshot_zxid
    assert fold(st.snapshot, st.txns) == fold(orig.snapshot, orig.txns)
    assert name + ".corrupt" in os.listdir(d) and name not in os.listdir(d)
    with DiskStore(d, segment_bytes=SEG) as s:  # and it stays recoverable
        assert fold(s.recover().snapshot, s.recover().txns) == fold(orig.snapshot, orig.txns)


def test_damaged_snapshot_without_log_cover_is_refused(tmp_path):
    d = str(tmp_path / "s")
    with DiskStore(d, segment_bytes=SEG, keep_snapshots=1) as s:
        for e in range(1, 5):
            s.append([Txn(Zxid.of(1, 10 * e + i), b"v" * 500) for i in range(3)])
            s.sync()
            s.save_snapshot(Zxid.of(1, 10 * e + 1), b"s%d" % e)
    name = newest(d, "snap.")
    _flip(os.path.join(d, name), 30)
    with pytest.raises(CorruptionError, match=name):
        DiskStore(d, segment_bytes=SEG, keep_snapshots=1)


def test_damaged_snapshot_ahead_of_the_log_is_refused(tmp_path):
    """An older snapshot plus the log would stop short of what the damaged one held."""
    d = str(tmp_path / "s")
    with DiskStore(d, segment_bytes=SEG) as s:
        s.append([Txn(Zxid.of(1, i), b"v") for i in range(1, 11)])
        s.sync()
        s.save_snapshot(Zxid.of(1, 5), b"five")
        s.save_snapshot(Zxid.of(1, 20), b"twenty")  # delivered state ahead of this replica's log
    name = newest(d, "snap.")
    _flip(os.path.join(d, name), 30)
    with pytest.raises(CorruptionError, match="does not reach"):
        DiskStore(d, segment_bytes=SEG)


def test_damaged_last_group_followed_by_garbage_is_refused(tmp_path):
    """A torn write leaves zeros after the group it was writing; anything else is corruption."""
    d = str(tmp_path / "s")
    build(d)
    seg = os.path.join(d, newest(d, "log."))
    data = bytearray(open(seg, "rb").read())
    start, end, _ = group_spans(bytes(data))[-1]
    data[end - 1] ^= 0xFF
    data[end + 10] = 0x55
    open(seg, "wb").write(data)
    with pytest.raises(CorruptionError, match=rf"offset {start} followed by non-zero bytes"):
        DiskStore(d, segment_bytes=SEG)


def test_missing_middle_segment_is_refused(tmp_path):
    d = str(tmp_path / "s")
    with DiskStore(d, segment_bytes=1024) as s:
        for e in range(1, 5):
            s.append([Txn(Zxid.of(1, 10 * e + i), b"v" * 200) for i in range(3)])  # one sync per segment
            s.sync()
    os.unlink(os.path.join(d, "log.00000000.00000002"))
    with pytest.raises(CorruptionError, match="log.00000000.00000003.*missing"):
        DiskStore(d, segment_bytes=1024)


def test_newest_segment_cut_short_is_refused(tmp_path):
    d = str(tmp_path / "s")
    build(d)
    seg = os.path.join(d, newest(d, "log."))
    data = open(seg, "rb").read()
    _, end, _ = group_spans(data)[-1]
    open(seg, "wb").write(data[: end - 3])  # preallocated file shorter than its records
    with pytest.raises(CorruptionError, match="cut short"):
        DiskStore(d, segment_bytes=SEG)


def test_generation_without_its_snapshot_is_refused(tmp_path):
    d = str(tmp_path / "s")
    build(d, install=True)
    for n in os.listdir(d):
        if n.startswith("snap."):
            os.unlink(os.path.join(d, n))
    with pytest.raises(CorruptionError, match="generation 1"):
        DiskStore(d, segment_bytes=SEG)


def test_interrupted_install_leftovers_are_ignored_and_removed(tmp_path):
    d = str(tmp_path / "s")
    with DiskStore(d, segment_bytes=SEG) as s:
        s.append([Txn(Zxid.of(1, i), b"old") for i in range(1, 30)])
        s.sync()
        s.save_snapshot(Zxid.of(1, 3), b"old-snap")
    # The install got as far as its commit point (the new-generation snapshot) and no further.
    snapshots.write(d, 1, Zxid.of(2, 0), (b"new",))
    with DiskStore(d, segment_bytes=SEG) as s:
        st = s.recover()
        assert (st.snapshot_zxid, st.snapshot, st.txns) == (Zxid.of(2, 0), b"new", ())
    assert sorted(n for n in os.listdir(d) if n.startswith(("log.", "snap."))) == [
        "snap.00000001.0000000200000000"
    ]


# -- fuzzing the readers ------------------------------------------------------------------------------

_INFO = SegmentInfo(0, 0, Zxid(0), "log.00000000.00000000", True)
_FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FUZZ
@given(st.binary(max_size=2000), st.booleans(), st.booleans())
def test_fuzz_scan_segment_random_bytes(data, torn_ok, prealloc):
    info = SegmentInfo(0, 0, Zxid(0), _INFO.name, prealloc)
    try:
        res = scan_segment(
            info, encode_segment_header(0, 0, 0, prealloc) + data, keep_after=0, may_be_torn=torn_ok
        )
    except CorruptionError:
        return
    zs = [t.zxid for t in res.txns]
    assert zs == sorted(set(zs)) and all(z > 0 for z in zs)


_TXNS = [Txn(Zxid.of(1, i), bytes([i]) * (i * 7), i % 3, i) for i in range(1, 25)]
_GOOD = _segment(_INFO, [_TXNS[i : i + 5] for i in range(0, len(_TXNS), 5)], 4096)


@_FUZZ
@given(st.integers(0, len(_GOOD) - 1), st.integers(1, 255), st.booleans())
def test_fuzz_scan_segment_damage(offset, xor, torn_ok):
    img = bytearray(_GOOD)
    img[offset] ^= xor
    try:
        res = scan_segment(_INFO, bytes(img), keep_after=0, may_be_torn=torn_ok)
    except CorruptionError:
        return
    # Recovered: the damage was in the last record (torn) or did not matter; never wrong data.
    assert torn_ok or res.torn is None
    assert res.txns == _TXNS[: len(res.txns)]
    if len(res.txns) < len(_TXNS):
        assert offset >= group_spans(_GOOD)[-1][0]


@_FUZZ
@given(st.integers(SEG_HEADER_SIZE, len(_GOOD)))
def test_fuzz_scan_segment_cut(length):
    info = SegmentInfo(0, 0, Zxid(0), _INFO.name, False)  # a growing (not preallocated) segment
    try:
        res = scan_segment(info, _GOOD[:length], keep_after=0, may_be_torn=True)
    except CorruptionError:
        pytest.fail("a cut-short growing segment is a torn tail")
    whole = sum(len(zs) for _, e, zs in group_spans(_GOOD) if e <= length)
    assert res.txns == _TXNS[:whole]


@_FUZZ
@given(st.binary(max_size=64))
def test_fuzz_epoch_decode(data):
    try:
        rec = epochs.decode(epochs.CURRENT_EPOCH, data)
    except CorruptionError:
        return
    assert epochs.encode(epochs.CURRENT_EPOCH, rec) == data


@_FUZZ
@given(st.integers(0, epochs.SIZE - 1), st.integers(1, 255))
def test_fuzz_epoch_damage_always_detected(offset, xor):
    good = bytearray(epochs.encode(epochs.ACCEPTED_EPOCH, epochs.EpochRecord(7, 3)))
    good[offset] ^= xor
    with pytest.raises(CorruptionError, match="acceptedEpoch"):
        epochs.decode(epochs.ACCEPTED_EPOCH, bytes(good))


_SNAP = snapshots.SnapshotFile(0, Zxid.of(1, 5), snapshots.file_name(0, Zxid.of(1, 5)))


@_FUZZ
@given(st.binary(max_size=300))
def test_fuzz_snapshot_decode(data):
    try:
        snapshots.decode(_SNAP, data)
    except CorruptionError:
        return
    # Only a well-formed file decodes: its checksum must match.
    assert crc32c(data[:-8]) == struct.unpack_from("<I", data, len(data) - 8)[0]


@_FUZZ
@given(st.binary(max_size=64))
def test_fuzz_segment_header(data):
    try:
        decode_segment_header("log.00000000.00000000", data, 0, 0)
    except CorruptionError:
        return
    assert len(data) >= SEG_HEADER_SIZE


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=3000), st.booleans())
def test_fuzz_whole_store_open(tmp_path, data, with_header):
    d = tmp_path / f"f{random.getrandbits(64)}"
    d.mkdir()
    body = (encode_segment_header(0, 0, 0, True) if with_header else b"") + data
    (d / "log.00000000.00000000").write_bytes(body)
    try:
        with DiskStore(d) as s:
            s.recover()
    except CorruptionError:
        pass
    shutil.rmtree(d)
