"""DiskStore round trips: what was synced comes back after reopening, in order, and nothing else."""

from __future__ import annotations

import logging
import os
import random

import pytest
from disk_harness import Model, apply_model, fold, gen_ops, run_op, view_of

from storage import DiskStore, txnlog
from zabray.errors import ConfigError, StorageError
from zabray.protocol.actions import (
    AppendTxns,
    InstallSnapshot,
    PersistSnapshot,
    TruncateLog,
    WriteCurrentEpoch,
)
from zabray.protocol.durable import DurableState
from zabray.protocol.messages import Txn
from zabray.protocol.store import apply_persists
from zabray.protocol.zxid import Zxid
from zabray.sim.memstore import MemoryStore


def txns(epoch: int, first: int, n: int, size: int = 100) -> list[Txn]:
    return [
        Txn(Zxid.of(epoch, c), bytes([c % 251]) * size, origin=c % 3, request_id=c)
        for c in range(first, first + n)
    ]


def zx(st: DurableState) -> list[int]:
    return [t.zxid for t in st.txns]


_OPENED: list[DiskStore] = []


def reopen(store: DiskStore) -> DiskStore:
    store.close()
    new = DiskStore(
        store.path,
        keep_snapshots=store.keep_snapshots,
        segment_bytes=store.segment_bytes,
        preallocate=store.preallocate,
    )
    _OPENED.append(new)
    return new


@pytest.fixture(autouse=True)
def _close_reopened():  # type: ignore[no-untyped-def]
    yield
    while _OPENED:
        _OPENED.pop().close()


@pytest.fixture(params=[True, False], ids=["prealloc", "grow"])
def store(request, tmp_path):  # type: ignore[no-untyped-def]
    s = DiskStore(tmp_path / "s", segment_bytes=4096, preallocate=request.param)
    yield s
    s.close()


def test_fresh_store_is_empty(tmp_path):
    with DiskStore(tmp_path / "new" / "nested") as s:
        assert s.recover() == DurableState()


def test_a_wiped_store_is_rejoining_across_crashes_until_a_leader_sets_its_current_epoch(store):
    store.mark_rejoining()
    assert store.recover().rejoining
    store.append(txns(1, 1, 3))
    store.sync()  # synced from a leader, but its NEWLEADER not yet taken
    store = reopen(store)
    assert store.recover().rejoining and zx(store.recover()) == [Zxid.of(1, c) for c in (1, 2, 3)]
    store.write_current_epoch(1)
    assert not store.recover().rejoining
    assert not reopen(store).recover().rejoining


def test_append_sync_reopen(store):
    batch = txns(1, 1, 50, 300)
    store.append(batch[:20])
    store.append(batch[20:])
    store.sync()
    assert store.recover().txns == tuple(batch)
    store = reopen(store)
    st = store.recover()
    assert st.txns == tuple(batch)
    assert all(type(t.zxid) is Zxid for t in st.txns)
    more = txns(1, 51, 5)
    store.append(more)
    store.sync()
    assert reopen(store).recover().txns == tuple(batch + more)


def test_unsynced_appends_are_not_durable(store):
    store.append(txns(1, 1, 3))
    store.sync()
    store.append(txns(1, 4, 3))
    assert zx(store.recover()) == [Zxid.of(1, c) for c in (1, 2, 3)]
    assert zx(reopen(store).recover()) == [Zxid.of(1, c) for c in (1, 2, 3)]


@pytest.mark.parametrize("cut", [0, 1, 7, 8, 19, 20, 40])
def test_truncate_then_reopen(store, cut):
    store.append(txns(1, 1, 20, 700))  # 700-byte records: 5 per 4 KiB segment, several segments
    store.sync()
    store.append(txns(1, 21, 20, 700))
    store.sync()
    store.truncate(Zxid.of(1, cut))
    store.sync()
    expect = [Zxid.of(1, c) for c in range(1, min(cut, 40) + 1)]
    assert zx(store.recover()) == expect
    store = reopen(store)
    assert zx(store.recover()) == expect
    store.append(txns(2, 1, 3))
    store.sync()
    assert zx(reopen(store).recover()) == expect + [Zxid.of(2, c) for c in (1, 2, 3)]


