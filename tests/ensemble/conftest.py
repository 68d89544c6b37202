"""Real Ray (a local cluster of the suite's own, shared across modules), real TCP on 127.0.0.1, real fsync."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.polling import wait_until  # noqa: F401  (re-exported to the modules that import it from here)
from zabray.driver.ensemble import Ensemble
from zabray.driver.workload import check_histories

pytestmark = pytest.mark.ray


_shared: dict[str, str] = {}
"""The GCS address of the suite's shared local Ray, once started."""


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    """A local Ray cluster of the suite's own, started once and shared by the modules that ask
    for it: a Ray start costs seconds, and every test stops the ensembles it started. A module
    that needs another Ray (a planted flag in its runtime_env, several nodes) shuts this one
    down and starts its own; the next module that asks for the shared one gets a new one."""
    import ray

    if ray.is_initialized() and ray.get_runtime_context().gcs_address == _shared.get("gcs"):
        yield
        return
    if ray.is_initialized():
        ray.shutdown()
    os.environ.pop("RAY_ADDRESS", None)
    # address="local": always a cluster of our own, even if `ray start` left one running here
    # (ray.init() would join that one, and refuse num_cpus).
    ray.init(address="local", namespace="zabray", include_dashboard=False, log_to_driver=False, num_cpus=2)
    _shared["gcs"] = ray.get_runtime_context().gcs_address
    yield


@pytest.fixture
def start(ray_local: None, tmp_path: Path) -> Iterator[Callable[..., Ensemble]]:
    made: list[Ensemble] = []

    def _start(replicas: int = 3, observers: int = 0, **overrides: object) -> Ensemble:
        name = f"t{len(made)}-{os.getpid()}-{time.monotonic_ns() % 10**6}"
        ens = Ensemble.start(replicas, observers, name=name, data_dir=str(tmp_path / "data"),
                             run_dir=str(tmp_path / f"run-{name}"), **overrides)
        made.append(ens)
        return ens

    yield _start
    for ens in made:
        try:
            ens.stop()
        except Exception:
            pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep each phase's report on the test item (``item.rep_call``), for ``shared3``."""
    outcome = yield
    rep = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"rep_{rep.when}", rep)


@pytest.fixture(scope="module")
def _shared_slot(ray_local: None) -> Iterator[dict[str, Ensemble]]:
    slot: dict[str, Ensemble] = {}
    yield slot
    _drop(slot)


def _drop(slot: dict[str, Ensemble]) -> None:
    ens = slot.pop("ens", None)
    if ens is not None:
        try:
            ens.stop()
        except Exception:
            pass


@pytest.fixture
def shared3(_shared_slot: dict[str, Ensemble], request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    """A 3-replica ensemble of the default config that a module's tests take turns on.

    Starting one costs five Ray workers, seconds of CPU each; a crash-point test needs a healthy
    ensemble, not a new one. Each test gets it with every replica up and an established leader;
    after a test that passed, links are healed and every crash point disarmed (one armed on a
    replica that never reached it stays armed otherwise). A test that failed, or left a replica
    down, has it replaced, so no failure leaks into the next test.
    """
    ens = _shared_slot.get("ens")
    if ens is not None and (ens.leader() is None or not all(s.alive for s in ens.status())):
        _drop(_shared_slot)
        ens = None
    if ens is None:
        tmp = tmp_path_factory.mktemp("shared")
        name = f"shared-{os.getpid()}-{time.monotonic_ns() % 10**6}"
        ens = Ensemble.start(3, name=name, data_dir=str(tmp / "data"), run_dir=str(tmp / "run"))
        _shared_slot["ens"] = ens
    yield ens
    rep = getattr(request.node, "rep_call", None)
    if rep is None or not rep.passed or not all(s.alive for s in ens.status()):
        _drop(_shared_slot)
        return
    ens.heal()
    for sid in ens.info["voters"]:
        ens.arm_crashes(sid, [])


def converged(ens: Ensemble, sids: list[int] | None = None) -> bool:
    st = [s for s in ens.status() if sids is None or s.sid in sids]
    return all(s.alive for s in st) and len({s.applied for s in st}) == 1 and all(s.applied > 0 for s in st)


def assert_no_loss(ens: Ensemble, acked: dict[int, str]) -> None:
    problems = check_histories(ens.histories(), acked)
    assert not problems, "\n".join(problems[:10])
