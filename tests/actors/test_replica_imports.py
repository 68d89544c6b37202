"""A broadcast replica's worker imports neither the ZooKeeper service nor its wire codec nor
the data tree: every replica start (every test's ensemble, every restart) would pay for them,
about a quarter of a second of CPU. A ZooKeeper replica imports them when it starts serving."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
ZK_MODULES = ("zabray.zk", "zabray.tree", "zabray.wire.zkproto", "zabray.wire.zkserver", "actors.zkservice",
              "actors.zkport")

PROBE = """
import asyncio, sys, tempfile
from actors.replica import ReplicaServer
from zabray.config import EnsembleConfig

async def main(service):
    r = ReplicaServer(ensemble="imports", sid=1, config=EnsembleConfig(service=service), voters=[1],
                      observers=[], data_dir=tempfile.mkdtemp())
    await r.start()
    await r.stop()

asyncio.run(main(sys.argv[1]))
print(" ".join(sorted(m for m in sys.modules if m in {mods})))
"""


@pytest.mark.parametrize("service", ["broadcast", "zookeeper"])
def test_only_a_zookeeper_replica_imports_the_zookeeper_service(service: str) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE.format(mods=set(ZK_MODULES)), service], cwd=ROOT,
                         capture_output=True, text=True, timeout=50)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = set(out.stdout.split())
    assert loaded == (set(ZK_MODULES) if service == "zookeeper" else set())
