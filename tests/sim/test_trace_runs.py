"""The core's deliver records (one per run of consecutive zxids) say exactly what it delivered.

Under crashes, partitions and snapshots a replica's deliveries cross epochs and restart after
snapshots; the trace, expanded (``zabray.trace.expand``), must list the same (zxid, digest) per
replica incarnation, in the same order, as the deliveries the simulator saw."""

from __future__ import annotations

from typing import Any

import pytest

from zabray.sim.simulator import SimOptions, Simulation
from zabray.trace import records as trace


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


@pytest.mark.parametrize("seed", [6, 8])  # schedules with every one of those faults
def test_faults_are_traced_as_the_real_controller_traces_them(seed: int) -> None:
    """Every crash, restart, partition and broken channel is a fault row, so a simulated run's
    figures draw it; each partition ends by the final heal (none is left open to the end)."""
    rows: list[dict[str, Any]] = []
    sim = Simulation(seed, SimOptions(steps=1500), trace_writer=rows.append)
    result = sim.run()
    assert result.ok, result.violations
    faults = [r for r in rows if r["kind"] == "fault"]
    by = {k: [r for r in faults if r["fault"] == k] for k in ("kill", "restart", "partition", "cut")}
    assert len(by["kill"]) == sim.fault_counts["crash"] > 0
    assert len(by["cut"]) == sim.fault_counts["break"] > 0
    restarts = sum(r.incarnation for r in sim.replicas.values())  # every start after the first
    assert len(by["restart"]) == restarts > 0
    ends: dict[tuple[str, float], float | None] = {}
    for r in by["partition"]:
        ends[(r["target"], r["start"])] = r["end"] if r["end"] is not None else ends.get((r["target"], r["start"]))
    assert len(ends) == sim.fault_counts["partition"] > 0
    assert all(e is not None and e >= s for (_, s), e in ends.items())
