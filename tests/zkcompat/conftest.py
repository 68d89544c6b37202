from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ensemble.conftest import ray_local  # noqa: F401  (module-scoped local Ray, for zabray servers)
from zabray.driver import apache_zk

ORACLE_FLAGS = (
    "-Dzookeeper.extendedTypesEnabled=true",  # createTTL, which zabray always serves
    # The container/TTL sweep runs on a wall-clock timer: off, so both servers delete nothing
    # behind the operation sequence's back (zabray's zk_container_check_ms=0 likewise).
    "-Dznode.container.checkIntervalMs=2000000000",
)


@pytest.fixture(scope="module")
def apache_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[apache_zk.ApacheZooKeeper]:
    """A standalone Apache ZooKeeper 3.8 on loopback (Debian's package), stopped by pid."""
    if not apache_zk.available():
        pytest.fail("Apache ZooKeeper is not installed: bin/bootstrap installs Debian's zookeeper")
    root = Path(tmp_path_factory.mktemp("apache-zk"))
    with apache_zk.ApacheZooKeeper(root, servers=1, jvm_flags=ORACLE_FLAGS) as zk:
        yield zk
