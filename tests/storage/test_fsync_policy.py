"""``fsync: false`` really skips the group commit's fdatasync, and ``true`` really does one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.disk import DiskStore
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid


@pytest.mark.parametrize("fsync", [True, False])
def test_group_commit_fdatasync_follows_the_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool) -> None:
    store = DiskStore(tmp_path / "s", fsync=fsync, preallocate=False)
    calls = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real(fd))[1])
    store.append([Txn(Zxid.of(1, c), b"x" * 100) for c in range(1, 11)])
    store.sync()
    assert (len(calls) == 1) is fsync and (len(calls) == 0) is (not fsync)
    store.close()
    assert [t.zxid.counter for t in DiskStore(tmp_path / "s").recover().txns] == list(range(1, 11))
