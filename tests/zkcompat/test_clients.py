"""ZooKeeper's own clients (zkCli.sh, the Java client through benchmarks/zkload), and kazoo where
a case needs a call zkCli cannot make, scripted against Apache ZooKeeper 3.8 and against zabray:
the same script, the same expected output. Apache's run pins down what these clients print;
zabray's must print the same."""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError

from tests.zkcompat import kazoo_extra as kx
from tests.zkcompat.clients import NETTY, zkcli
from zabray.driver import apache_zk
from zabray.driver.ensemble import Ensemble

# Loaded by path: putting benchmarks/ on sys.path would shadow the `storage` package.
_spec = importlib.util.spec_from_file_location("zkclients", Path(__file__).resolve().parents[2] / "benchmarks" / "zkclients.py")
assert _spec is not None and _spec.loader is not None
zkclients = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zkclients)

pytestmark = pytest.mark.zookeeper


@pytest.fixture(scope="module")
def zabray_zk(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("zabray-zk")
    name = f"zkc-{os.getpid()}-{time.monotonic_ns() % 10**8}"
    ens = Ensemble.start(3, name=name, data_dir=str(tmp / "data"), run_dir=str(tmp / "run"),
                         service="zookeeper", trace=False)
    ens.wait_for_leader()
    yield ens.connect_string()
    ens.stop()


@pytest.fixture(params=["apache", pytest.param("zabray", marks=pytest.mark.ray)])
def hosts(request: pytest.FixtureRequest) -> str:
    if request.param == "apache":
        zk: apache_zk.ApacheZooKeeper = request.getfixturevalue("apache_zookeeper")
        return zk.hosts
    return str(request.getfixturevalue("zabray_zk"))


def test_zkcli_script(hosts: str) -> None:
    root = f"/cli{time.monotonic_ns() % 10**6}"
    out = zkcli(hosts, f"create {root} hello", "ls /", f"get -w {root}", f"set {root} world",
                f"stat {root}", f"create -e -s {root}/e- x", f"create -c {root}/box", f"ls {root}",
                f"delete {root}/nope", f"getAllChildrenNumber {root}", "getEphemerals",
                f"setAcl {root} world:anyone:rcd", f"getAcl {root}", f"set {root} denied", f"deleteall {root}",
                f"stat {root}", "reconfig -remove 3", "ls /")  # (zkCli exits with its last command's status)
    name = root[1:]
    assert f"Created {root}" in out and name in out and "zookeeper" in out and "hello" in out
    assert f"type:NodeDataChanged path:{root}" in out
    assert "dataVersion = 1" in out and "dataLength = 5" in out
    assert f"Created {root}/e-0000000000" in out and "[box, e-0000000000]" in out
    assert f"Node does not exist: {root}/nope" in out
    assert "\n2\n" in out  # getAllChildrenNumber
    assert f"[{root}/e-0000000000]" in out  # getEphemerals
    assert "'world,'anyone\n: cdr" in out  # getAcl
    assert f"Insufficient permission : {root}" in out  # NoAuth on the set
    assert f"Node does not exist: {root}" in out.splitlines()  # deleteall removed it all
    assert "KeeperErrorCode = Reconfig is disabled" in out  # ZooKeeper's default: membership fixed


def test_zkcli_quota(hosts: str) -> None:
    """setquota and listquota: the server keeps the quota's stats as the subtree changes."""
    root = f"/quota{time.monotonic_ns() % 10**6}"
    out = zkcli(hosts, f"create {root} hello", f"create {root}/a 1", f"create {root}/b 2", f"set {root}/a 11",
                f"setquota -n 5 {root}", f"listquota {root}", f"create {root}/c xyz", f"delete {root}/b",
                f"listquota {root}", f"delquota {root}", f"deleteall {root}", f"listquota {root}")
    assert f"Output quota for {root} count=5,bytes=-1" in out
    assert f"Output stat for {root} count=3,bytes=8" in out  # /root, a and b: "hello", "11", "2"
    assert f"Output stat for {root} count=3,bytes=10" in out  # c's 3 bytes in, b's 1 out


def test_zkcli_null_data(hosts: str) -> None:
    """zkCli's create with no data sends a null: ZooKeeper keeps it apart from empty data."""
    root = f"/null{time.monotonic_ns() % 10**6}"
    out = zkcli(hosts, f"create {root}", f"get {root}", f"stat {root}", f"deleteall {root}")
    assert "\nnull\ncZxid = " in out  # get: the data, then the stat  (zkCli prints "Created" to stderr)
    assert "dataLength = 0" in out


def test_zkcli_over_the_netty_socket(hosts: str) -> None:
    """The Java client's Netty socket (the one TLS needs) sends its first requests right behind
    the ConnectRequest, before the session exists: they must wait for it, not fail."""
    root = f"/netty{time.monotonic_ns() % 10**6}"
    out = zkcli(hosts, f"create -e {root} hello", f"get {root}", "ls /", jvm_flags=[NETTY])
    assert f"Created {root}" in out and "\nhello\n" in out and root[1:] in out, out[-2000:]
    assert "Session expired" not in out


def test_add_auth_as_zookeepers_providers_grant(hosts: str) -> None:
    """addAuth "ip" grants the connection's own address whatever the credential; "digest" with a
    null credential (kazoo sends "" as null) fails the session, as ZooKeeper's providers do."""
    c = KazooClient(hosts=hosts, timeout=10)
    c.start(timeout=30)
    try:
        c.add_auth("ip", "10.9.8.7")
        assert kx.call(c, kx.who_am_i(), 10)[0] == [("ip", "127.0.0.1")]  # the address, once
    finally:
        c.stop()
        c.close()
    c = KazooClient(hosts=hosts, timeout=10)
    c.start(timeout=30)
    try:
        with pytest.raises(AuthFailedError):
            c.add_auth("digest", "")
    finally:
        c.stop()
        c.close()


def test_java_client_load(hosts: str) -> None:
    for op in ("setData", "getData", "create"):
        r = zkclients.java_load(hosts, op, 1024, 20, seconds=0.5, warmup=0.2)
        assert r["errors"] == 0 and r["ops"] > 0, r
