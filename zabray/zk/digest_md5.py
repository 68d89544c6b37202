"""SASL DIGEST-MD5 (RFC 2831), the server side, pure: tokens in, tokens out.

ZooKeeper authenticates a connection with DIGEST-MD5 when its JAAS ``Server`` section names a
``DigestLoginModule``: the client's SASL requests carry the mechanism's tokens. The exchange
(RFC 2831 section 2.1), with authentication only (qop "auth", the one ZooKeeper's clients use):

1. the client sends an empty token; the server answers a digest-challenge: its realm, a nonce,
   ``qop="auth"``, ``charset=utf-8``, ``algorithm=md5-sess``;
2. the client sends a digest-response: username, realm, the nonce, its cnonce, nonce-count 1,
   qop, digest-uri (``serv-type/host``) and ``response``, a keyed MD5 over all of them and the
   password (2.1.2.1); the server computes the same from the password it holds and answers
   ``rspauth=...`` (2.1.3), which proves to the client that the server knows the password too.

ZooKeeper's DIGEST-MD5 has realm and host ``zk-sasl-md5`` and serv-type ``zookeeper``, whatever
the server's host name (its SecurityUtils hard-codes them, and so does kazoo). The authorized
identity is the username (ZooKeeper's SaslServerCallbackHandler takes the authentication id,
whatever authzid the client asked for). The nonce comes from the caller (the shell draws it from
a secure random source), so this module has no randomness of its own. Every failure raises
``SaslFailure`` with a reason that names no password and no digest.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping

REALM = "zk-sasl-md5"
SERVICE = "zookeeper"
HOST = "zk-sasl-md5"
GSSAPI_TOKEN_TAG = 0x60
"""The first byte of a Kerberos GSS-API initial context token (RFC 2743 3.1): a client trying
GSSAPI against a DIGEST-MD5 server starts with it."""


class SaslFailure(Exception):
    """The client failed to authenticate; ``str()`` says why (never a password or digest)."""


def _h(data: bytes) -> bytes:
    return hashlib.md5(data).digest()  # noqa: S324 - MD5 is what RFC 2831 specifies


def _hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()  # noqa: S324


def encode_value(text: str, utf8: bool) -> bytes:
    """A username, realm or password as it is hashed (RFC 2831 2.1.2.1): ISO 8859-1 when every
    character fits it, else UTF-8 (only allowed with ``charset=utf-8``)."""
    try:
        return text.encode("iso-8859-1")
    except UnicodeEncodeError:
        if not utf8:
            raise SaslFailure("a value outside ISO 8859-1 without charset=utf-8") from None
        return text.encode("utf-8")


def response_value(username: str, realm: str, password: str, nonce: str, cnonce: str, nc: str, qop: str,
                   digest_uri: str, authzid: str | None = None, *, utf8: bool = True,
                   for_server: bool = False) -> str:
    """The ``response`` directive a client sends (RFC 2831 2.1.2.1), or with ``for_server`` the
    ``rspauth`` a server answers (2.1.3: A2 without "AUTHENTICATE"). Lowercase hex."""
    a1 = _h(b":".join([encode_value(username, utf8), encode_value(realm, utf8), encode_value(password, utf8)]))
    a1 += b":" + nonce.encode("utf-8") + b":" + cnonce.encode("utf-8")
    if authzid is not None:
        a1 += b":" + authzid.encode("utf-8")
    a2 = (b"" if for_server else b"AUTHENTICATE") + b":" + digest_uri.encode("utf-8")
    kd = ":".join([_hex(a1), nonce, nc, cnonce, qop, _hex(a2)])
    return _hex(kd.encode("ascii"))


# RFC 2616's token and quoted-string, as RFC 2831 uses them (2.1): key=value, comma-separated.
_DIRECTIVE = re.compile(r'\s*([!#$%&\'*+\-.^_`|~0-9A-Za-z]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s"]*)\s*')


def parse_directives(text: str) -> dict[str, str]:
    """A digest-challenge or digest-response as {directive: value}, quotes and escapes removed.
    Empty list elements are allowed (RFC 2616's ``#`` rule); a repeated or malformed directive
    is a ``SaslFailure``."""
    out: dict[str, str] = {}
    pos, n = 0, len(text)
    while pos < n:
        if text[pos] in " \t,":
            pos += 1
            continue
        m = _DIRECTIVE.match(text, pos)
        if m is None:
            raise SaslFailure(f"malformed directive list at character {pos}")
        key, raw = m[1].lower(), m[2]
        value = re.sub(r"\\(.)", r"\1", raw[1:-1]) if raw.startswith('"') else raw
        if key in out:
            raise SaslFailure(f"directive {key!r} given twice")
        out[key] = value
        pos = m.end()
        if pos < n and text[pos] != ",":
            raise SaslFailure(f"expected ',' at character {pos}")
    return out


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class DigestMD5Server:
    """One connection's DIGEST-MD5 exchange. ``users`` maps usernames to passwords (ZooKeeper's
    JAAS ``user_<name>="<password>"`` options); ``nonce`` is fresh and unguessable per exchange.
    Feed each client token to ``respond``; once ``complete``, ``user`` is the authorized id."""

    def __init__(self, users: Mapping[str, str], nonce: str, *, realm: str = REALM, service: str = SERVICE,
                 host: str = HOST) -> None:
        if not nonce or '"' in nonce or "\\" in nonce:
            raise ValueError("the nonce must be a non-empty string without quotes or backslashes")
        self._users = users
        self.nonce = nonce
        self.realm = realm
        self.service = service
        self.host = host
        self._step = 0
        self.complete = False
        self.user: str | None = None

    def challenge(self) -> bytes:
        return (f'realm={_quote(self.realm)},nonce={_quote(self.nonce)},qop="auth",charset=utf-8,'
                f"algorithm=md5-sess").encode()

    def respond(self, token: bytes) -> bytes:
        """The server's answer to the client's next token."""
        step, self._step = self._step, self._step + 1
        if step == 0:
            if token:
                if token[0] == GSSAPI_TOKEN_TAG:
                    raise SaslFailure("the client tried GSSAPI (Kerberos), which this server does not offer: "
                                      "it authenticates with DIGEST-MD5 only")
                raise SaslFailure("a DIGEST-MD5 exchange starts with an empty client token")
            return self.challenge()
        if step == 1:
            return self._verify(token)
        raise SaslFailure("the DIGEST-MD5 exchange is already complete")

    def _verify(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("the digest-response is not UTF-8") from None
        d = parse_directives(text)
        for key in ("username", "nonce", "cnonce", "nc", "digest-uri", "response"):
            if key not in d:
                raise SaslFailure(f"the digest-response has no {key}")
        if d.get("charset", "utf-8").lower() != "utf-8":
            raise SaslFailure(f"charset {d['charset']!r}: only utf-8 is defined")
        utf8 = "charset" in d
        if d["nonce"] != self.nonce:
            raise SaslFailure("the digest-response answers another nonce")
        if d["nc"].lower() != "00000001":
            raise SaslFailure(f"nonce-count {d['nc']!r}: this server's nonces are good for one use")
        qop = d.get("qop", "auth")
        if qop != "auth":
            raise SaslFailure(f"qop {qop!r}: this server offers authentication only (qop auth)")
        if "cipher" in d:
            raise SaslFailure("a cipher was chosen, but qop auth-conf was not offered")
        realm = d.get("realm", "")
        if realm not in ("", self.realm):
            raise SaslFailure(f"realm {realm!r} was not offered (the realm is {self.realm!r})")
        uri = d["digest-uri"].split("/")
        if len(uri) not in (2, 3) or uri[0] != self.service or uri[1].lower() != self.host.lower():
            raise SaslFailure(f"digest-uri {d['digest-uri']!r} names another service "
                              f"(expected {self.service}/{self.host})")
        username = d["username"]
        password = self._users.get(username)
        authzid = d.get("authzid")
        if password is None:
            raise SaslFailure(f"no SASL user {username!r}")
        expected = response_value(username, realm, password, self.nonce, d["cnonce"], d["nc"], qop, d["digest-uri"],
                                  authzid, utf8=utf8)
        if not hmac.compare_digest(expected, d["response"].lower()):
            raise SaslFailure(f"wrong password for SASL user {username!r}")
        self.complete = True
        self.user = username
        rspauth = response_value(username, realm, password, self.nonce, d["cnonce"], d["nc"], qop, d["digest-uri"],
                                 authzid, utf8=utf8, for_server=True)
        return f"rspauth={rspauth}".encode("ascii")


__all__ = ["HOST", "REALM", "SERVICE", "DigestMD5Server", "SaslFailure", "encode_value", "parse_directives",
           "response_value"]
