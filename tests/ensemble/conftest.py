"""Real Ray (a local cluster of the suite's own, shared across modules), real TCP on 127.0.0.1, real fsync."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from zabray.ensemble import Ensemble
from zabray.workload import check_histories

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


def wait_until(cond: Callable[[], bool], timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def converged(ens: Ensemble, sids: list[int] | None = None) -> bool:
    st = [s for s in ens.status() if sids is None or s.sid in sids]
    return all(s.alive for s in st) and len({s.applied for s in st}) == 1 and all(s.applied > 0 for s in st)


def assert_no_loss(ens: Ensemble, acked: dict[int, str]) -> None:
    problems = check_histories(ens.histories(), acked)
    assert not problems, "\n".join(problems[:10])
