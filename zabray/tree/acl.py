"""ZooKeeper's ACLs, pure: validating an ACL, checking a permission, digest identities.

The rules are ZooKeeper 3.8's (PrepRequestProcessor.fixupACL, ZooKeeperServer.checkACL,
FinalRequestProcessor's getACL, the digest and ip authentication providers), checked against a
live 3.8 server:

- an ACL is a list of (perms, scheme, id); duplicates are dropped (first kept), an empty list is
  INVALID_ACL. Perms are not validated (3.8 accepts 0, 64 or -1 alike).
- schemes: ``world`` (only ``anyone``), ``digest`` (``user:base64(sha1(user:password))``, two
  non-empty-trailing ``:`` parts), ``ip`` (IPv4 address or ``a.b.c.d/bits``), ``sasl`` (only where
  SASL is configured, as ZooKeeper knows the scheme only with its SASLAuthenticationProvider; an
  id is a user name, invalid only as a malformed Kerberos name), and ``auth``, which expands to
  every authenticated id of the requester (digest and sasl ids; ip ids do not count) and is
  INVALID_ACL when there is none. Anything else is INVALID_ACL.
- a requester holding an id of scheme ``super`` passes every check; an empty ACL lets anyone in.
  A ``sasl`` entry admits the same SASL user, and the SASL user named ``super`` (ZooKeeper's
  SASLAuthenticationProvider.matches).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable

from zabray.tree.errors import AuthFailedError, InvalidACLError, NoAuthError
from zabray.tree.znode import ACL, AuthId

_INT = re.compile(r"[+-]?[0-9]+\Z")


def digest_id(credential: str) -> str:
    """``user:password`` -> ``user:base64(sha1(user:password))`` (DigestAuthenticationProvider.generateDigest)."""
    user = credential.split(":", 1)[0]
    return user + ":" + base64.b64encode(hashlib.sha1(credential.encode("utf-8")).digest()).decode("ascii")


def authenticate(scheme: str, credential: bytes | None, *, super_digest: str | None = None,
                 address: str | None = None) -> tuple[AuthId, ...]:
    """The ids an ``addAuth(scheme, credential)`` grants, as ZooKeeper's providers grant them:
    ``digest`` the credential's digest id (AuthFailedError for a null one), ``ip`` the
    connection's own ``address`` whatever the credential; AuthFailedError for any other scheme.
    ``super_digest`` is ``super:<base64 sha1>``: a credential matching it also grants ("super", "")."""
    if scheme == "ip" and address is not None:
        return (("ip", address),)
    if scheme != "digest":
        raise AuthFailedError(f"unknown authentication scheme {scheme!r}")
    if credential is None:
        raise AuthFailedError("digest credentials are null")
    try:
        text = credential.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthFailedError("digest credentials must be UTF-8") from None
    d = digest_id(text)
    return ((("super", ""),) if super_digest is not None and d == super_digest else ()) + (("digest", d),)


def _java_split(s: str, sep: str) -> list[str]:
    """String.split(sep) for a literal separator: trailing empty strings dropped."""
    parts = s.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return [] if parts == [""] and s else parts


def _int(s: str) -> int | None:
    return int(s) if _INT.match(s) else None


def _v4(addr: str) -> bytes | None:
    parts = addr.split(".")
    if len(parts) != 4:
        return None
    out = []
    for p in parts:
        v = _int(p)
        if v is None or not 0 <= v <= 255:
            return None
        out.append(v)
    return bytes(out)


def _cidr(expr: str) -> tuple[bytes, int] | None:
    """(masked address, bits) of ``a.b.c.d`` or ``a.b.c.d/bits``; None if malformed."""
    addr, _, bits_s = expr.partition("/")
    raw = _v4(addr)
    if raw is None:
        return None
    bits = 32
    if "/" in expr:
        b = _int(bits_s)
        if b is None or not 0 <= b <= 32:
            return None
        bits = b
    return _mask(raw, bits), bits


def _mask(raw: bytes, bits: int) -> bytes:
    n = int.from_bytes(raw, "big")
    keep = ((1 << bits) - 1) << (32 - bits) if bits else 0
    return (n & keep).to_bytes(4, "big")


def ip_matches(address: str, expr: str) -> bool:
    """Does client ``address`` fall in the ip ACL id ``expr`` (an address or CIDR)?"""
    c = _cidr(expr)
    raw = _v4(address)
    return c is not None and raw is not None and _mask(raw, c[1]) == c[0]


_KERBEROS_NAME = re.compile(r"([^/@]*)(/([^/@]*))?@([^/@]*)")
_AUTHENTICATED = frozenset({"digest", "sasl"})  # the schemes whose providers say isAuthenticated


def valid_id(scheme: str, id_: str, *, sasl: bool = False) -> bool:
    """Is (scheme, id) an id a stored ACL may name? (``auth`` is expanded before this.)
    ``sasl``: the ensemble authenticates with SASL, so the ``sasl`` scheme exists."""
    if scheme == "world":
        return id_ == "anyone"
    if scheme == "digest":
        return len(_java_split(id_, ":")) == 2
    if scheme == "ip":
        return _cidr(id_) is not None
    if scheme == "sasl" and sasl:
        # ZooKeeper's isValid: whatever Hadoop's KerberosName accepts (a name with '@' must
        # have the form primary[/instance]@REALM)
        return "@" not in id_ or _KERBEROS_NAME.fullmatch(id_) is not None
    return False


def fixup_acl(acl: Iterable[ACL], auth: Iterable[AuthId], path: str, *, sasl: bool = False) -> tuple[ACL, ...]:
    """The ACL to store for a create/setACL by a requester holding ``auth``; INVALID_ACL as above."""
    uniq = tuple(dict.fromkeys(acl))
    if not uniq:
        raise InvalidACLError(f"{path}: the ACL is empty", path=path)
    out: list[ACL] = []
    for perms, scheme, id_ in uniq:
        if scheme == "auth":
            ids = [(perms, s, i) for s, i in auth if s in _AUTHENTICATED]
            if not ids:
                raise InvalidACLError(f"{path}: the 'auth' scheme needs an authenticated (digest or sasl) identity",
                                      path=path)
            out.extend(ids)
        elif valid_id(scheme, id_, sasl=sasl):
            out.append((perms, scheme, id_))
        else:
            raise InvalidACLError(f"{path}: invalid ACL id {scheme}:{id_}", path=path)
    return tuple(dict.fromkeys(out))


def allowed(acl: Iterable[ACL], perm: int, auth: Iterable[AuthId]) -> bool:
    """ZooKeeperServer.checkACL: does ``auth`` grant any bit of ``perm`` on ``acl``?"""
    entries = acl if type(acl) is tuple else tuple(acl)
    if not entries:
        return True
    ids = auth if type(auth) is tuple else tuple(auth)
    for s, _ in ids:
        if s == "super":
            return True
    for perms, scheme, id_ in entries:
        if not perms & perm:
            continue
        if scheme == "world" and id_ == "anyone":
            return True
        for s, i in ids:
            if s != scheme:
                continue
            if ((scheme == "digest" and i == id_) or (scheme == "ip" and ip_matches(i, id_))
                    or (scheme == "sasl" and (i == id_ or i == "super"))):
                return True
    return False


def check(acl: Iterable[ACL], perm: int, auth: Iterable[AuthId], path: str) -> None:
    """Raise NoAuthError unless ``allowed``."""
    if not allowed(acl, perm, auth):
        raise NoAuthError(f"{path}: not authorized", path=path)


def redacted(acl: Iterable[ACL]) -> tuple[ACL, ...]:
    """The ACL as getACL shows it to a reader without ADMIN: digest ids become ``user:x``."""
    return tuple((p, s, re.sub(r":.*", ":x", i) if s == "digest" else i) for p, s, i in acl)
