"""A pytest plugin that points kazoo's own test harness at a zabray ZooKeeper service.

kazoo's tests (``kazoo.tests``, run unchanged) reach their servers only through
``kazoo.testing.harness.get_global_cluster()``: a ``ZookeeperCluster`` of ``ManagedZooKeeper``s
with ``address``, ``run()``, ``stop()``, ``reset()``, ``destroy()``. This plugin swaps that one
function for one that returns the same interface over a zabray ensemble (``service:
zookeeper``, 3 replicas on Ray), configured as kazoo's harness configures ZooKeeper:

- the same environment variables decide the cluster (``ZOOKEEPER_CLUSTER_SIZE``,
  ``ZOOKEEPER_JAAS_AUTH``, ``ZOOKEEPER_LOCAL_SESSION_RO``): a change makes a new cluster, as
  kazoo's harness does;
- every four-letter word allowed (``4lw.commands.whitelist=*``), the superuser digest of the
  password "test", read-only mode on (``-Dreadonlymode.enabled=true``), ticks of 2 s (session
  timeouts clamped to 4..40 s), JAAS ``Server`` users for ``ZOOKEEPER_JAAS_AUTH=digest``;
- a TLS client port next to the plain one, from the certificates kazoo's cluster generates
  (ZooKeeper's ``secureClientPort``).

``server.stop()`` crashes the replica (its disk kept), ``run()`` restarts it from its disk,
``reset()`` makes the next ``run()`` rebuild it from the leader, and ``terminate()`` stops the
ensemble and deletes its data, as kazoo's harness does at the end of each test class.

Enabled with ``-p tests.zkcompat.kazoo_zabray`` (``tests/zkcompat/kazoo_suite.py`` does).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import kazoo.testing.harness as harness
from kazoo.testing.common import ZookeeperCluster

from zabray.driver import apache_zk

log = logging.getLogger(__name__)

SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # kazoo's harness: the superuser's password is "test"
JAAS_DIGEST = """Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_super="super_secret"
    user_jaasuser="jaas_password";
};
"""  # kazoo's harness writes exactly these users for ZOOKEEPER_JAAS_AUTH=digest
_KEYS = ("ZOOKEEPER_PORT_OFFSET", "ZOOKEEPER_CLUSTER_SIZE", "ZOOKEEPER_OBSERVER_START_ID", "ZOOKEEPER_JAAS_AUTH",
         "ZOOKEEPER_LOCAL_SESSION_RO")


class ZabrayServer:
    """One replica, as kazoo's ``ManagedZooKeeper`` presents a server."""

    def __init__(self, cluster: ZabrayCluster, sid: int) -> None:
        self.cluster = cluster
        self.sid = sid
        self.host = "127.0.0.1"
        self._running = False
        self._fresh = False

    @property
    def running(self) -> bool:
        return self._running

    @property
    def client_port(self) -> int:
        return self.cluster.base_port + self.sid

    @property
    def secure_client_port(self) -> int:
        return self.cluster.secure_base_port + self.sid

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def secure_address(self) -> str:
        return f"{self.host}:{self.secure_client_port}"

    def run(self) -> None:
        if self._running:
            return
        if self.cluster.ens is None:
            self.cluster.start()
            return
        self.cluster.ens.restart(self.sid, fresh=self._fresh)
        self._fresh = False
        self._running = True
        self.cluster.wait_listening([self])

    def stop(self) -> None:
        if not self._running:
            return
        assert self.cluster.ens is not None
        self.cluster.ens.kill(self.sid)
        self._running = False

    def reset(self) -> None:
        self.stop()
        self._fresh = True

    def destroy(self) -> None:
        self.cluster.destroy()

    def get_logs(self, num_lines: int = 100) -> list[str]:
        return []


