"""Several Ray nodes (``ray.cluster_utils.Cluster``): one replica per node, and a restarted
replica goes back to the node that holds its data directory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.driver.conftest import converged, wait_until
from zabray.driver.ensemble import Ensemble
from zabray.driver.rayhead import WORKER_NICENESS
from zabray.errors import NotRunningError

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    os.environ.pop("RAY_ADDRESS", None)
    # Nodes started as a user's `ray start` would be, whose workers run at nice 15: the
    # replicas then ask for nice 0 themselves (actors.controller._replica_env).
    unniced = os.environ.pop(WORKER_NICENESS, None)
    try:
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        workers = [c.add_node(num_cpus=1) for _ in range(2)]
        c.wait_for_nodes()
    finally:
        if unniced is not None:
            os.environ[WORKER_NICENESS] = unniced
    ray.init(address=c.address, namespace="zabray", log_to_driver=False)
    yield c, workers
    ray.shutdown()
    c.shutdown()


def test_one_replica_per_node_and_a_restart_returns_to_its_node(cluster, tmp_path: Path) -> None:
    c, workers = cluster
    ens = Ensemble.start(3, name="multinode", data_dir=str(tmp_path / "data"), run_dir=str(tmp_path / "run"))
    try:
        ens.wait_for_leader(60)
        nodes = {s.sid: s.node for s in ens.status()}
        assert len(set(nodes.values())) == 3, nodes
        assert [s.report.nice if s.report else None for s in ens.status()] == [0, 0, 0]
        ens.submit_many([b"x"] * 50)
        # Prefer a replica that does not share the controller's (head) node.
        sid = next(s for s in sorted(nodes) if nodes[s] != c.head_node.node_id)
        ens.kill(sid)
        ens.submit_many([b"y"] * 50)
        ens.restart(sid)
        after = {s.sid: s.node for s in ens.status()}
        assert after[sid] == nodes[sid]
        wait_until(lambda: converged(ens), timeout=60, what="the restarted replica catching up on its node")

        # Its node disappears: a plain restart refuses, a fresh one rebuilds elsewhere from the leader.
        victim = next(w for w in workers if w.node_id == nodes[sid])
        ens.kill(sid)
        c.remove_node(victim)
        with pytest.raises(NotRunningError, match="fresh=True"):
            ens.restart(sid)
        ens.restart(sid, fresh=True)
        assert {s.sid: s.node for s in ens.status()}[sid] != nodes[sid]
        ens.submit(b"z")
        wait_until(lambda: converged(ens), timeout=60, what="the rebuilt replica catching up")
    finally:
        ens.stop()
