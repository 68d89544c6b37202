"""Read-only mode on real servers: a replica cut off from its quorum serves read-only sessions
(kazoo's ``read_only=True``, the Java client's ``canBeReadOnly``) as Apache ZooKeeper 3.8 does
with ``readonlymode.enabled``. The differential scenario (``differential.read_only_scenario``)
runs on a 3-server Apache ZooKeeper and a 3-replica zabray ensemble and must record the same;
a zabray-only test partitions a replica away from a quorum that keeps taking writes.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NotReadOnlyCallError

from tests.ensemble.conftest import wait_until
from tests.zkcompat.clients import CLASSPATH
from tests.zkcompat.differential import read_only_scenario
from zabray.driver import apache_zk
from zabray.driver.ensemble import Ensemble

pytestmark = [pytest.mark.zookeeper, pytest.mark.ray]
SOURCE = Path(__file__).resolve().parent / "java" / "ReadOnlyProbe.java"


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ro-java")
    subprocess.run(["javac", "-cp", "/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar",
                    "-d", str(out), str(SOURCE)], check=True, capture_output=True)
    return out


class ApacheServers:
    def __init__(self, zk: apache_zk.ApacheZooKeeper) -> None:
        self.zk = zk

    def address(self, i: int) -> str:
        return f"127.0.0.1:{self.zk.client_ports[i]}"

    def stop(self, i: int) -> None:
        self.zk.stop_server(i)

    def start(self, i: int) -> None:
        self.zk.start_server(i)


class ZabrayServers:
    def __init__(self, ens: Ensemble) -> None:
        self.ens = ens
        self.addrs = {s.sid: s.zk_client for s in ens.status()}

    def address(self, i: int) -> str:
        host, port = self.addrs[i + 1]  # type: ignore[misc]
        return f"{host}:{port}"

    def stop(self, i: int) -> None:
        self.ens.kill(i + 1)

    def start(self, i: int) -> None:
        self.ens.restart(i + 1)


def _quietly(cond):  # type: ignore[no-untyped-def]
    """``cond`` as a wait condition: False while the client or the port is between connections."""
    def check() -> bool:
        try:
            return bool(cond())
        except (KazooException, OSError):
            return False
    return check


def _name() -> str:
    return f"ro-{os.getpid()}-{time.monotonic_ns() % 10**8}"


def _java(classes: Path):  # type: ignore[no-untyped-def]
    def run(address: str) -> list[str]:
        cp = f"{classes}:{CLASSPATH}:/usr/share/java/zookeeper-jute.jar"
        res = subprocess.run(["java", "-cp", cp, "ReadOnlyProbe", address], capture_output=True, text=True, timeout=120)
        return [ln for ln in res.stdout.splitlines() if ln]
    return run


def test_read_only_mode_answers_as_apache_zookeeper(ray_local: None, tmp_path: Path, classes: Path) -> None:
    # kazoo's harness runs ZooKeeper's read-only test with local sessions on, as here
    zk = apache_zk.ApacheZooKeeper(tmp_path / "apache", servers=3, jvm_flags=("-Dreadonlymode.enabled=true",),
                                   config_lines=("localSessionsEnabled=true", "localSessionsUpgradingEnabled=true"))
    try:
        zk.start()
        oracle = read_only_scenario(ApacheServers(zk), java=_java(classes))
    finally:
        zk.stop()
    ens = Ensemble.start(3, name=_name(), data_dir=str(tmp_path / "data"), run_dir=str(tmp_path / "run"),
                         service="zookeeper", trace=False, zk_read_only=True)
    try:
        ens.wait_for_leader()
        candidate = read_only_scenario(ZabrayServers(ens), java=_java(classes))
    finally:
        ens.stop()
    got = dict((r[0], r[1:]) for r in oracle)
    # what the oracle shows, so that two systems cannot agree on nothing
    assert got["isro"] == ("ro",) and got["mntr"] == ("read-only",) and got["ro state"] == ("CONNECTED_RO",)
    assert got["get"] == (("ok", b"v1"),) and got["create"] == (("error", "NotReadOnlyCallError"),)
    assert got["plain client"][0][0] == "error" and got["moved"][0] == "CONNECTED"
    assert got["write after"] == (("ok", "/ro/after"),)
    assert "STATE ConnectedReadOnly" in got["java"][0] and "CREATE NOTREADONLY" in got["java"][0]
    for o, c in zip(oracle, candidate, strict=True):
        assert o == c, f"apache: {o}\nzabray: {c}"


def test_a_partitioned_replica_serves_its_reads_while_the_quorum_writes(ray_local: None, tmp_path: Path) -> None:
    ens = Ensemble.start(3, name=_name(), data_dir=str(tmp_path / "data"), run_dir=str(tmp_path / "run"),
                         service="zookeeper", trace=False, zk_read_only=True)
    made: list[KazooClient] = []

    def client(hosts: str, **kw: object) -> KazooClient:
        c = KazooClient(hosts=hosts, timeout=10.0, **kw)  # type: ignore[arg-type]
        made.append(c)
        c.start(timeout=60)
        return c

    try:
        ens.wait_for_leader()
        addrs = {s.sid: f"{s.zk_client[0]}:{s.zk_client[1]}" for s in ens.status() if s.zk_client}
        w = client(",".join(addrs.values()))
        w.create("/p", b"before")
        lone = client(addrs[1])
        lone.sync("/p")
        wait_until(_quietly(lambda: lone.get("/p")[0] == b"before"), what="replica 1 to have /p")
        ens.partition([1], [2, 3])
        host, port = addrs[1].split(":")
        wait_until(_quietly(lambda: apache_zk.four_letter(host, int(port), "isro") == "ro"), timeout=60,
                   what="replica 1 to serve read-only")
        ro = client(addrs[1], read_only=True)
        assert ro.client_state == "CONNECTED_RO"
        majority = client(f"{addrs[2]},{addrs[3]}")
        majority.set("/p", b"after")  # the quorum goes on without replica 1
        assert ro.get("/p")[0] == b"before"  # stale, and committed: never more than the quorum had
        with pytest.raises(NotReadOnlyCallError):
            ro.set("/p", b"mine")
        ens.heal()
        # replica 1 rejoins, closes its read-only connections; the client comes back read-write
        wait_until(lambda: ro.client_state == "CONNECTED", timeout=120, what="the client to be read-write")
        wait_until(_quietly(lambda: ro.get("/p")[0] == b"after"), timeout=30, what="the quorum's write on replica 1")
        ro.set("/p", b"mine")
        assert majority.get("/p")[0] == b"mine"
    finally:
        for c in made:
            try:
                c.stop()
                c.close()
            except Exception:  # noqa: BLE001 - teardown of a client whose replica is gone
                pass
        ens.stop()