def test_truncate_to_epoch_boundary_not_in_log(store):
    store.append(txns(1, 1, 5) + txns(3, 1, 5))
    store.sync()
    store.truncate(Zxid.of(2, 0))
    store.append(txns(4, 1, 2))
    store.sync()
    assert zx(reopen(store).recover()) == [Zxid.of(1, c) for c in range(1, 6)] + [
        Zxid.of(4, 1),
        Zxid.of(4, 2),
    ]


def test_truncate_inside_the_buffer(store):
    store.append(txns(1, 1, 5))
    store.sync()
    store.append(txns(1, 6, 5))
    store.truncate(Zxid.of(1, 7))  # drops buffered 8..10 only
    store.append(txns(2, 1, 1))
    store.truncate(Zxid.of(1, 3))  # now reaches into the durable part
    store.append(txns(3, 1, 2))
    store.sync()
    expect = [Zxid.of(1, c) for c in (1, 2, 3)] + [Zxid.of(3, 1), Zxid.of(3, 2)]
    assert zx(store.recover()) == expect
    assert zx(reopen(store).recover()) == expect


def test_epochs_round_trip(store):
    store.write_accepted_epoch(7, 2)
    store.write_current_epoch(6)
    store = reopen(store)
    st = store.recover()
    assert (st.accepted_epoch, st.accepted_leader, st.current_epoch) == (7, 2, 6)
    with pytest.raises(ConfigError):
        store.write_current_epoch(-1)
    with pytest.raises(ConfigError):
        store.write_accepted_epoch(1 << 32, 0)
    store.write_accepted_epoch(8, 1)
    assert store.recover().accepted_epoch == 8


def test_install_snapshot_replaces_history(store):
    store.append(txns(1, 1, 30, 500))
    store.sync()
    store.save_snapshot(Zxid.of(1, 10), b"old-state")
    store.append(txns(1, 31, 2))  # unsynced: dropped with the old history
    store.install_snapshot(Zxid.of(2, 5), b"leader-state")
    st = store.recover()
    assert (st.snapshot_zxid, st.snapshot, st.txns) == (Zxid.of(2, 5), b"leader-state", ())
    store = reopen(store)
    assert store.recover() == st
    assert all(
        not n.startswith("log.00000000") and n != "snap.00000000.0000000100000000"
        for n in os.listdir(store.path)
    )
    store.append(txns(2, 6, 4))
    store.sync()
    st = reopen(store).recover()
    assert st.snapshot == b"leader-state" and zx(st) == [Zxid.of(2, c) for c in range(6, 10)]


def test_install_snapshot_below_the_old_log(store):
    store.append(txns(3, 1, 10))
    store.sync()
    store.install_snapshot(Zxid.of(2, 9), b"s")  # the leader's state is behind our uncommitted tail
    store.append(txns(4, 1, 2))
    store.sync()
    st = reopen(store).recover()
    assert st.snapshot_zxid == Zxid.of(2, 9) and zx(st) == [Zxid.of(4, 1), Zxid.of(4, 2)]


def test_appends_must_increase(store):
    store.append(txns(1, 1, 3))
    with pytest.raises(ConfigError):
        store.append(txns(1, 3, 1))
    with pytest.raises(ConfigError):
        store.append([Txn(Zxid.of(1, 9), b""), Txn(Zxid.of(1, 8), b"")])
    with pytest.raises(ConfigError):
        store.append([Txn(Zxid.of(1, 9), "not bytes")])  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        store.append([Txn(Zxid.of(1, 9), b"", request_id=1 << 70)])
    store.sync()  # the rejected appends left nothing behind; the store is still usable
    assert zx(reopen(store).recover()) == [Zxid.of(1, c) for c in (1, 2, 3)]


def test_save_snapshot_and_replay_equals_applying_every_txn(tmp_path):
    rng = random.Random(5)
    s = DiskStore(tmp_path / "s", segment_bytes=2048, keep_snapshots=2)
    history: list[Txn] = []
    c = 0
    for round_ in range(12):
        batch = [
            Txn(Zxid.of(1, c + i + 1), rng.randbytes(rng.randint(0, 400))) for i in range(rng.randint(1, 15))
        ]
        c += len(batch)
        history += batch
        s.append(batch)
        s.sync()
        if round_ % 3 == 2:
            z = history[rng.randrange(len(history))].zxid
            z = max(z, s.recover().snapshot_zxid)
            s.save_snapshot(z, fold(None, [t for t in history if t.zxid <= z]))
        st = s.recover()
        assert fold(st.snapshot, st.txns) == fold(None, history)
        s = reopen(s)
        st = s.recover()
        assert fold(st.snapshot, st.txns) == fold(None, history)
        assert st.txns == tuple(t for t in history if t.zxid > st.snapshot_zxid)
    s.close()


