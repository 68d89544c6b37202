"""A snapshot restored in slices (``DataTree.restoring``): the same tree as in one go, the tree
untouched until ``install``, and every check of the format made whatever the slice size."""

from __future__ import annotations

import pytest
from test_tree_snapshot import node, populated, rows, wrap

from zabray.errors import CorruptionError
from zabray.tree import DataTree, create
from zabray.tree.restore import HASH_SLICE


def test_slices_of_any_size_restore_the_tree_one_go_does() -> None:
    ld = populated()
    snap = ld.tree.snapshot()
    for budget in (1, 2, 5, 1000):
        t = DataTree()
        r = t.restoring(snap)
        calls = 1
        while not r.decode(budget):
            calls += 1
            assert t.digest() == DataTree().digest(), "the tree changed before install"
        r.install()
        assert t.snapshot() == snap and t.digest() == ld.tree.digest()
        assert calls >= 1 + -(-len(t) // budget)  # the checksum's call, then at most `budget` rows a call


def test_the_checksum_is_checked_a_slice_at_a_time_before_any_row() -> None:
    ld = populated()
    for i in range(3 * HASH_SLICE // 2 // 1_000_000 + 1):  # a body of 1.5 slices of checksum
        assert ld.write(create(f"/big{i}", b"x" * 1_000_000, time_ms=20)).ok
    snap = ld.tree.snapshot()
    bad = bytearray(snap)
    bad[-5] ^= 1  # in the sessions, at the end of the body
    r = DataTree().restoring(bytes(bad))
    assert r.decode(1 << 30) is False  # a first slice of the body's checksum: nothing to tell yet
    with pytest.raises(CorruptionError, match="checksum"):
        r.decode(1 << 30)
    with pytest.raises(CorruptionError):
        r.decode(1 << 30)  # a failed restore stays failed


def test_an_inconsistency_found_late_leaves_the_tree_as_it_was() -> None:
    t = populated().tree
    before = t.snapshot()
    late = wrap([0, rows(*(node(f"/a{i:03d}") for i in range(50)), node("/b", owner=5)), []])
    r = t.restoring(late)
    with pytest.raises(CorruptionError, match="owner session"):
        while not r.decode(7):
            pass
    with pytest.raises(RuntimeError):
        r.install()
    assert t.snapshot() == before


def test_a_malformed_wrapper_is_refused_at_once() -> None:
    snap = populated().tree.snapshot()
    for bad in (b"", b"\xc1", snap[:20], snap + b"x", snap[:-1]):
        with pytest.raises(CorruptionError):
            DataTree().restoring(bad)


def test_a_stale_restore_is_not_installed() -> None:
    t = DataTree()
    r = t.restoring(populated().tree.snapshot())
    while not r.decode(100):
        pass
    r.stale = True
    with pytest.raises(RuntimeError):
        r.install()
    assert t.digest() == DataTree().digest()
