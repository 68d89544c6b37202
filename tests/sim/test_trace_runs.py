"""The core's deliver records (one per run of consecutive zxids) say exactly what it delivered.

Under crashes, partitions and snapshots a replica's deliveries cross epochs and restart after
snapshots; the trace, expanded (``zabray.trace.expand``), must list the same (zxid, digest) per
replica incarnation, in the same order, as the deliveries the simulator saw."""

from __future__ import annotations

from typing import Any

import pytest

from zabray import trace
from zabray.sim.simulator import SimOptions, Simulation


@pytest.mark.parametrize("seed", [3, 11, 42])
def test_deliver_records_expand_to_the_deliveries_made(seed: int) -> None:
    rows: list[dict[str, Any]] = []
    sim = Simulation(seed, SimOptions(steps=1500), trace_writer=rows.append)
    seen: dict[tuple[int, int], list[tuple[int, str]]] = {}
    checker_delivered = sim.checker.delivered

    def delivered(replica: int, inc: int, zxid: int, digest: str, value: bytes) -> None:
        seen.setdefault((replica, inc), []).append((int(zxid), digest))
        checker_delivered(replica, inc, zxid, digest, value)

    sim.checker.delivered = delivered  # type: ignore[method-assign]
    result = sim.run()
    assert not sim.checker.violations, result
    traced: dict[tuple[int, int], list[tuple[int, str]]] = {}
    for r in (x for row in rows for x in trace.expand(row)):
        if r["kind"] == "deliver":
            traced.setdefault((r["replica"], r["inc"]), []).append((int(r["zxid"]), r["digest"]))
            assert r["epoch"] == r["zxid"] >> 32
    assert traced == seen
    runs = [len(row["digests"]) for row in rows if row["kind"] == "deliver"]
    assert max(runs) > 1 and sum(runs) == sum(map(len, seen.values()))
    assert len({e for k in seen for e in {z >> 32 for z, _ in seen[k]}}) > 1  # several epochs
