"""kazoo, unchanged, against real ``service: zookeeper`` ensembles (real Ray, real TCP, real fsync).

``zk``: one 3-replica ensemble per module for the non-destructive tests (containers swept every
100 ms, sessions may be as short as 1 s). ``kazoo``: a factory of started kazoo clients on an
ensemble, each stopped and closed at teardown. ``start``: a test's own ensemble for destructive
tests (see tests/zk/conftest.py).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.ensemble.conftest import ray_local, wait_until  # noqa: F401  (shared fixtures and helpers)
from tests.zk.conftest import start  # noqa: F401
from zabray.ensemble import Ensemble

pytestmark = pytest.mark.ray

ZK_OVERRIDES: dict[str, Any] = {"zk_container_check_ms": 100, "zk_min_session_timeout_ms": 1000}


def _name() -> str:
    return f"kz-{os.getpid()}-{time.monotonic_ns() % 10**8}"


@pytest.fixture(scope="module")
def zk(ray_local: None, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Ensemble]:
    """One 3-replica ZooKeeper ensemble shared by a module's non-destructive tests, with the
    module's ``OBSERVERS`` observers (default none)."""
    tmp = tmp_path_factory.mktemp("kz")
    ens = Ensemble.start(3, getattr(request.module, "OBSERVERS", 0), name=_name(), data_dir=str(tmp / "data"),
                         run_dir=str(tmp / "run"), service="zookeeper", trace=False, **ZK_OVERRIDES)
    ens.wait_for_leader()
    yield ens
    ens.stop()


KazooFactory = Callable[..., KazooClient]


@pytest.fixture
def kazoo() -> Iterator[KazooFactory]:
    """``kazoo(ens, timeout=10.0, hosts=None, **kw)``: a started client; stopped at teardown."""
    made: list[KazooClient] = []

    def _make(ens: Ensemble, timeout: float = 10.0, hosts: str | None = None, **kw: Any) -> KazooClient:
        c = KazooClient(hosts=hosts or ens.connect_string(), timeout=timeout,
                        logger=logging.getLogger("kazoo.test"), **kw)
        made.append(c)
        c.start(timeout=60)
        return c

    yield _make
    for c in made:
        try:
            c.stop()
            c.close()
        except Exception:
            pass


__all__ = ["KazooFactory", "wait_until"]
