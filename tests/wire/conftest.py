from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from zabray.driver import apache_zk


@pytest.fixture(scope="module")
def apache_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[apache_zk.ApacheZooKeeper]:
    """A standalone Apache ZooKeeper 3.8 on loopback (Debian's package), stopped by pid."""
    if not apache_zk.available():
        pytest.fail("Apache ZooKeeper is not installed: bin/bootstrap installs Debian's zookeeper")
    root = Path(tmp_path_factory.mktemp("apache-zk"))
    with apache_zk.ApacheZooKeeper(root, servers=1) as zk:
        yield zk
