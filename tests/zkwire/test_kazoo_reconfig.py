"""ZooKeeper's reconfig through kazoo against a real ensemble with ``reconfig_enabled``:
/zookeeper/config as ZooKeeper shows it and its watch, and kazoo's reconfig and
``Ensemble.add_replica`` being the same operation (each sees what the other did; the replica a
kazoo reconfig removes is stopped as one ``remove_replica`` removes). kazoo's own reconfig tests
(``test_client.py::TestReconfig``) run unchanged through its harness in test_kazoo_suite.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.exceptions import NoAuthError

from tests.zkwire.conftest import KazooFactory, wait_until
from zabray.driver.ensemble import Ensemble

pytestmark = pytest.mark.ray

# kazoo's harness gives ZooKeeper's superuser the password "test" (super:test); zabray's digest of it.
SUPER = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
OVERRIDES: dict[str, Any] = {"reconfig_enabled": True, "zk_super_digest": SUPER,
                             "zk_four_letter_words": "*"}


@pytest.fixture(scope="module")
def rzk(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    tmp = tmp_path_factory.mktemp("rzk")
    ens = Ensemble.start(3, name="rzk", data_dir=str(tmp / "data"), run_dir=str(tmp / "run"), service="zookeeper",
                         trace=False, **OVERRIDES)
    ens.wait_for_leader()
    yield ens
    ens.stop()


def test_zookeeper_config_is_the_configuration_and_its_watch_fires(rzk: Ensemble, kazoo: KazooFactory) -> None:
    c = kazoo(rzk)
    data, stat = c.get("/zookeeper/config")
    text = data.decode()
    lines = text.splitlines()
    assert [ln.split("=")[0] for ln in lines] == ["server.1", "server.2", "server.3", "version"]
    version = int(lines[-1].split("=")[1], 16)
    # ZooKeeper's stat of /zookeeper/config: created at 0, mzxid the version, version -1
    assert (stat.czxid, stat.mzxid, stat.version, stat.aversion) == (0, version, -1, -1)
    for ln, s in zip(lines[:3], rzk.status(), strict=True):
        host, port = s.zk_client  # type: ignore[misc]
        assert ln.startswith(f"server.{s.sid}=") and ln.endswith(f":participant;{host}:{port}")
    fired = threading.Event()
    c.get("/zookeeper/config", watch=lambda ev: fired.set())
    su = kazoo(rzk, auth_data=[("digest", "super:test")])
    new, st = su.reconfig(joining=None, leaving=None, new_members=None)  # the same members, a new version
    assert fired.wait(10)
    assert st.mzxid > version and new.decode().splitlines()[:3] == lines[:3]
    with pytest.raises(NoAuthError):
        c.reconfig(joining=None, leaving=None, new_members=None)


def test_kazoo_sees_a_replica_the_ensemble_added_and_removed(rzk: Ensemble, kazoo: KazooFactory) -> None:
    c = kazoo(rzk)
    sid = rzk.add_replica("observer")
    data, _ = c.retry(lambda: (c.sync("/"), c.get("/zookeeper/config"))[1])
    line = next(ln for ln in data.decode().splitlines() if ln.startswith(f"server.{sid}="))
    assert ":observer;" in line
    su = kazoo(rzk, auth_data=[("digest", "super:test")])
    su.reconfig(joining=None, leaving=str(sid), new_members=None)
    wait_until(lambda: sid not in [s.sid for s in rzk.status()], timeout=60, what="the removed replica stopped")
    data, _ = c.retry(lambda: (c.sync("/"), c.get("/zookeeper/config"))[1])
    assert f"server.{sid}=" not in data.decode()
