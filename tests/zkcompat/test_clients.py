"""ZooKeeper's own clients (zkCli.sh, the Java client through benchmarks/zkload) scripted against a
server. Today the server is Apache ZooKeeper, which pins down what these clients print and
report; zabray joins the ``server`` parameter when it serves ZooKeeper's protocol (issue 13)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.zkcompat.clients import zkcli
from zabray import apache_zk

# Appended, not prepended: benchmarks/storage.py must not shadow the storage package.
sys.path.append(str(Path(__file__).resolve().parents[2] / "benchmarks"))
import zkclients  # noqa: E402

pytestmark = pytest.mark.zookeeper


def test_zkcli_script(apache_zookeeper: apache_zk.ApacheZooKeeper) -> None:
    out = zkcli(apache_zookeeper.hosts, "create /cli hello", "ls /", "get -w /cli", "set /cli world",
                "stat /cli", "create -e -s /cli/e- x", "ls /cli", "delete /cli/nope", "deleteall /cli")
    assert "Created /cli" in out and "[cli, zookeeper]" in out and "hello" in out
    assert "type:NodeDataChanged path:/cli" in out
    assert "dataVersion = 1" in out and "dataLength = 5" in out
    assert "Created /cli/e-0000000000" in out and "[e-0000000000]" in out
    assert "Node does not exist: /cli/nope" in out


def test_java_client_load(apache_zookeeper: apache_zk.ApacheZooKeeper) -> None:
    for op in ("setData", "getData", "create"):
        r = zkclients.java_load(apache_zookeeper.hosts, op, 1024, 20, seconds=0.5, warmup=0.2)
        assert r["errors"] == 0 and r["ops"] > 0, r
