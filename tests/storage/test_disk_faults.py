"""Injected failures at every write, sync, rename and unlink point of a seeded workload.

Three kinds of fault at each point k:
- "crash": the process stops there (a write may be half done); the page cache survives.
- "powercut": the same, then effects no fsync made durable are (randomly) lost.
- "error": the call fails with EIO; the store must raise StorageError and refuse every later call.
After each, a clean reopen must recover a state the model allows for the operation that was in
progress, and the store must accept appends again.
"""

from __future__ import annotations

import errno
import os
import random
import shutil

import pytest
from disk_harness import (
    Crash,
    Injector,
    Model,
    Op,
    allowed_views,
    apply_model,
    gen_ops,
    run_op,
    view_of,
)

from storage import DiskStore, txnlog
from zabray.errors import StorageError
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid

OPTS = dict(keep_snapshots=2, segment_bytes=1024)
GROW = dict(OPTS, preallocate=False)  # segments that grow with each write instead
# Snapshots often enough that purged segments are recycled as later ones, rolled into and cut.
RECYCLE = dict(keep_snapshots=1, segment_bytes=1024)
RECYCLE_SEEDS = (24, 28)


def opts_for(seed: int) -> dict:
    if seed in RECYCLE_SEEDS:
        return RECYCLE
    return GROW if seed >= 6 else OPTS


