"""kazoo, unchanged, against real ``service: zookeeper`` ensembles (real Ray, real TCP, real fsync).

``zk``: one 3-replica ensemble per module for the non-destructive tests (containers swept every
100 ms, sessions may be as short as 1 s). ``kazoo``: a factory of started kazoo clients on an
ensemble, each stopped and closed at teardown. ``start``: a test's own ensemble for destructive
tests (see tests/client/conftest.py).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from tests.client.conftest import start  # noqa: F401
from tests.driver.conftest import ray_local, wait_until  # noqa: F401  (shared fixtures and helpers)
from zabray.driver.ensemble import Ensemble

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


_DIES_WITHOUT_CLOSING = textwrap.dedent("""
    import sys
    from kazoo.client import KazooClient
    c = KazooClient(hosts=sys.argv[1], timeout=float(sys.argv[3]))
    c.start(timeout=60)
    c.create(sys.argv[2], b"", ephemeral=True, makepath=True)
    print(c.client_id[0], c.client_id[1].hex(), flush=True)
    sys.stdin.read()  # until the test kills this process: no close, no more pings
""")


class DyingClient:
    """A kazoo client in a process of its own that owns the ephemeral ``path``; leaving the
    ``with`` block kills the process (SIGKILL, by its pid): its session is never closed and
    stops pinging, so only the leader's expiry can end it. ``timeout`` (s) is its session
    timeout: long enough that a loaded machine does not expire it while it lives."""

    def __init__(self, hosts: str, path: str, timeout: float = 3.0) -> None:
        self.args = [sys.executable, "-c", _DIES_WITHOUT_CLOSING, hosts, path, str(timeout)]
        self.session = 0
        self.password = b""

    def __enter__(self) -> DyingClient:
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            self.kill()
            raise AssertionError("the kazoo client process did not start its session")
        session, password = line.split()
        self.session, self.password = int(session), bytes.fromhex(password)
        return self

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def __exit__(self, *exc: object) -> None:
        self.kill()


__all__ = ["DyingClient", "KazooFactory", "wait_until"]
