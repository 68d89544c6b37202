"""SASL DIGEST-MD5 (RFC 2831), the server side: the RFC's own worked example, a real client
(pure-sasl, kazoo's SASL library) against it, and every way a digest-response can be wrong."""

from __future__ import annotations

import pytest
from puresasl.client import SASLClient

from zabray.zk.digest_md5 import DigestMD5Server, SaslFailure, parse_directives, response_value

# RFC 2831 section 4: user "chris", password "secret", an IMAP server.
RFC = dict(username="chris", realm="elwood.innosoft.com", password="secret", nonce="OA6MG9tEQGm2hh",
           cnonce="OA6MHXh6VqTrRk", nc="00000001", qop="auth", digest_uri="imap/elwood.innosoft.com")


def test_the_rfc_example_gives_the_rfcs_response_and_rspauth() -> None:
    assert response_value(**RFC) == "d388dad90d4bbd760a152321f2143af7"
    assert response_value(**RFC, for_server=True) == "ea40f60335c427b5527b84dbabcdfffd"


def test_the_rfc_example_exchange_against_the_server() -> None:
    s = DigestMD5Server({"chris": "secret"}, "OA6MG9tEQGm2hh", realm="elwood.innosoft.com", service="imap",
                        host="elwood.innosoft.com")
    challenge = parse_directives(s.respond(b"").decode())
    assert challenge == {"realm": "elwood.innosoft.com", "nonce": "OA6MG9tEQGm2hh", "qop": "auth",
                         "charset": "utf-8", "algorithm": "md5-sess"}
    # the client's digest-response as the RFC prints it
    rsp = ('charset=utf-8,username="chris",realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",nc=00000001,'
           'cnonce="OA6MHXh6VqTrRk",digest-uri="imap/elwood.innosoft.com",'
           'response=d388dad90d4bbd760a152321f2143af7,qop=auth')
    assert s.respond(rsp.encode()) == b"rspauth=ea40f60335c427b5527b84dbabcdfffd"
    assert s.complete and s.user == "chris"


def _pure_sasl(user: str, password: str, server: DigestMD5Server) -> SASLClient:
    """Run pure-sasl's DIGEST-MD5 client against ``server`` as kazoo drives it."""
    c = SASLClient(host="zk-sasl-md5", service="zookeeper", mechanism="DIGEST-MD5", username=user, password=password)
    challenge = None
    while not c.complete:
        token = c.process(challenge)
        if c.complete and not token:
            break
        challenge = server.respond(token or b"")
    return c


def test_pure_sasl_authenticates_and_checks_the_servers_proof() -> None:
    s = DigestMD5Server({"jaasuser": "jaas_password", "super": "super_secret"}, "n0nce-abc")
    c = _pure_sasl("jaasuser", "jaas_password", s)
    assert c.complete and s.complete and s.user == "jaasuser"  # pure-sasl verified rspauth


@pytest.mark.parametrize("user,password,why", [("jaasuser", "wrong", "wrong password for SASL user 'jaasuser'"),
                                               ("nobody", "x", "no SASL user 'nobody'")])
def test_a_wrong_password_or_user_fails_without_naming_the_password(user: str, password: str, why: str) -> None:
    s = DigestMD5Server({"jaasuser": "jaas_password"}, "n0nce")
    with pytest.raises(SaslFailure) as e:
        _pure_sasl(user, password, s)
    assert str(e.value) == why and "jaas_password" not in str(e.value) and not s.complete


def _response(**over: str) -> bytes:
    d = {"username": "u", "realm": "zk-sasl-md5", "nonce": "N1", "cnonce": "C1", "nc": "00000001", "qop": "auth",
         "digest-uri": "zookeeper/zk-sasl-md5"}
    d.update(over)
    d["response"] = over.get("response") or response_value(
        d["username"], d["realm"], "pw", d["nonce"], d["cnonce"], d["nc"], d["qop"], d["digest-uri"], d.get("authzid"))
    return ",".join(f'{k}="{v}"' for k, v in d.items()).encode()


def _server() -> DigestMD5Server:
    s = DigestMD5Server({"u": "pw"}, "N1")
    s.respond(b"")
    return s


def test_a_well_formed_response_passes_and_authzid_is_hashed_in() -> None:
    s = _server()
    assert s.respond(_response()).startswith(b"rspauth=")
    s = _server()
    s.respond(_response(authzid="someone-else"))
    assert s.user == "u"  # ZooKeeper authorizes the authentication id, whatever authzid asks


@pytest.mark.parametrize("over,why", [
    ({"nonce": "N2"}, "another nonce"),
    ({"nc": "00000002"}, "nonce-count"),
    ({"qop": "auth-int"}, "qop 'auth-int'"),
    ({"digest-uri": "imap/zk-sasl-md5"}, "digest-uri"),
    ({"digest-uri": "zookeeper/other-host"}, "digest-uri"),
    ({"realm": "elsewhere"}, "realm 'elsewhere' was not offered"),
    ({"response": "0" * 32}, "wrong password"),
    ({"cipher": "rc4"}, "cipher"),
    ({"charset": "latin1"}, "charset"),
])
def test_every_wrong_directive_fails(over: dict[str, str], why: str) -> None:
    with pytest.raises(SaslFailure, match=why):
        _server().respond(_response(**over))


def test_missing_directives_and_bad_syntax_fail() -> None:
    for key in ("username", "nonce", "cnonce", "nc", "digest-uri", "response"):
        text = b",".join(p for p in _response().split(b",") if not p.startswith(key.encode() + b"="))
        with pytest.raises(SaslFailure, match=f"no {key}"):
            _server().respond(text)
    with pytest.raises(SaslFailure, match="twice"):
        _server().respond(_response() + b',nonce="N1"')
    with pytest.raises(SaslFailure, match="malformed|expected"):
        _server().respond(b'username="u" nonce="N1"')
    with pytest.raises(SaslFailure, match="UTF-8"):
        _server().respond(b"\xff\xfe")


def test_directive_lists_follow_rfc_2616() -> None:
    assert parse_directives(' ,a=1 , B="x\\"y\\\\z",,c=""') == {"a": "1", "b": 'x"y\\z', "c": ""}


def test_the_exchange_starts_empty_and_gssapi_gets_a_clear_refusal() -> None:
    with pytest.raises(SaslFailure, match="GSSAPI"):
        DigestMD5Server({"u": "pw"}, "N1").respond(bytes([0x60, 0x82, 0x02, 0x00]) + b"krb5 token")
    with pytest.raises(SaslFailure, match="starts with an empty client token"):
        DigestMD5Server({"u": "pw"}, "N1").respond(b"username=u")
    s = _server()
    s.respond(_response())
    with pytest.raises(SaslFailure, match="already complete"):
        s.respond(b"")


def test_passwords_outside_latin1_are_hashed_as_utf8_with_charset() -> None:
    for password in ("pässwörd", "密码"):
        s = DigestMD5Server({"ü": password}, "N1")
        s.respond(b"")
        resp = response_value("ü", "zk-sasl-md5", password, "N1", "C", "00000001", "auth", "zookeeper/zk-sasl-md5")
        token = (f'charset=utf-8,username="ü",realm="zk-sasl-md5",nonce="N1",cnonce="C",nc=00000001,qop=auth,'
                 f'digest-uri="zookeeper/zk-sasl-md5",response={resp}').encode()
        assert s.respond(token).startswith(b"rspauth=") and s.user == "ü"
    with pytest.raises(SaslFailure, match="ISO 8859-1"):
        response_value("u", "r", "密码", "N", "C", "00000001", "auth", "x/y", utf8=False)
