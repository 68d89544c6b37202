"""Real Ray, real TCP, real fsync: ``service: zookeeper`` ensembles (see tests/ensemble/conftest.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ensemble.conftest import ray_local, wait_until  # noqa: F401  (shared fixtures and helpers)
from zabray.driver.ensemble import Ensemble

pytestmark = pytest.mark.ray


def _name() -> str:
    return f"zk-{os.getpid()}-{time.monotonic_ns() % 10**8}"


@pytest.fixture(scope="module")
def zk(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    """One 3-replica ZooKeeper ensemble shared by a module's non-destructive tests."""
    tmp = tmp_path_factory.mktemp("zk")
    ens = Ensemble.start(3, name=_name(), data_dir=str(tmp / "data"), run_dir=str(tmp / "run"),
                         service="zookeeper", trace=False)
    ens.wait_for_leader()
    yield ens
    ens.stop()


@pytest.fixture
def start(ray_local: None, tmp_path: Path) -> Iterator[Callable[..., Ensemble]]:
    made: list[Ensemble] = []

    def _start(replicas: int = 3, **overrides: object) -> Ensemble:
        overrides.setdefault("service", "zookeeper")
        overrides.setdefault("trace", False)
        name = _name()
        ens = Ensemble.start(replicas, 0, name=name, data_dir=str(tmp_path / "data"),
                             run_dir=str(tmp_path / f"run-{name}"), **overrides)
        made.append(ens)
        ens.wait_for_leader()
        return ens

    yield _start
    for ens in made:
        try:
            ens.stop()
        except Exception:
            pass


def followers(ens: Ensemble) -> list[int]:
    leader = ens.wait_for_leader()
    return [s.sid for s in ens.status() if s.sid != leader and s.alive]


def session_on(ens: Ensemble, sid: int, timeout: float = 5) -> Any:
    """A session connected to replica ``sid``. ``replica=`` is only where a session tries first:
    on a loaded machine that try can time out and the session starts elsewhere, so ask again."""
    s = ens.session(timeout=timeout, replica=sid)

    def there() -> bool:
        nonlocal s
        if s.connected_to == sid:
            return True
        s.close()
        s = ens.session(timeout=timeout, replica=sid)
        return False

    wait_until(there, timeout=60, what=f"a session on replica {sid}")
    return s
