"""The SASL users of a JAAS file in ZooKeeper's format (``zabray.zk.jaas``), and the config key
that names one: users come out, mistakes name the file and line and never a password."""

from __future__ import annotations

from pathlib import Path

import pytest

from zabray.config import EnsembleConfig
from zabray.errors import ConfigError
from zabray.zk.jaas import JaasError, digest_users, parse

# What kazoo's test harness writes for ZooKeeper, and the admin guide's Client section.
KAZOO = """
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_super="super_secret"
    user_jaasuser="jaas_password";
};
/* the client side, for the Java client */
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="jaasuser" // a comment
    password="jaas_password";
};
"""


def test_kazoos_file_gives_its_users_and_sections() -> None:
    assert digest_users(KAZOO) == {"super": "super_secret", "jaasuser": "jaas_password"}
    sections = parse(KAZOO)
    assert list(sections) == ["Server", "Client"]
    assert sections["Client"][0].options == {"username": "jaasuser", "password": "jaas_password"}
    assert digest_users('Zk { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="p\\"q"; };',
                        section="Zk") == {"a": 'p"q'}


@pytest.mark.parametrize("text,why", [
    ('Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule\n  maybe user_a="x";\n};', r"j\.conf:3: control flag 'maybe'"),
    ('Server {\n  com.sun.security.auth.module.Krb5LoginModule required\n  keyTab="/k";\n};', r"j\.conf:2: .*Kerberos \(GSSAPI\)"),
    ('Server {\n  org.example.Other required;\n};', r"j\.conf:2: login module org\.example\.Other is not supported"),
    ('Server {\n org.apache.zookeeper.server.auth.DigestLoginModule required\n user_a="x;\n};', r"j\.conf:3: a string that is never closed"),
    ('Server {\n org.apache.zookeeper.server.auth.DigestLoginModule required user_a="x"\n', r"j\.conf:2: the file ends"),
    ('Client { org.apache.zookeeper.server.auth.DigestLoginModule required; };', r"no 'Server' section \(sections: Client\)"),
    ('Server { org.apache.zookeeper.server.auth.DigestLoginModule required username="a"; };', "defines no DIGEST-MD5 user"),
    ('Server { };\nServer { };', r"j\.conf:2: section 'Server' appears twice"),
])
def test_mistakes_name_the_file_and_line(text: str, why: str) -> None:
    with pytest.raises(JaasError, match=why) as e:
        digest_users(text, "j.conf")
    assert '"x"' not in str(e.value)


def test_the_config_key_reads_the_file_and_reports_it(tmp_path: Path) -> None:
    f = tmp_path / "jaas.conf"
    f.write_text(KAZOO)
    cfg = EnsembleConfig.load(None, service="zookeeper", zk_sasl_jaas_file=str(f))
    assert cfg.sasl_users() == {"super": "super_secret", "jaasuser": "jaas_password"}
    assert EnsembleConfig.load(None, service="zookeeper").sasl_users() is None
    with pytest.raises(ConfigError, match="zk_sasl_jaas_file': cannot read .*nope.conf"):
        EnsembleConfig.load(None, service="zookeeper", zk_sasl_jaas_file=str(tmp_path / "nope.conf")).sasl_users()
    f.write_text('Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="secret1" x; };')
    with pytest.raises(ConfigError, match=r"jaas.conf:1: expected '='") as e:
        EnsembleConfig.load(None, service="zookeeper", zk_sasl_jaas_file=str(f)).sasl_users()
    assert "secret1" not in str(e.value)
    with pytest.raises(ConfigError, match="needs service: zookeeper"):
        EnsembleConfig.load(None, zk_sasl_jaas_file=str(f))
