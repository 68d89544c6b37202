"""A tree image, encoded in slices while the tree moves on, is the snapshot of the moment it was
taken: copy-on-write keeps every changed, removed or new znode and session out of it."""

from __future__ import annotations

import random

import pytest
from tree_harness import Leader

from zabray.tree import (
    OPEN_ACL,
    READ_ACL,
    DataTree,
    close_session,
    create,
    create_session,
    delete,
    set_acl,
    set_data,
)
from zabray.tree import image as image_mod
from zabray.tree.image import TreeImage


def random_write(rng: random.Random, ld: Leader, n: int) -> None:
    """One of every kind of change the tree applies, on a few overlapping paths (a failed one is
    an error txn, which changes nothing: fine)."""
    p = f"/a{rng.randrange(6)}"
    kind = rng.randrange(7)
    if kind == 0:
        ld.write(create(p, b"c%d" % n, time_ms=n))
    elif kind == 1:
        ld.write(create(p + f"/k{rng.randrange(3)}", b"x" * rng.randrange(50), time_ms=n))
    elif kind == 2:  # (null data now and then: an image keeps it apart from empty data)
        ld.write(set_data(p, None if n % 4 == 0 else b"s%d" % n, time_ms=n))
    elif kind == 3:
        ld.write(delete(p + f"/k{rng.randrange(3)}", time_ms=n) if rng.random() < 0.7 else delete(p, time_ms=n))
    elif kind == 4:
        ld.write(set_acl(p, rng.choice([OPEN_ACL, READ_ACL]), time_ms=n))
    elif kind == 5:
        sid = 100 + rng.randrange(4)
        if ld.write(create_session(sid, 4000 + n, time_ms=n)).ok:
            ld.write(create(f"/e{sid}", ephemeral=True, session_id=sid, time_ms=n))
    else:
        ld.write(close_session(100 + rng.randrange(4), time_ms=n))


def grown(rng: random.Random, writes: int) -> Leader:
    ld = Leader()
    # A quota on /a1: the tree rewrites its stats znode in place as /a1's subtree changes.
    for path in ("/zookeeper/quota/a1", "/zookeeper/quota/a1/zookeeper_limits", "/zookeeper/quota/a1/zookeeper_stats"):
        ld.write(create(path, b"", time_ms=0)).unwrap()
    for n in range(writes):
        random_write(rng, ld, n)
    return ld


def encode_while_writing(ld: Leader, rng: random.Random, budget: int) -> tuple[bytes, bytes]:
    """(the snapshot when the image was taken, the image's bytes after encoding it a slice at a
    time with writes between the slices)."""
    expected = ld.tree.snapshot()
    img = ld.tree.image()
    n = 10_000
    while (data := img.encode(budget)) is None:
        for _ in range(rng.randrange(4)):
            n += 1
            random_write(rng, ld, n)
    return expected, b"".join(data)


@pytest.mark.parametrize("seed", range(40))
def test_an_image_encoded_in_slices_is_the_tree_when_it_was_taken(seed: int) -> None:
    rng = random.Random(seed)
    ld = grown(rng, 60)
    expected, data = encode_while_writing(ld, rng, budget=rng.choice([1, 2, 5]))
    assert data == expected
    restored = DataTree()
    restored.restore(data)
    assert restored.snapshot() == expected
    # Once done, the image is the tree's no longer: the tree's changes since are its own.
    assert ld.tree._image is None


def test_without_copy_on_write_the_image_would_show_later_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: a tree that does not tell its image of changes (a planted bug)
    gives an image that is not the snapshot of any one moment, or that cannot find a removed
    znode."""
    monkeypatch.setattr(TreeImage, "keep", lambda self, path, node: None)
    wrong = 0
    for seed in range(10):
        rng = random.Random(seed)
        ld = grown(rng, 60)
        try:
            expected, data = encode_while_writing(ld, rng, budget=1)
        except KeyError:
            wrong += 1
        else:
            wrong += data != expected
    assert wrong >= 8


def test_a_slice_stops_at_the_byte_bound_for_large_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_mod, "SLICE_BYTES", 10_000)
    ld = Leader()
    for i in range(20):
        ld.write(create(f"/big{i:02d}", b"v" * 4_000, time_ms=i))
    expected = ld.tree.snapshot()
    img = ld.tree.image()
    slices = 1
    while (data := img.encode(1_000)) is None:
        slices += 1
    assert b"".join(data) == expected
    assert slices >= 7  # a slice ends once past 10,000 bytes: three 4,000-byte values at most
    # Handed back as the header and the slices, never copied whole (a large tree's would hold
    # the replica's loop): the disk writes the parts as they are.
    assert len(data) == slices + 1


def test_restoring_the_tree_makes_its_image_stale() -> None:
    ld = grown(random.Random(1), 30)
    other = grown(random.Random(2), 30)
    img = ld.tree.image()
    assert img.encode(1) is None
    ld.tree.restore(other.tree.snapshot())
    assert img.stale
    with pytest.raises(RuntimeError, match="stale"):
        img.encode(1)
    # The restored tree takes a fresh image of its new content.
    assert b"".join(ld.tree.image().encode(10_000) or ()) == other.tree.snapshot()


def test_a_newer_image_makes_the_older_stale() -> None:
    ld = grown(random.Random(3), 30)
    first = ld.tree.image()
    second = ld.tree.image()
    assert first.stale and not second.stale
    assert b"".join(second.encode(10_000) or ()) == ld.tree.snapshot()
