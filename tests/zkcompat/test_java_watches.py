"""ZooKeeper's Java client keeps a persistent recursive watch (addWatch, what Curator's
CuratorCache is built on) across the kill of its replica: it resumes its session elsewhere and
re-registers the watch with setWatches2, and the watch fires there for later changes. With both
of its sockets: NIO, the default, and Netty, which writes setWatches2 right behind the connect.
A scratch run of the same scenario against a 3-server Apache ZooKeeper 3.8 gave the same events
(the suite's oracle is a single server: its client would have nowhere to move)."""

from __future__ import annotations

import queue
import subprocess
import threading
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.client.conftest import start  # noqa: F401  (the test's own ensemble: it kills a replica)
from tests.driver.conftest import wait_until
from tests.zkcompat.clients import CLASSPATH, NETTY
from zabray.driver.ensemble import Ensemble

pytestmark = [pytest.mark.ray, pytest.mark.zookeeper]
SOURCE = Path(__file__).resolve().parent / "java" / "WatchProbe.java"


class Probe:
    """The Java program, its lines gathered as they come."""

    def __init__(self, classes: Path, hosts: str, flags: list[str]) -> None:
        cp = f"{classes}:{CLASSPATH}:/usr/share/java/zookeeper-jute.jar"
        self.proc = subprocess.Popen(["java", *flags, "-cp", cp, "WatchProbe", hosts], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))

    def has(self, line: str) -> bool:
        while not self._q.empty():
            self.lines.append(self._q.get())
        return line in self.lines

    def ready_port(self) -> int | None:
        """The port of the replica the client is on, once its watch is set."""
        self.has("")
        return next((int(x.split()[1]) for x in self.lines if x.startswith("READY ")), None)

    def resumed(self) -> bool:
        """Connected again after the (one) disconnect."""
        self.has("")
        lines = self.lines
        return "STATE Disconnected" in lines and "STATE SyncConnected" in lines[lines.index("STATE Disconnected"):]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("java-classes")
    subprocess.run(["javac", "-cp", "/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar",
                    "-d", str(out), str(SOURCE)], check=True, capture_output=True)
    return out


def test_a_persistent_recursive_watch_survives_the_kill_of_its_replica(start, classes: Path) -> None:  # noqa: F811
    ens: Ensemble = start(3, service="zookeeper")
    ens.wait_for_leader()
    for socket_flags, tag in (([], "nio"), ([NETTY], "netty")):
        sid = _move_once(ens, Probe(classes, ens.connect_string(), socket_flags), tag)
        ens.restart(sid)
        ens.wait_for_leader()


def _move_once(ens: Ensemble, probe: Probe, tag: str) -> int:
    """Events before the kill of the probe's replica and after its move; returns that replica."""
    try:
        wait_until(lambda: probe.ready_port() is not None, what=f"{tag}: the Java client's watch")
        port = probe.ready_port()
        sid = next(s.sid for s in ens.status() if s.zk_client and s.zk_client[1] == port)
        others = ",".join(f"{s.zk_client[0]}:{s.zk_client[1]}" for s in ens.status() if s.zk_client and s.sid != sid)
        writer = KazooClient(hosts=others, timeout=10)
        writer.start(timeout=60)
        try:
            writer.create(f"/pw/{tag}-before", b"")
            wait_until(lambda: probe.has(f"EVENT NodeCreated /pw/{tag}-before"), what=f"{tag}: the event before")
            ens.kill(sid)
            wait_until(probe.resumed, what=f"{tag}: the session resumed on another replica")
            writer.create(f"/pw/{tag}-after", b"")
            writer.set("/pw", tag.encode())
            wait_until(lambda: probe.has(f"EVENT NodeCreated /pw/{tag}-after") and probe.has("EVENT NodeDataChanged /pw"),
                       what=f"{tag}: the events after the move")
            assert probe.lines.count(f"EVENT NodeCreated /pw/{tag}-before") == 1, probe.lines
            assert "STATE Expired" not in probe.lines, probe.lines
        finally:
            writer.stop()
            writer.close()
        return sid
    finally:
        probe.close()
