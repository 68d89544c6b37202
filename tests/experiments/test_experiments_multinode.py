"""An experiment on several Ray nodes (``ray.cluster_utils.Cluster``): replicas one per node, the
load clients on a node of their own, and a node taken away mid-run shows up in the marks."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.polling import wait_until
from zabray.experiments import Experiment
from zabray.experiments.runner import run

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    os.environ.pop("RAY_ADDRESS", None)
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    workers = [c.add_node(num_cpus=1) for _ in range(3)]
    c.wait_for_nodes()
    ray.init(address=c.address, namespace="zabray", log_to_driver=False)
    yield c, workers
    ray.shutdown()
    c.shutdown()


def test_clients_on_their_own_node_and_a_lost_node_is_marked(cluster: Any, tmp_path: Path) -> None:
    c, workers = cluster
    removed: dict[str, Any] = {}

    def take_a_follower_node_away(ens: Any) -> None:
        def go() -> None:
            # Some load first (the run lasts 4.5 s): a few hundred writes committed.
            wait_until(lambda: max(int(s.applied) & 0xFFFFFFFF for s in ens.status()) >= 200, 4, "some load first")
            leader = ens.leader()
            by_node = {s.node: s.sid for s in ens.status()}
            victim = next(w for w in workers if w.node_id in by_node and by_node[w.node_id] != leader)
            removed.update(node=victim.node_id, sid=by_node[victim.node_id])
            c.remove_node(victim)

        threading.Thread(target=go, daemon=True).start()

    exp = Experiment.from_dict({"name": "multinode", "service": "broadcast", "voters": 3, "clients": 2,
                                "in_flight": 4, "warmup": 0.5, "duration": 4.0,
                                "ensemble": {"data_dir": str(tmp_path / "data")}})
    res = run(exp, out=str(tmp_path / "runs"), progress=False, at_start=take_a_follower_node_away)

    pl = res.placement
    replica_nodes = set(pl[pl.role == "voter"].node)
    client_nodes = set(pl[pl.role == "client"].node)
    assert len(replica_nodes) == 3, pl
    assert client_nodes and not client_nodes & replica_nodes, pl
    assert removed, "the node was never removed"
    lost = res.marks[res.marks.what == "node lost"]
    assert list(lost.replicas) == [str(removed["sid"])], res.marks
    row = res.df.iloc[0]
    assert row.ops_ok > 0 and row.clients_lost == 0 and row.nodes == 4
    assert (res.run_dir / "results.parquet").exists()
    assert any(p.name.startswith("client-exp") for p in (Path(res.runs[0]) / "trace").iterdir())
