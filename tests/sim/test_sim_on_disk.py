"""The simulator on top of the real on-disk store: the core and the disk checked together.

Each replica keeps its log, epochs and snapshots in a ``DiskStore`` directory; a crash closes
the store without syncing (dropping what was written but not fsynced) and a restart recovers
from the files, so every recovery path of ``storage/`` runs under the simulator's checker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.disk import DiskStore
from zabray.sim.simulator import SimOptions, run_seed

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("voters,observers", [(3, 0), (3, 1)])
def test_random_schedules_on_disk_keep_every_property(tmp_path: Path, voters: int, observers: int) -> None:
    failures = []
    crashes = 0
    for seed in range(40):
        root = tmp_path / f"{voters}-{observers}-{seed}"

        def store(sid: int, root: Path = root) -> DiskStore:
            return DiskStore(root / f"replica-{sid}", keep_snapshots=2, segment_bytes=64 << 10)

        r = run_seed(seed, SimOptions(voters=voters, observers=observers, steps=1500, store_factory=store,
                                      fault_rate=0.02))
        crashes += r.faults["crash"]
        if not r.ok:
            failures.append(f"seed {seed}: {r.violations[0]}")
    assert not failures, "\n".join(failures)
    assert crashes > 40
