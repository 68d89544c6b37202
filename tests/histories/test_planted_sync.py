"""A deliberately broken learner is caught by the ZOOKEEPER-4394 scenario: with the planted bug
``sync_drop`` (``histories.planted``, injected through this module's own Ray cluster) a follower
forgets the PROPOSALs it receives between NEWLEADER and UPTODATE, so it delivers around a
committed txn, or stays behind it for good. The same scenario passes without the plant (tests/driver/test_scenarios.py)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.histories import planted
from zabray.driver.ensemble import Ensemble
from zabray.driver.scenario import run
from zabray.errors import ScenarioError
from zabray.replay.scenario import load

pytestmark = pytest.mark.ray

SCENARIO = Path(__file__).resolve().parents[2] / "configs" / "scenarios" / "zk-4394-commit-during-sync.yaml"


@pytest.fixture(scope="module")
def planted_ray() -> Iterator[None]:
    import ray

    if ray.is_initialized():
        ray.shutdown()
    os.environ.pop("RAY_ADDRESS", None)
    ray.init(address="local", namespace="zabray", include_dashboard=False, log_to_driver=False, num_cpus=2,
             runtime_env=planted.runtime_env("sync_drop"))
    yield
    ray.shutdown()


def test_the_4394_scenario_catches_a_learner_that_drops_proposals_during_sync(planted_ray: None,
                                                                              tmp_path: Path) -> None:
    sc = load(SCENARIO)
    ens = Ensemble.start(sc.replicas, 0, name=f"plant-{os.getpid()}-{time.monotonic_ns() % 10**6}",
                         data_dir=str(tmp_path / "data"), run_dir=str(tmp_path / "run"), **dict(sc.config))
    try:
        ens.wait_for_leader(30)
        try:
            result = run(ens, sc, check=True)
        except ScenarioError as e:
            # The plant shows in one of two ways, as the messages interleave: the learner delivers
            # around the txns it forgot (caught below), or it stays behind them for good, so the
            # ensemble never converges. This is the second: the follower that synced is stuck
            # at the last txn before the window while the others went on.
            applied = re.findall(r"(\d+)@(\d+:\d+)", str(e))
            assert "converged() still false" in str(e) and len({z for _, z in applied}) == 2, e
            return
    finally:
        ens.stop(wipe=True)
    assert result.proofs[0].ok, result.proofs[0].text  # the window was reached...
    assert not result.ok  # ...and what the learner did in it was caught
    assert any("missing on replica" in p for p in result.problems), result.problems
    assert result.check == 1  # zabray check finds the skipped txn in the traces too
