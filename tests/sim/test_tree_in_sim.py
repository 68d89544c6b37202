"""The ZooKeeper data tree as the replicated state machine under the simulator: leaders prepare
requests against the future state, and replicas that delivered the same txns hold the same tree."""

from __future__ import annotations

import random

from zabray.sim.simulator import SimOptions, Simulation
from zabray.tree import DataTree, create, delete, set_data


def requests(rng: random.Random, n: int) -> bytes:
    """Creates, sequential creates, sets and deletes on a few paths, many of which conflict."""
    path = f"/n{rng.randrange(4)}"
    kind = rng.randrange(4)
    if kind == 0:
        return create(path, b"d%d" % n, ephemeral=False, sequential=False, time_ms=n)
    if kind == 1:
        return create(path + "/s-", b"", ephemeral=False, sequential=True, time_ms=n) if rng.random() < 0.5 \
            else create("/q-", b"", ephemeral=False, sequential=True, time_ms=n)
    if kind == 2:
        return set_data(path, b"v%d" % n, version=rng.choice([-1, 0, 1]), time_ms=n)
    return delete(path, version=-1, time_ms=n)


def test_random_schedules_with_the_data_tree_keep_every_property_and_agree() -> None:
    failures = []
    for seed in range(60):
        sim = Simulation(seed, SimOptions(voters=3, observers=1, steps=1500, app_factory=DataTree,
                                          value_factory=requests))
        r = sim.run()
        if not r.ok:
            failures.append(f"seed {seed}: {r.violations[0]}")
            continue
        by_zxid: dict[int, set[str]] = {}
        for rep in sim.replicas.values():
            assert rep.node is not None
            by_zxid.setdefault(rep.node.applied, set()).add(rep.node.app.digest())  # type: ignore[attr-defined]
        assert all(len(d) == 1 for d in by_zxid.values()), f"seed {seed}: replicas at one zxid disagree"
    assert not failures, "\n".join(failures)
    # The requests really built trees: sequential nodes exist on some replica of the last run.
    assert any(rep.node is not None and len(rep.node.app) > 1 for rep in sim.replicas.values())  # type: ignore[arg-type]
