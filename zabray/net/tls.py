"""TLS for the peer and client ports: SSL contexts from the config's files, and ``zabray certs``.

Peer connections are mutual TLS: each replica presents its certificate and requires one that
chains to ``tls_ca``. Host names are not checked: Ray places replicas and hands out their
addresses, so the identity that matters is "holds a certificate from this ensemble's CA" (and,
on top, the ensemble secret). The client port presents the replica's certificate and, with
``tls_client_certs``, requires a client certificate from the same CA.

Certificates are made with the ``openssl`` command (no extra Python dependency): an EC P-256
CA and, per name, a key and a certificate signed by it for both server and client use.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from zabray.config import EnsembleConfig
from zabray.errors import ConfigError


def _load(ctx: ssl.SSLContext, ca: str, cert: str, key: str, what: str) -> ssl.SSLContext:
    for k, path in (("tls_ca", ca), ("tls_cert", cert), ("tls_key", key)):
        if not Path(path).is_file():
            raise ConfigError(f"config key {k!r}: {what} file {path!r} does not exist on this host")
    try:
        ctx.load_verify_locations(cafile=ca)
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"{what}: cannot load the TLS files ({ca}, {cert}, {key}): {e}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def server_context(cfg: EnsembleConfig, *, require_client_cert: bool = True) -> ssl.SSLContext | None:
    """The listening side's context (None without ``tls``)."""
    if not cfg.tls:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_NONE
    return _load(ctx, cfg.tls_ca, cfg.tls_cert, cfg.tls_key, "replica")


def zk_secure_context(cfg: EnsembleConfig) -> ssl.SSLContext | None:
    """The context of the secure ZooKeeper port (``zk_secure_client_port``; None without one):
    the ``zk_tls_*`` files (default ``tls_*``), client certificates as ``zk_tls_client_auth``
    says, as ZooKeeper's secureClientPort with its ssl.clientAuth."""
    if cfg.zk_secure_client_port < 0:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca, cert, key = cfg.zk_tls_ca or cfg.tls_ca, cfg.zk_tls_cert or cfg.tls_cert, cfg.zk_tls_key or cfg.tls_key
    ctx.verify_mode = {"need": ssl.CERT_REQUIRED, "want": ssl.CERT_OPTIONAL}.get(cfg.zk_tls_client_auth, ssl.CERT_NONE)
    for k, path in (("zk_tls_cert", cert), ("zk_tls_key", key), *((("zk_tls_ca", ca),) if ca else ())):
        if not Path(path).is_file():
            raise ConfigError(f"config key {k!r}: file {path!r} does not exist on this host")
    try:
        if ca:
            ctx.load_verify_locations(cafile=ca)
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"the secure ZooKeeper port cannot load its TLS files ({ca}, {cert}, {key}): {e}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def client_context(cfg: EnsembleConfig, *, as_client: bool = False) -> ssl.SSLContext | None:
    """The connecting side's context (None without ``tls``): verifies the server against
    ``tls_ca``; presents the replica's certificate, or with ``as_client`` the client's."""
    if not cfg.tls:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # see the module docstring: membership, not host names
    ctx.verify_mode = ssl.CERT_REQUIRED
    cert, key = cfg.tls_cert, cfg.tls_key
    if as_client and cfg.tls_client_cert:
        cert, key = cfg.tls_client_cert, cfg.tls_client_key
    return _load(ctx, cfg.tls_ca, cert, key, "client" if as_client else "replica")


# -- zabray certs -------------------------------------------------------------------------------------


def driver_context(config: dict[str, Any]) -> ssl.SSLContext | None:
    """The client port's SSL context for a driver or a load client, from an ensemble's config
    as its controller reports it (None without ``tls``)."""
    cfg = EnsembleConfig.from_dict({k: v for k, v in config.items() if k != "extra"})
    return client_context(cfg, as_client=True)


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise ConfigError("`zabray certs` needs the openssl command; install it (apt-get install openssl)")
    r = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise ConfigError(f"openssl {args[0]} failed: {r.stderr.strip().splitlines()[-1] if r.stderr else r.returncode}")


def _valid_name(name: str) -> str:
    if not name or not all(c.isalnum() or c in "-_." for c in name):
        raise ConfigError(f"certificate name {name!r}: use letters, digits, '-', '_' or '.'")
    return name


def make_certs(out: str | os.PathLike[str], names: list[str], *, days: int = 825,
               ca_name: str = "zabray ensemble CA", hosts: list[str] | None = None) -> dict[str, Path]:
    """A CA in ``out`` (``ca.pem``, ``ca.key``) and ``<name>.pem``/``<name>.key`` per name,
    signed by it (an existing CA in ``out`` is reused, so nodes can be added later). ``hosts``
    go into every certificate's subjectAltName (informational: host names are not checked)."""
    if days < 1:
        raise ConfigError("--days must be at least 1")
    names = [_valid_name(n) for n in names]
    if not names:
        raise ConfigError("name at least one certificate to make (e.g. node client)")
    d = Path(out).absolute()  # openssl runs inside it: a relative path would be taken from there
    try:
        d.mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o700)
    except OSError as e:
        raise ConfigError(f"cannot make the certificate directory {d}: {e.strerror or e}") from None
    made: dict[str, Path] = {}
    if not (d / "ca.pem").exists():
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", "ca.key", "-out", "ca.pem", "-days", str(days), "-subj", f"/CN={ca_name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                 cwd=d)
        os.chmod(d / "ca.key", 0o600)
    made["ca"] = d / "ca.pem"
    sans = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}"
                    for h in (hosts or ["localhost", "127.0.0.1"]))
    with tempfile.TemporaryDirectory(dir=d) as tmp:
        ext = Path(tmp) / "ext.cnf"
        ext.write_text("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                       f"extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName={sans}\n")
        for name in names:
            _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                     "-keyout", f"{name}.key", "-out", f"{tmp}/{name}.csr", "-subj", f"/CN={name}", cwd=d)
            os.chmod(d / f"{name}.key", 0o600)
            _openssl("x509", "-req", "-in", f"{tmp}/{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                     "-CAcreateserial", "-out", f"{name}.pem", "-days", str(days), "-extfile", str(ext), cwd=d)
            made[name] = d / f"{name}.pem"
    return made
