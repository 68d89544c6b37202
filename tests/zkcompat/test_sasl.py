"""SASL DIGEST-MD5, side by side: Apache ZooKeeper 3.8 with a JAAS ``Server`` section (and its
SASLAuthenticationProvider) and a 3-replica zabray ensemble given the same file
(``zk_sasl_jaas_file``). The same clients must get the same outcomes from both: kazoo with
``sasl_options`` and with the older ``auth_data=[("sasl", ...)]``, and ZooKeeper's Java client
logging in from its JAAS ``Client`` section. A ``sasl:`` ACL admits its user and nobody else; a
wrong password is AUTH_FAILED; a GSSAPI token is refused.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, NoAuthError
from kazoo.security import make_acl

from tests.wire.rawclient import RawClient
from tests.zkcompat import kazoo_extra as kx
from tests.zkcompat.clients import CLASSPATH
from zabray.driver import apache_zk
from zabray.driver.ensemble import Ensemble
from zabray.wire import zkproto as zp

pytestmark = [pytest.mark.zookeeper, pytest.mark.ray]
SERVER_JAAS = """
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_super="super_secret"
    user_jaasuser="jaas_password";
};
"""
CLIENT_JAAS = """
Client {{
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="{user}"
    password="{password}";
}};
"""
SOURCE = Path(__file__).resolve().parent / "java" / "SaslProbe.java"


@pytest.fixture(scope="module")
def servers(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """{"apache": hosts, "zabray": hosts}: both authenticate the users of SERVER_JAAS."""
    root = Path(tmp_path_factory.mktemp("sasl"))
    jaas = root / "server-jaas.conf"
    jaas.write_text(SERVER_JAAS)
    zk = apache_zk.ApacheZooKeeper(root / "apache", servers=1, jvm_flags=(
        f"-Djava.security.auth.login.config={jaas}",
        "-Dzookeeper.authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"))
    ens = Ensemble.start(3, name=f"sasl-{os.getpid()}-{time.monotonic_ns() % 10**8}", data_dir=str(root / "data"),
                         run_dir=str(root / "run"), service="zookeeper", trace=False, zk_sasl_jaas_file=str(jaas))
    try:
        zk.start()
        ens.wait_for_leader()
        yield {"apache": zk.hosts, "zabray": ens.connect_string()}
    finally:
        zk.stop()
        ens.stop()


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sasl-java")
    subprocess.run(["javac", "-cp", "/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar",
                    "-d", str(out), str(SOURCE)], check=True, capture_output=True)
    return out


def _kazoo(hosts: str, **kw: object) -> KazooClient:
    c = KazooClient(hosts=hosts, timeout=10.0, **kw)  # type: ignore[arg-type]
    c.start(timeout=60)
    return c


@pytest.mark.parametrize("system", ["apache", "zabray"])
@pytest.mark.parametrize("how", ["sasl_options", "auth_data"])
def test_kazoo_logs_in_and_sasl_acls_admit_only_its_user(servers: dict[str, str], system: str, how: str) -> None:
    hosts = servers[system]
    kw: dict[str, object] = (
        {"sasl_options": {"mechanism": "DIGEST-MD5", "username": "jaasuser", "password": "jaas_password"}}
        if how == "sasl_options" else {"auth_data": [("sasl", "jaasuser:jaas_password")]})
    user = _kazoo(hosts, **kw)
    other = _kazoo(hosts)
    path = f"/sasl-{how}"
    try:
        user.create(path, b"mine", acl=[make_acl("sasl", "jaasuser", all=True)])
        assert user.get(path)[0] == b"mine"
        assert ("sasl", "jaasuser") in kx.call(user, kx.who_am_i(), 10)[0]
        with pytest.raises(NoAuthError):
            other.get(path)
        user.delete(path)
    finally:
        for c in (user, other):
            c.stop()
            c.close()


@pytest.mark.parametrize("system", ["apache", "zabray"])
def test_a_wrong_password_is_refused(servers: dict[str, str], system: str) -> None:
    c = KazooClient(hosts=servers[system], timeout=10.0,
                    sasl_options={"mechanism": "DIGEST-MD5", "username": "jaasuser", "password": "wrong"})
    try:
        # kazoo reports CONNECTED before its SASL exchange; the refusal reaches the next call
        with pytest.raises(AuthFailedError):
            c.start(timeout=60)
            c.exists("/")
    finally:
        c.stop()
        c.close()


def _java(classes: Path, hosts: str, path: str, tmp: Path, password: str) -> list[str]:
    jaas = tmp / f"client-{password}.conf"
    jaas.write_text(CLIENT_JAAS.format(user="jaasuser", password=password))
    cp = f"{classes}:{CLASSPATH}:/usr/share/java/zookeeper-jute.jar"
    res = subprocess.run(["java", f"-Djava.security.auth.login.config={jaas}", "-cp", cp, "SaslProbe", hosts, path],
                         capture_output=True, text=True, timeout=120)
    lines = [ln for ln in res.stdout.splitlines() if ln]
    # whoAmI's ids come from a hash set: sorted, and the client's own address left out
    return [" ".join(["WHOAMI", *sorted(i for i in ln.split()[1:] if not i.startswith("ip:"))])
            if ln.startswith("WHOAMI") else ln for ln in lines]


def test_the_java_client_logs_in_from_jaas_alike_on_both(servers: dict[str, str], classes: Path,
                                                         tmp_path: Path) -> None:
    runs = {s: _java(classes, hosts, "/sasl-java", tmp_path, "jaas_password") for s, hosts in servers.items()}
    assert runs["apache"] == ["STATE SyncConnected", "STATE SaslAuthenticated", "CREATED /sasl-java",
                              "GOT from-java", "WHOAMI sasl:jaasuser", "STATE Closed"], runs["apache"]
    assert runs["zabray"] == runs["apache"]
    bad = {s: _java(classes, hosts, "/sasl-java-bad", tmp_path, "wrong") for s, hosts in servers.items()}
    assert "STATE AuthFailed" in bad["apache"] and not any(ln.startswith("CREATED") for ln in bad["apache"])
    assert bad["zabray"] == bad["apache"], bad


def test_a_gssapi_token_gets_no_kerberos_answer_and_zabray_says_why(servers: dict[str, str]) -> None:
    """What a Kerberos client sends first: a GSS-API InitialContextToken (tag 0x60). Apache
    ZooKeeper's DIGEST-MD5 server ignores its content and answers a digest challenge, which the
    Kerberos client cannot use; zabray refuses it at once (AUTH_FAILED, the connection closed,
    the replica's log naming GSSAPI), the clear error a misconfigured client deserves."""
    token = bytes([0x60, 0x82, 0x02, 0x3f, 0x06, 0x09]) + b"\0" * 32
    answers = {}
    for system, hosts in servers.items():
        c = RawClient(int(hosts.split(",")[0].split(":")[1]))
        try:
            hdr, rec = c.call(zp.OpCode.SASL, zp.GetSASLRequest(token))
            answers[system] = (hdr.err, rec.token if isinstance(rec, zp.SetSASLResponse) else None)
        finally:
            c.close()
    assert answers["apache"][0] == 0 and b"realm=" in (answers["apache"][1] or b"")  # DIGEST-MD5, not Kerberos
    assert answers["zabray"] == (zp.Err.AUTH_FAILED, None)
