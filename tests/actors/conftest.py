"""Replica servers run in the test's own process here, and a replica tunes the process's garbage
collector (``actors.gc_policy``): each test gives pytest its collector back."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from actors import gc_policy


@pytest.fixture(autouse=True)
def restore_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    if gc_policy._on_collection in gc.callbacks:
        gc.callbacks.remove(gc_policy._on_collection)
    gc_policy._freeze_due = False
