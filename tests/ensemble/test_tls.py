"""TLS on the peer and client ports of a real ensemble: replicas elect and commit over mutual
TLS; plaintext, a certificate from another CA, or no client certificate are refused before a
single zabray frame comes back."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any

import pytest

from tests.ensemble.conftest import assert_no_loss, converged, wait_until
from tests.zkcompat.clients import NETTY, zkcli
from zabray.net.tls import make_certs
from zabray.trace import records as trace
from zabray.wire.auth import PEER, Connector, Secret
from zabray.wire.framing import KIND_ELECTION, FrameDecoder, Handshake, frame

pytestmark = pytest.mark.ray


def context(ca: Path, cert: Path | None, key: Path | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(cafile=str(ca))
    if cert is not None and key is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def frames_back(addr: tuple[str, int], ctx: ssl.SSLContext | None, ensemble: str) -> list[bytes] | None:
    """Connect (over TLS with ``ctx``, else plaintext), send a handshake and a HELLO as a member
    would, and return the frames the replica sent before closing; None if the connection was
    refused (TLS failed, or it closed without a frame). Returns at the first frame."""
    hs = Handshake(ensemble, 9, KIND_ELECTION).encode()
    hello = Connector(Secret(b"s" * 32), PEER + hs, b"n" * 32).hello()
    raw = socket.create_connection(addr, timeout=10)
    try:
        s: Any = ctx.wrap_socket(raw) if ctx is not None else raw
        s.settimeout(10)
        s.sendall(frame(hs) + frame(hello))
        dec = FrameDecoder()
        while data := s.recv(1 << 16):
            if out := dec.feed(data):
                return out
        return None
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError, TimeoutError):
        return None
    except Exception:  # a TLS alert or other bytes that are not frames
        return None
    finally:
        raw.close()


def test_tls_ensemble_commits_and_refuses_plaintext_and_foreign_certificates(start, tmp_path) -> None:
    ours, theirs = tmp_path / "ca", tmp_path / "other-ca"
    make_certs(ours, ["node", "client"])
    make_certs(theirs, ["node"])
    ens = start(3, tls=True, tls_ca=str(ours / "ca.pem"), tls_cert=str(ours / "node.pem"),
                tls_key=str(ours / "node.key"), tls_client_certs=True,
                tls_client_cert=str(ours / "client.pem"), tls_client_key=str(ours / "client.key"))
    ens.wait_for_leader(60)
    acked = {int(ens.submit(v)): trace.digest(v) for v in [b"over", b"tls"]}
    for z, v in zip(ens.submit_many([b"v%d" % i for i in range(50)]), range(50), strict=True):
        acked[int(z)] = trace.digest(b"v%d" % v)  # type: ignore[arg-type]
    wait_until(lambda: converged(ens), what="convergence over TLS")
    assert_no_loss(ens, acked)

    member = context(ours / "ca.pem", ours / "node.pem", ours / "node.key")
    foreign = context(ours / "ca.pem", theirs / "node.pem", theirs / "node.key")  # trusts us, signed by another CA
    no_cert = context(ours / "ca.pem", None, None)
    for info in ens.info["replicas"].values():
        quorum = (info["quorum"][0], int(info["quorum"][1]))
        client = (info["client"][0], int(info["client"][1]))
        # Control: a real certificate gets through TLS, and the auth layer answers with a CHALLENGE.
        assert frames_back(quorum, member, ens.name) is not None
        for addr in (quorum, client):
            assert frames_back(addr, None, ens.name) is None, f"plaintext got an answer from {addr}"
            assert frames_back(addr, foreign, ens.name) is None, f"another CA's certificate got through to {addr}"
            assert frames_back(addr, no_cert, ens.name) is None, f"no client certificate got through to {addr}"
        # And a client that does not trust our CA refuses the replica.
        with pytest.raises(ssl.SSLError):
            ctx = context(theirs / "ca.pem", theirs / "node.pem", theirs / "node.key")
            with socket.create_connection(quorum, timeout=10) as raw, ctx.wrap_socket(raw):
                pass
    assert ens.leader() is not None
    acked[int(ens.submit(b"after"))] = trace.digest(b"after")
    assert_no_loss(ens, acked)


def test_kazoo_reads_and_writes_over_tls_and_plaintext_is_refused(start, tmp_path) -> None:
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    ca = tmp_path / "ca"
    make_certs(ca, ["node", "client"])
    ens = start(3, service="zookeeper", tls=True, tls_ca=str(ca / "ca.pem"), tls_cert=str(ca / "node.pem"),
                tls_key=str(ca / "node.key"), tls_client_certs=True)
    ens.wait_for_leader(60)
    hosts = ens.connect_string()
    zk = KazooClient(hosts=hosts, use_ssl=True, verify_certs=True, check_hostname=False, ca=str(ca / "ca.pem"),
                     certfile=str(ca / "client.pem"), keyfile=str(ca / "client.key"), timeout=10)
    zk.start(timeout=60)
    try:
        zk.create("/tls", b"secret", ephemeral=True)
        assert zk.get("/tls")[0] == b"secret"
        with ens.session(timeout=5) as own:  # zabray's own session, over TLS with the driver's certificate
            assert own.get("/tls")[0] == b"secret"
    finally:
        zk.stop()
        zk.close()
    for kwargs in ({}, {"use_ssl": True, "verify_certs": True, "check_hostname": False, "ca": str(ca / "ca.pem")}):
        # Plaintext, and TLS without a client certificate, never get a session.
        bad = KazooClient(hosts=hosts, timeout=2, connection_retry={"max_tries": 2, "delay": 0.1}, **kwargs)
        with pytest.raises(KazooTimeoutError):
            bad.start(timeout=5)
        bad.stop()
        bad.close()


@pytest.mark.zookeeper
def test_zookeepers_java_client_over_tls(start, tmp_path) -> None:
    """ZooKeeper's own CLI over TLS, as its documentation sets a client up: the Netty socket, a
    PEM key store (key and certificate) and trust store, host names verified (the certificates
    name 127.0.0.1)."""
    ca = tmp_path / "ca"
    make_certs(ca, ["node", "client"])
    store = tmp_path / "client-store.pem"
    store.write_text((ca / "client.key").read_text() + (ca / "client.pem").read_text())
    ens = start(3, service="zookeeper", tls=True, tls_ca=str(ca / "ca.pem"), tls_cert=str(ca / "node.pem"),
                tls_key=str(ca / "node.key"), tls_client_certs=True)
    ens.wait_for_leader(60)
    flags = [NETTY, "-Dzookeeper.client.secure=true", f"-Dzookeeper.ssl.keyStore.location={store}",
             "-Dzookeeper.ssl.keyStore.type=PEM", f"-Dzookeeper.ssl.trustStore.location={ca / 'ca.pem'}",
             "-Dzookeeper.ssl.trustStore.type=PEM"]
    out = zkcli(ens.connect_string(), "create /java-tls hello", "get /java-tls", jvm_flags=flags)
    assert "Created /java-tls" in out and "\nhello\n" in out, out[-2000:]
    with ens.session(timeout=5) as own:
        assert own.get("/java-tls")[0] == b"hello"