def test_purge_keeps_what_is_needed(tmp_path):
    s = DiskStore(tmp_path / "s", segment_bytes=1024, keep_snapshots=2)
    for e in range(1, 8):
        s.append(txns(1, 10 * e - 9, 10, 200))  # ~2.4 KiB per sync: a new segment each time
        s.sync()
        s.save_snapshot(Zxid.of(1, 10 * e - 5), b"snap%d" % e)
    names = sorted(os.listdir(s.path))
    snaps = [n for n in names if n.startswith("snap.")]
    segs = [n for n in names if n.startswith("log.")]
    assert len(snaps) == 2
    # Oldest kept snapshot is at 1:55 (6th sync), whose records live in segment 5 onward.
    assert segs == [f"log.00000000.{i:08x}" for i in (5, 6)]
    st = s.recover()
    assert st.snapshot_zxid == Zxid.of(1, 65) and zx(st) == [Zxid.of(1, c) for c in range(66, 71)]
    s = reopen(s)
    assert s.recover() == st
    s.close()


def test_purge_keeps_whole_log_until_enough_snapshots(tmp_path):
    s = DiskStore(tmp_path / "s", segment_bytes=1024, keep_snapshots=3)
    for e in range(1, 4):
        s.append(txns(1, 10 * e - 9, 10, 200))
        s.sync()
    s.save_snapshot(Zxid.of(1, 25), b"a")
    s.save_snapshot(Zxid.of(1, 28), b"b")
    # The empty initial state is still one of the three kept "snapshots": nothing is purged.
    assert "log.00000000.00000000" in os.listdir(s.path)
    s.save_snapshot(Zxid.of(1, 29), b"c")
    assert "log.00000000.00000000" not in os.listdir(s.path)
    s.close()


def test_save_snapshot_must_not_go_back(store):
    store.append(txns(1, 1, 5))
    store.sync()
    store.save_snapshot(Zxid.of(1, 4), b"x")
    with pytest.raises(ConfigError):
        store.save_snapshot(Zxid.of(1, 3), b"y")
    store.save_snapshot(Zxid.of(1, 4), b"same zxid again")
    assert reopen(store).recover().snapshot == b"same zxid again"


def test_save_snapshot_syncs_buffered_appends_first(store):
    store.append(txns(1, 1, 5))
    store.save_snapshot(Zxid.of(1, 3), b"x")
    assert zx(reopen(store).recover()) == [Zxid.of(1, 4), Zxid.of(1, 5)]


def test_batch_larger_than_a_segment(store):
    big = txns(1, 1, 3, 10_000)
    store.append(big)
    store.sync()
    store.append(txns(1, 4, 2))
    store.sync()
    assert zx(reopen(store).recover()) == [Zxid.of(1, c) for c in range(1, 6)]


def test_leftover_temp_files_are_reaped(store):
    store.append(txns(1, 1, 2))
    store.sync()
    path = store.path
    store.close()
    for name in ("snap.00000000.0000000100000001.tmp", "log.00000000.00000009.tmp", "currentEpoch.tmp"):
        with open(os.path.join(path, name), "wb") as f:
            f.write(b"half written")
    with DiskStore(path, segment_bytes=4096) as s:
        assert zx(s.recover()) == [Zxid.of(1, 1), Zxid.of(1, 2)]
        assert not [n for n in os.listdir(path) if n.endswith(".tmp")]


def test_second_open_of_same_directory_is_refused(store):
    with pytest.raises(StorageError, match="already open"):
        DiskStore(store.path)


def test_closed_store_refuses_calls(tmp_path):
    s = DiskStore(tmp_path / "s")
    s.close()
    s.close()
    for call in (s.recover, s.sync, lambda: s.append(txns(1, 1, 1)), lambda: s.write_current_epoch(1)):
        with pytest.raises(StorageError):
            call()


def test_bad_options(tmp_path):
    with pytest.raises(ConfigError):
        DiskStore(tmp_path / "s", keep_snapshots=0)
    with pytest.raises(ConfigError):
        DiskStore(tmp_path / "s", segment_bytes=10)