@pytest.fixture
def fast_sync(monkeypatch):  # type: ignore[no-untyped-def]
    """Make fsync/fdatasync no-ops: these tests model durability themselves (the Injector still
    sees and counts every call), and thousands of real fsyncs would only make them slow."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(os, "fdatasync", lambda fd: None)
    # The background zero-filling thread would make the sequence of I/O points nondeterministic.
    monkeypatch.setattr(txnlog, "BACKGROUND_PREALLOCATION", False)


def workload(seed: int) -> tuple[list[Op], list[Model]]:
    if seed in RECYCLE_SEEDS:
        ops = gen_ops(random.Random(seed), Model(), 30, max_batch=6, max_value=300, max_snap=600, p_truncate=0.3)
    else:
        ops = gen_ops(random.Random(seed), Model(), 24, max_batch=6, max_value=300, max_snap=1500, p_truncate=0.5)
    models = [Model()]
    for op in ops:
        models.append(apply_model(models[-1], op))
    return ops, models


def run(
    path: str, ops: list[Op], inj: Injector | None, opts: dict = OPTS
) -> tuple[int, BaseException | None, DiskStore | None]:
    """Run the workload; returns (index of the op in progress or len(ops), what stopped it, store)."""
    progress = [-1]  # index of the op in progress (-1: opening)
    store = None

    def go() -> None:
        nonlocal store
        store = DiskStore(path, **opts)
        for i, op in enumerate(ops):
            progress[0] = i
            store = run_op(store, op)
        progress[0] = len(ops)

    try:
        if inj is None:
            go()
        else:
            with inj.installed():
                go()
        return len(ops), None, store
    except (Crash, StorageError) as e:
        return progress[0], e, store


def allowed(ops: list[Op], models: list[Model], j: int) -> list[tuple]:
    if j < 0:
        return [models[0].view()]
    if j >= len(ops):
        return [models[-1].view()]
    return allowed_views(models[j], ops[j], models[j + 1])


def check_reopen(path: str, ops: list[Op], models: list[Model], j: int, what: str, opts: dict = OPTS) -> None:
    with DiskStore(path, **opts) as s:
        st = s.recover()
        assert view_of(st) in allowed(ops, models, j), f"{what}: recovered {view_of(st)!r}"
        nxt = Zxid.of(Zxid(st.last_zxid).epoch + 1, 1)
        s.append([Txn(nxt, b"after-crash")])
        s.sync()
    with DiskStore(path, **opts) as s:
        st2 = s.recover()
        assert st2.txns[-1] == Txn(nxt, b"after-crash")
        assert st2.txns[:-1] == st.txns


def recycled_rolls(tmp_path, ops: list[Op], opts: dict) -> int:
    """How many segments the workload makes from recycled files."""
    d = str(tmp_path / "recycled")
    seen = set()
    real_roll = txnlog.TxnLog._roll

    def roll(log: txnlog.TxnLog, nbytes: int) -> txnlog._Active:
        act = real_roll(log, nbytes)
        if act.info.recycled:
            seen.add((log.generation, act.info.seq))
        return act

    txnlog.TxnLog._roll = roll  # type: ignore[method-assign]
    try:
        j, err, store = run(d, ops, None, opts)
    finally:
        txnlog.TxnLog._roll = real_roll  # type: ignore[method-assign]
    assert err is None, err
    store.close()
    shutil.rmtree(d)
    return len(seen)


def count_points(tmp_path, ops: list[Op], opts: dict = OPTS) -> int:
    d = str(tmp_path / "count")
    inj = Injector(os.path.abspath(d))
    j, err, store = run(d, ops, inj, opts)
    assert err is None, err
    store.close()
    shutil.rmtree(d)
    return inj.count


# 6, 7: growing (not preallocated) segments; 24, 28: recycled segments (checked below)
@pytest.mark.parametrize("seed", [1, 2, 3, 6, 7, *RECYCLE_SEEDS])
@pytest.mark.parametrize("action", ["crash", "powercut", "error"])
def test_fault_at_every_point(tmp_path, fast_sync, seed, action):
    ops, models = workload(seed)
    opts = opts_for(seed)
    assert any(type(op).__name__ == "Install" for op in ops) and any(
        type(op).__name__ == "Save" for op in ops
    )
    n = count_points(tmp_path, ops, opts)
    assert n > 50
    if seed in RECYCLE_SEEDS:
        assert recycled_rolls(tmp_path, ops, opts) >= 2, "the workload no longer recycles segments"
    rng = random.Random(seed * 1000 + len(action))
    for k in range(n):
        d = str(tmp_path / f"{action}{k}")
        inj = Injector(os.path.abspath(d), at=k, action=action, rng=random.Random(rng.random()))
        j, err, store = run(d, ops, inj, opts)
        assert inj.fired and err is not None, f"point {k} never reached"
        what = f"{action} at point {k} during op {j} ({ops[j] if 0 <= j < len(ops) else 'open'})"
        if action == "error":
            assert isinstance(err, StorageError), what
            if store is not None and j >= 0 and not store._closed:
                for call in (store.recover, store.sync, lambda s=store: s.write_current_epoch(99)):
                    with pytest.raises(StorageError):
                        call()
        else:
            assert isinstance(err, Crash), what
        if store is not None:
            store.close()
        if action == "powercut":
            inj.power_fail()
        check_reopen(d, ops, models, j, what, opts)
        shutil.rmtree(d)


@pytest.mark.parametrize("seed", [4, 5])
def test_crash_during_recovery_repairs(tmp_path, fast_sync, seed):
    """A crash while opening (cutting a torn tail, finishing an install) is itself recoverable."""
    ops, models = workload(seed)
    n = count_points(tmp_path, ops)
    rng = random.Random(seed)
    for k in range(0, n, 2):
        d = str(tmp_path / f"c{k}")
        inj = Injector(os.path.abspath(d), at=k, action="crash", rng=random.Random(rng.random()))
        j, err, store = run(d, ops, inj)
        if store is not None:
            store.close()
        # Count the points of a clean reopen on a copy, then crash the real reopen at one of them.
        probe = d + "-probe"
        shutil.copytree(d, probe)
        pinj = Injector(os.path.abspath(probe))
        with pinj.installed():
            DiskStore(probe, **OPTS).close()
        shutil.rmtree(probe)
        if pinj.count:
            inj2 = Injector(
                os.path.abspath(d), at=rng.randrange(pinj.count), action="crash", rng=random.Random(k)
            )
            with pytest.raises(Crash), inj2.installed():
                DiskStore(d, **OPTS)
        check_reopen(d, ops, models, j, f"crash at {k}, then in reopen")
        shutil.rmtree(d)


@pytest.mark.parametrize("fn", ["fdatasync", "fsync"])
def test_fsync_failure_makes_store_unusable(tmp_path, monkeypatch, fn):
    s = DiskStore(tmp_path / "s", segment_bytes=4096)
    s.append([Txn(Zxid.of(1, 1), b"a")])
    s.sync()  # segment exists now: later syncs only fdatasync it

    def boom(fd):  # type: ignore[no-untyped-def]
        raise OSError(errno.EIO, "injected")

    monkeypatch.setattr(os, fn, boom)
    s.append([Txn(Zxid.of(1, 2), b"b")])
    with pytest.raises(StorageError):
        if fn == "fdatasync":
            s.sync()
        else:
            s.write_current_epoch(1)
    monkeypatch.undo()
    for call in (
        s.sync,
        s.recover,
        lambda: s.append([Txn(Zxid.of(1, 3), b"c")]),
        lambda: s.truncate(Zxid.of(1, 1)),
        lambda: s.write_accepted_epoch(1, 1),
        lambda: s.write_current_epoch(1),
        lambda: s.save_snapshot(Zxid.of(1, 1), b"s"),
        lambda: s.install_snapshot(Zxid.of(1, 1), b"s"),
    ):
        with pytest.raises(StorageError):
            call()
    s.close()
    with DiskStore(tmp_path / "s", segment_bytes=4096) as s2:
        assert [t.zxid for t in s2.recover().txns][:1] == [Zxid.of(1, 1)]


def test_snapshot_write_failure_leaves_old_snapshot(tmp_path, monkeypatch):
    s = DiskStore(tmp_path / "s")
    s.append([Txn(Zxid.of(1, c), b"x") for c in range(1, 5)])
    s.sync()
    s.save_snapshot(Zxid.of(1, 2), b"two")
    real = os.replace

    def failing_replace(src, dst):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "injected")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(StorageError):
        s.save_snapshot(Zxid.of(1, 4), b"four")
    monkeypatch.setattr(os, "replace", real)
    s.close()
    with DiskStore(tmp_path / "s") as s2:
        st = s2.recover()
        assert st.snapshot == b"two" and [t.zxid for t in st.txns] == [Zxid.of(1, 3), Zxid.of(1, 4)]


def test_truncation_cut_is_durable_before_rezeroing(tmp_path, monkeypatch):
    """The cut is an ftruncate fsynced on its own: were the zeros written first and only partly
    persisted, old records would survive beyond a zero gap and the log would read as corrupt."""
    monkeypatch.setattr(txnlog, "BACKGROUND_PREALLOCATION", False)  # its writes would interleave
    s = DiskStore(tmp_path / "s", segment_bytes=8192)
    s.append([Txn(Zxid.of(1, c), b"v" * 100) for c in range(1, 20)])
    s.sync()
    calls: list[str] = []
    for name in ("ftruncate", "fsync", "pwrite", "pwritev", "fdatasync", "unlink"):
        real = getattr(os, name)

        def spy(*a, _real=real, _name=name):  # type: ignore[no-untyped-def]
            calls.append(_name)
            return _real(*a)

        monkeypatch.setattr(os, name, spy)
    s.truncate(Zxid.of(1, 5))
    s.append([Txn(Zxid.of(2, 1), b"w")])
    s.sync()
    monkeypatch.undo()
    i = calls.index("ftruncate")
    assert calls[i + 1] == "fsync" and not {"pwrite", "pwritev"} & set(calls[:i])
    assert calls[-2:] == ["pwritev", "fdatasync"]  # then the group commit: one write, one fdatasync
    s.close()
