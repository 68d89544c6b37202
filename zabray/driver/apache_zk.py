"""Apache ZooKeeper 3.8 (Debian's ``zookeeper`` package) run next to zabray, for comparisons.

The oracle of the differential tests and the baseline of the benchmarks: a standalone server or
an N-server ensemble on loopback with free ports, data under a directory of the caller's, started
with the package's jars and stopped by pid. ``bin/bootstrap`` installs the package.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from zabray.errors import ConfigError, NotRunningError

log = logging.getLogger(__name__)

JARS = ("/etc/zookeeper/conf", "/usr/share/java/zookeeper.jar")
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def available() -> bool:
    """Is Debian's ZooKeeper package (and a java) installed here?"""
    return Path(JARS[1]).exists() and shutil.which("java") is not None


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def four_letter(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a four-letter admin word and return the server's whole answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks: list[bytes] = []
        while True:
            b = s.recv(65536)
            if not b:
                return b"".join(chunks).decode("utf-8", "replace")
            chunks.append(b)


@dataclass
class ApacheZooKeeper:
    """``servers`` Apache ZooKeeper processes on 127.0.0.1 with data under ``root``.

    ``force_sync`` is ZooKeeper's forceSync (fsync before acknowledging, the default).
    """

    root: Path
    servers: int = 1
    force_sync: bool = True
    tick_ms: int = 2000
    heap_mb: int = 512
    jvm_flags: tuple[str, ...] = ()
    """Extra ``-D`` system properties, e.g. ``-Dzookeeper.extendedTypesEnabled=true`` for TTL znodes."""
    config_lines: tuple[str, ...] = ()
    """Extra zoo.cfg lines, e.g. ``localSessionsEnabled=true``."""
    client_ports: list[int] = field(default_factory=list)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _cmds: list[list[str]] = field(default_factory=list)

    def start(self, timeout: float = 60.0) -> ApacheZooKeeper:
        if not available():
            raise NotRunningError("Apache ZooKeeper is not installed (run bin/bootstrap: Debian's zookeeper)")
        if self.servers < 1:
            raise ConfigError(f"servers must be >= 1, got {self.servers}")
        ports = _free_ports(3 * self.servers)
        self.client_ports = ports[: self.servers]
        quorum = ports[self.servers :]
        for i in range(self.servers):
            sid = i + 1
            d = self.root / f"zk{sid}"
            (d / "data").mkdir(parents=True, exist_ok=True)
            lines = [
                f"tickTime={self.tick_ms}",
                "initLimit=10",
                "syncLimit=5",
                f"dataDir={d / 'data'}",
                f"clientPort={self.client_ports[i]}",
                "clientPortAddress=127.0.0.1",
                "admin.enableServer=false",
                "4lw.commands.whitelist=*",
                f"forceSync={'yes' if self.force_sync else 'no'}",
                "maxClientCnxns=0",
                "autopurge.purgeInterval=0",
                *self.config_lines,
            ]
            if self.servers > 1:
                (d / "data" / "myid").write_text(f"{sid}\n")
                for j in range(self.servers):
                    lines.append(f"server.{j + 1}=127.0.0.1:{quorum[2 * j]}:{quorum[2 * j + 1]}")
            cfg = d / "zoo.cfg"
            cfg.write_text("\n".join(lines) + "\n")
            self._cmds.append([
                "java", f"-Xmx{self.heap_mb}m", "-cp", ":".join(JARS),
                f"-Dzookeeper.log.dir={d}", "-Dzookeeper.root.logger=WARN,CONSOLE", *self.jvm_flags,
                MAIN, str(cfg),
            ])
            self._procs.append(self._spawn(i))
        self.wait_serving(timeout)
        return self

    def _spawn(self, i: int) -> subprocess.Popen[bytes]:
        with open(self.root / f"zk{i + 1}" / "server.log", "ab") as out:
            return subprocess.Popen(self._cmds[i], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def stop_server(self, i: int) -> None:
        """Kill server ``i`` (0-based; its data kept), as a crash."""
        p = self._procs[i]
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()

    def start_server(self, i: int) -> None:
        """Start server ``i`` again from its data (after ``stop_server``); returns at once."""
        if self._procs[i].poll() is None:
            return
        self._procs[i] = self._spawn(i)

    def wait_serving(self, timeout: float) -> None:
        """Wait until every server answers ``srvr`` with a mode (leader/follower/standalone)."""
        deadline = time.monotonic() + timeout
        pending = set(range(self.servers))
        while pending:
            for i in list(pending):
                if self._procs[i].poll() is not None:
                    raise NotRunningError(f"Apache ZooKeeper server {i + 1} exited; see {self.root}/zk{i + 1}/server.log")
                try:
                    if "Mode:" in four_letter("127.0.0.1", self.client_ports[i], "srvr", 1.0):
                        pending.discard(i)
                except OSError:
                    pass
            if pending and time.monotonic() > deadline:
                raise NotRunningError(f"Apache ZooKeeper servers {sorted(p + 1 for p in pending)} not serving after {timeout}s")
            if pending:
                time.sleep(0.1)

    def host_in_mode(self, mode: str) -> str:
        """``127.0.0.1:port`` of a server whose ``srvr`` says ``Mode: <mode>`` (``leader``,
        ``follower`` or ``standalone``): a client pinned to one role, as a benchmark wants."""
        for port in self.client_ports:
            try:
                if f"Mode: {mode}" in four_letter("127.0.0.1", port, "srvr", 2.0):
                    return f"127.0.0.1:{port}"
            except OSError:
                continue
        raise NotRunningError(f"no Apache ZooKeeper server is in mode {mode!r}")

    @property
    def hosts(self) -> str:
        """The connect string kazoo's ``hosts=`` and zkCli's ``-server`` take."""
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports)

    def stop(self) -> None:
        for i in range(len(self._procs)):
            self.stop_server(i)
        self._procs.clear()
        self._cmds.clear()

    def __enter__(self) -> ApacheZooKeeper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