class ZabrayCluster:
    """kazoo's ``ZookeeperCluster`` interface over one zabray ensemble (started on first use)."""

    def __init__(self, size: int, port_offset: int, observer_start_id: int, jaas: str | None) -> None:
        self.size = size
        self.observers = 0 if observer_start_id == -1 else max(0, size - observer_start_id + 1)
        self.base_port = port_offset
        self.secure_base_port = port_offset + 10
        self.jaas = jaas
        self.ens: Any = None
        self.root = Path(tempfile.mkdtemp(prefix="kazoo-zabray-"))
        # The CA and certificates kazoo's own cluster makes (get_ssl_client_configuration).
        self._certs = ZookeeperCluster.__new__(ZookeeperCluster)
        self._certs._ssl_configuration = {}
        self._certs.perform_ssl_certs_generation()
        self._servers = [ZabrayServer(self, sid) for sid in range(1, size + 1)]

    def __getitem__(self, k: int) -> ZabrayServer:
        return self._servers[k]

    def __iter__(self) -> Any:
        return iter(self._servers)

    def get_ssl_client_configuration(self) -> dict[str, bytes]:
        return self._certs.get_ssl_client_configuration()

    def _overrides(self) -> dict[str, Any]:
        from OpenSSL import crypto

        ssl = self._certs._ssl_configuration
        tls = self.root / "tls"
        tls.mkdir(exist_ok=True)
        (tls / "ca.pem").write_bytes(crypto.dump_certificate(crypto.FILETYPE_PEM, ssl["ca_cert"]))
        (tls / "server.pem").write_bytes(crypto.dump_certificate(crypto.FILETYPE_PEM, ssl["server_cert"]))
        (tls / "server.key").write_bytes(crypto.dump_privatekey(crypto.FILETYPE_PEM, ssl["server_key"]))
        o: dict[str, Any] = {
            "service": "zookeeper", "trace": False, "data_dir": str(self.root / "data"), "run_dir": str(self.root / "run"),
            "zk_client_port": self.base_port, "zk_four_letter_words": "*", "zk_super_digest": SUPER_DIGEST,
            "zk_min_session_timeout_ms": 4000, "zk_max_session_timeout_ms": 40000,
        }
        extra = _optional_overrides(self, tls)
        o.update(extra)
        return o

    def start(self) -> None:
        if self.ens is None:
            from zabray.driver.ensemble import Ensemble

            name = f"kazoo-{os.getpid()}-{time.monotonic_ns() % 10**8}"
            self.ens = Ensemble.start(self.size - self.observers, self.observers, name=name, **self._overrides())
            for s in self._servers:
                s._running = True
                s._fresh = False
            self.ens.wait_for_leader(timeout=120)
        for s in self._servers:
            if not s.running:
                s.run()
        self.wait_listening(self._servers)

    def wait_listening(self, servers: list[ZabrayServer], timeout: float = 120.0) -> None:
        """Until each server's ``srvr`` answers (a replica that is up and has taken its port)."""
        deadline = time.monotonic() + timeout
        for s in servers:
            while True:
                try:
                    if "Mode:" in apache_zk.four_letter(s.host, s.client_port, "srvr", 2.0):
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"zabray replica {s.sid} does not answer srvr on {s.address}")
                time.sleep(0.1)

    def stop(self) -> None:
        for s in self._servers:
            s.stop()

    def destroy(self) -> None:
        if self.ens is not None:
            ens, self.ens = self.ens, None
            try:
                ens.stop(wipe=True)
            except Exception:  # noqa: BLE001 - the ensemble may be gone already; nothing left to stop
                log.exception("stopping the zabray ensemble")
        for s in self._servers:
            s._running = False
            s._fresh = False

    def terminate(self) -> None:
        self.destroy()

    def reset(self) -> None:
        for s in self._servers:
            s.reset()

    def get_logs(self) -> list[str]:
        return []

    def cleanup(self) -> None:
        self.destroy()
        shutil.rmtree(self.root, ignore_errors=True)


def _optional_overrides(cluster: ZabrayCluster, tls: Path) -> dict[str, Any]:
    """Config keys for what kazoo's harness turns on in ZooKeeper, where zabray has them."""
    from zabray.config import EnsembleConfig

    known = set(EnsembleConfig.__dataclass_fields__)
    o: dict[str, Any] = {}
    if "zk_secure_client_port" in known:
        o.update(zk_secure_client_port=cluster.secure_base_port, zk_tls_ca=str(tls / "ca.pem"),
                 zk_tls_cert=str(tls / "server.pem"), zk_tls_key=str(tls / "server.key"))
    if "zk_read_only" in known:
        o["zk_read_only"] = True
    if cluster.jaas == "digest" and "zk_sasl_jaas_file" in known:
        jaas = cluster.root / "jaas.conf"
        jaas.write_text(JAAS_DIGEST)
        o["zk_sasl_jaas_file"] = str(jaas)
    return o


_CLUSTER: ZabrayCluster | None = None
_CONF: dict[str, str | None] | None = None


def get_global_cluster() -> ZabrayCluster:
    """kazoo's ``get_global_cluster``, answering a zabray cluster; a changed environment makes
    a new one (kazoo's rule), so a SASL test class gets an ensemble with its users file."""
    global _CLUSTER, _CONF
    conf = {k: os.environ.get(k, harness.CLUSTER_DEFAULTS.get(k)) for k in _KEYS}
    if _CLUSTER is not None:
        if conf == _CONF:
            return _CLUSTER
        _CLUSTER.cleanup()
        _CLUSTER = None
    jaas = conf["ZOOKEEPER_JAAS_AUTH"]
    _CLUSTER = ZabrayCluster(int(conf["ZOOKEEPER_CLUSTER_SIZE"] or 3), int(conf["ZOOKEEPER_PORT_OFFSET"] or 20000),
                             int(conf["ZOOKEEPER_OBSERVER_START_ID"] or -1), jaas)
    _CONF = conf
    return _CLUSTER


def pytest_configure(config: Any) -> None:
    import ray

    os.environ.pop("RAY_ADDRESS", None)
    # A local Ray of this run's own (never one another process left running here).
    ray.init(address="local", namespace="zabray", include_dashboard=False, log_to_driver=False, num_cpus=2)
    harness.get_global_cluster = get_global_cluster


def pytest_unconfigure(config: Any) -> None:
    if _CLUSTER is not None:
        _CLUSTER.cleanup()
