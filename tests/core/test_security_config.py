"""Secret files, TLS files and their config keys: every mistake is a ConfigError naming the fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zabray.cli.main import main
from zabray.config import EnsembleConfig
from zabray.errors import ConfigError
from zabray.net.keyfiles import read_secret, write_secret
from zabray.net.tls import client_context, make_certs, server_context


def test_secret_file_round_trip_and_refusals(tmp_path: Path) -> None:
    p = write_secret(tmp_path / "s")
    assert (p.stat().st_mode & 0o777) == 0o600
    s = read_secret(p)
    assert len(s.key) == 32 and p.read_text().strip() not in repr(s)
    with pytest.raises(ConfigError, match="--force"):
        write_secret(p)
    assert read_secret(write_secret(p, force=True)) != s
    with pytest.raises(ConfigError, match="cannot read"):
        read_secret(tmp_path / "missing")
    os.chmod(p, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        read_secret(p)
    bad = tmp_path / "bad"
    bad.write_text("not hex at all")
    os.chmod(bad, 0o600)
    with pytest.raises(ConfigError, match="hex"):
        read_secret(bad)
    bad.write_text("abcd")
    with pytest.raises(ConfigError, match="at least 16"):
        read_secret(bad)


def test_security_config_keys_are_validated() -> None:
    with pytest.raises(ConfigError, match="tls_ca, tls_cert, tls_key"):
        EnsembleConfig.load(None, tls=True)
    with pytest.raises(ConfigError, match="'auth' is false"):
        EnsembleConfig.load(None, auth=False, secret_file="/x")
    with pytest.raises(ConfigError, match="go together"):
        EnsembleConfig.load(None, tls_client_cert="/x")
    with pytest.raises(ConfigError, match="'tls' must be true or false"):
        EnsembleConfig.load(None, tls="yes")
    cfg = EnsembleConfig.load(None, tls=True, tls_ca="/nope/ca.pem", tls_cert="/nope/n.pem", tls_key="/nope/n.key")
    with pytest.raises(ConfigError, match="'tls_ca'.*does not exist"):
        server_context(cfg)
    assert server_context(EnsembleConfig.load(None)) is None


def test_start_refuses_a_bad_secret_file_before_touching_ray(tmp_path: Path) -> None:
    from zabray.driver.ensemble import Ensemble

    p = tmp_path / "s"
    p.write_text("00" * 32)
    os.chmod(p, 0o640)
    with pytest.raises(ConfigError, match="secret_file.*chmod 600"):
        Ensemble.start(3, name="never", secret_file=str(p), data_dir=str(tmp_path / "d"))


def test_cli_makes_a_secret_and_certificates_that_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["secret", str(tmp_path / "sec")]) == 0
    out = capsys.readouterr().out
    key = (tmp_path / "sec").read_text().strip()
    assert key not in out and str(tmp_path / "sec") in out
    assert main(["secret", str(tmp_path / "sec")]) == 2
    assert main(["certs", str(tmp_path / "tls"), "n1", "n2", "client", "--hosts", "10.0.0.1,db1"]) == 0
    for name in ("ca", "n1", "n2", "client"):
        assert (tmp_path / "tls" / f"{name}.pem").is_file()
    assert (tmp_path / "tls" / "n1.key").stat().st_mode & 0o077 == 0
    cfg = EnsembleConfig.load(None, tls=True, tls_ca=str(tmp_path / "tls/ca.pem"),
                              tls_cert=str(tmp_path / "tls/n1.pem"), tls_key=str(tmp_path / "tls/n1.key"))
    assert server_context(cfg) is not None and client_context(cfg, as_client=True) is not None
    assert main(["certs", str(tmp_path / "tls"), "bad/name"]) == 2
    ca = (tmp_path / "tls" / "ca.pem").read_bytes()
    make_certs(tmp_path / "tls", ["n3"])  # the CA is reused: n3 chains to the same ca.pem
    assert ca == (tmp_path / "tls" / "ca.pem").read_bytes()
    import subprocess

    r = subprocess.run(["openssl", "verify", "-CAfile", "ca.pem", "n3.pem"], cwd=tmp_path / "tls",
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_cli_makes_certificates_in_a_relative_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`zabray certs tls` from the directory a user stands in (openssl runs inside tls/)."""
    monkeypatch.chdir(tmp_path)
    assert main(["certs", "tls", "node"]) == 0, capsys.readouterr().err
    assert all((tmp_path / "tls" / f).is_file() for f in ("ca.pem", "node.pem", "node.key"))
    assert not [p for p in (tmp_path / "tls").iterdir() if p.is_dir()]  # the CSRs' scratch directory is gone


def test_cli_says_in_one_line_where_it_cannot_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A path under a regular file can be neither made nor written: exit 2 and one line, no traceback.
    (tmp_path / "file").write_text("")
    assert main(["secret", str(tmp_path / "file" / "sec")]) == 2
    assert main(["certs", str(tmp_path / "file" / "tls"), "node"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert err[0].startswith(f"zabray secret: cannot write a secret to {tmp_path / 'file' / 'sec'}: "), err
    assert err[1].startswith(f"zabray certs: cannot make the certificate directory {tmp_path / 'file' / 'tls'}: "), err


def test_the_secure_zookeeper_port_needs_its_files_and_loads_them(tmp_path: Path) -> None:
    from zabray.net.tls import zk_secure_context

    with pytest.raises(ConfigError, match="zk_secure_client_port' needs a certificate"):
        EnsembleConfig.load(None, service="zookeeper", zk_secure_client_port=0)
    with pytest.raises(ConfigError, match="zk_tls_client_auth' checks client certificates"):
        EnsembleConfig.load(None, service="zookeeper", zk_secure_client_port=0, zk_tls_cert="c", zk_tls_key="k")
    with pytest.raises(ConfigError, match="must be need, want or none"):
        EnsembleConfig.load(None, service="zookeeper", zk_tls_client_auth="maybe")
    with pytest.raises(ConfigError, match="zk_secure_client_port' needs service: zookeeper"):
        EnsembleConfig.load(None, zk_secure_client_port=0, tls_cert="c", tls_key="k", zk_tls_client_auth="none")
    assert zk_secure_context(EnsembleConfig.load(None, service="zookeeper")) is None  # -1: no such port
    make_certs(tmp_path, ["r"])
    cfg = EnsembleConfig.load(None, service="zookeeper", zk_secure_client_port=0, zk_tls_ca=str(tmp_path / "ca.pem"),
                              zk_tls_cert=str(tmp_path / "r.pem"), zk_tls_key=str(tmp_path / "r.key"))
    ctx = zk_secure_context(cfg)
    assert ctx is not None and ctx.verify_mode.name == "CERT_REQUIRED"
    missing = EnsembleConfig.load(None, service="zookeeper", zk_secure_client_port=0, zk_tls_client_auth="none",
                                  zk_tls_cert=str(tmp_path / "nope.pem"), zk_tls_key=str(tmp_path / "r.key"))
    with pytest.raises(ConfigError, match="zk_tls_cert.*does not exist"):
        zk_secure_context(missing)