def test_apply_persists_drives_a_disk_store(tmp_path):
    with DiskStore(tmp_path / "s") as s:
        token = apply_persists(
            s,
            [
                AppendTxns(1, tuple(txns(1, 1, 3))),
                TruncateLog(2, Zxid.of(1, 2)),
                AppendTxns(3, tuple(txns(2, 1, 1))),
                WriteCurrentEpoch(4, 2),
                PersistSnapshot(5, Zxid.of(1, 2), b"snap"),
                InstallSnapshot(6, Zxid.of(2, 1), b"inst"),
                AppendTxns(7, tuple(txns(2, 2, 2))),
            ],
        )
        assert token == 7
        st = s.recover()
    assert st.current_epoch == 2 and st.snapshot == b"inst" and zx(st) == [Zxid.of(2, 2), Zxid.of(2, 3)]


@pytest.mark.parametrize("seed", range(6))
def test_matches_memory_store(tmp_path, seed):
    """Random valid op sequences: DiskStore, reopened or not, recovers what MemoryStore holds."""
    ops = gen_ops(random.Random(seed), Model(), 60, max_batch=12, max_value=600, max_snap=3000)
    disk = DiskStore(tmp_path / "s", segment_bytes=2048, keep_snapshots=2)
    mem = MemoryStore()
    model = Model()
    try:
        for op in ops:
            disk = run_op(disk, op)
            run_op_memory(mem, op)
            model = apply_model(model, op)
            st = disk.recover()
            assert view_of(st) == model.view()
            assert view_of(mem.recover()) == view_of(st)
            assert fold(st.snapshot, st.txns) == model.digest()
        disk = reopen(disk)
        assert view_of(disk.recover()) == model.view()
    finally:
        disk.close()


def run_op_memory(mem: MemoryStore, op) -> None:  # type: ignore[no-untyped-def]
    from disk_harness import Reopen

    if not isinstance(op, Reopen):
        run_op(mem, op)


def test_epoch_write_makes_buffered_history_durable_first(store):
    """History, then currentEpoch, in durability order even without apply_persists."""
    store.append(txns(2, 1, 3))
    store.write_current_epoch(2)
    st = reopen(store).recover()
    assert st.current_epoch == 2 and zx(st) == [Zxid.of(2, c) for c in (1, 2, 3)]


def test_rollover_uses_background_zero_filled_spare(tmp_path, caplog):
    path = tmp_path / "s"
    s = DiskStore(path, segment_bytes=64 * 1024)
    expect = []
    with caplog.at_level(logging.DEBUG, logger="storage.txnlog"):
        for b in range(40):
            batch = txns(1, 10 * b + 1, 10, 1000)
            expect += [t.zxid for t in batch]
            s.append(batch)
            s.sync()
    assert sum("zero-filled in the background" in r.getMessage() for r in caplog.records) >= 3
    assert zx(s.recover()) == expect
    for name in os.listdir(path):
        if name.startswith("log."):
            assert os.path.getsize(path / name) == 64 * 1024  # fully preallocated
    s.close()
    assert "spare.tmp" not in os.listdir(path)  # close cancels and removes an unused spare
    with DiskStore(path, segment_bytes=64 * 1024) as s2:
        assert zx(s2.recover()) == expect


@pytest.mark.parametrize("group", [1, 511, 512, 513, 2000])
def test_one_write_per_group_commit(tmp_path, monkeypatch, group):
    """A group commit is one gathering write (or one joined write past IOV_MAX) and one fdatasync."""
    monkeypatch.setattr(txnlog, "BACKGROUND_PREALLOCATION", False)  # its writes would interleave
    s = DiskStore(tmp_path / "s", segment_bytes=8 << 20)
    s.append(txns(1, 1, 1, 10))
    s.sync()  # the segment exists
    calls: list[str] = []
    for name in ("write", "pwrite", "pwritev", "fdatasync", "fsync"):
        real = getattr(os, name)

        def spy(*a, _real=real, _name=name):  # type: ignore[no-untyped-def]
            calls.append(_name)
            return _real(*a)

        monkeypatch.setattr(os, name, spy)
    batch = txns(1, 2, group, 50)
    s.append(batch)
    s.sync()
    monkeypatch.undo()
    assert len(calls) == 2 and calls[1] == "fdatasync" and calls[0] in ("pwrite", "pwritev"), calls
    assert s.recover().txns[1:] == tuple(batch)
    s.close()
