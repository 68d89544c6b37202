"""Apache ZooKeeper 3.8 (Debian's package) in the lab: one server per host, its data on the
host's disk, its ports the well-known ones (each host has its own port space), under the same
nemesis as zabray. For side-by-side measurements (``benchmarks/lab.py``)."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field

from zabray.driver.apache_zk import JARS, MAIN, available, four_letter
from zabray.errors import NotRunningError
from zabray.lab.lab import Lab
from zabray.lab.plan import DISK_MOUNT

CLIENT_PORT = 2181


@dataclass
class LabZooKeeper:
    """Servers 1..N on hosts 1..N. ``tick_ms`` x ``sync_limit`` is how long a silent follower or
    leader is tolerated (set it to zabray's ``sync_limit`` for a fair comparison)."""

    lab: Lab
    tick_ms: int = 400
    sync_limit: int = 5
    init_limit: int = 25
    heap_mb: int = 256
    session_min_ms: int = 800
    _procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def hosts(self) -> list[int]:
        return self.lab.spec.host_ids

    def connect_string(self) -> str:
        return ",".join(f"{self.lab.ip(h)}:{CLIENT_PORT}" for h in self.hosts)

    def config(self, host: int) -> str:
        d = f"{DISK_MOUNT}/zookeeper"
        lines = [f"tickTime={self.tick_ms}", f"initLimit={self.init_limit}", f"syncLimit={self.sync_limit}",
                 f"dataDir={d}", f"clientPort={CLIENT_PORT}", f"clientPortAddress={self.lab.ip(host)}",
                 f"minSessionTimeout={self.session_min_ms}", "admin.enableServer=false",
                 "4lw.commands.whitelist=*", "forceSync=yes", "maxClientCnxns=0", "autopurge.purgeInterval=0"]
        lines += [f"server.{h}={self.lab.ip(h)}:2888:3888" for h in self.hosts]
        return "\n".join(lines) + "\n"

    def start_server(self, host: int) -> None:
        """Start (or start again, after a crash) server ``host`` on host ``host``."""
        d = f"{DISK_MOUNT}/zookeeper"
        script = (f"mkdir -p {d} && echo {host} > {d}/myid && cat > {d}/zoo.cfg <<'EOF'\n{self.config(host)}EOF\n"
                  f"exec java -Xmx{self.heap_mb}m -cp {':'.join(JARS)} -Dzookeeper.log.dir={d} "
                  f"-Dzookeeper.root.logger=WARN,CONSOLE {MAIN} {d}/zoo.cfg >> {d}/server.log 2>&1")
        self._procs[host] = self.lab.spawn(host, ["sh", "-c", script], stdin=subprocess.DEVNULL,
                                           start_new_session=True)

    def start(self, timeout: float = 120.0) -> LabZooKeeper:
        if not available():
            raise NotRunningError("Apache ZooKeeper is not installed (run bin/bootstrap: Debian's zookeeper)")
        for h in self.hosts:
            self.start_server(h)
        self.wait_serving(self.hosts, timeout)
        return self

    def srvr(self, host: int, timeout: float = 1.0) -> str:
        return four_letter(self.lab.ip(host), CLIENT_PORT, "srvr", timeout)

    def mode(self, host: int) -> str | None:
        try:
            out = self.srvr(host)
        except OSError:
            return None
        return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Mode:")), None)

    def leader(self) -> int | None:
        return next((h for h in self.hosts if self.mode(h) == "leader"), None)

    def wait_serving(self, hosts: list[int], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        pending = set(hosts)
        while pending:
            pending = {h for h in pending if self.mode(h) not in ("leader", "follower")}
            if pending and time.monotonic() > deadline:
                raise NotRunningError(f"Apache ZooKeeper on host(s) {sorted(pending)} not serving after {timeout} s "
                                      f"(see {DISK_MOUNT}/zookeeper/server.log on those hosts)")
            if pending:
                time.sleep(0.2)

    def stop(self) -> None:
        for p in self._procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
        self._procs.clear()
