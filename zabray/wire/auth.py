"""Membership proof on a fresh connection: a challenge-response keyed by the ensemble secret.

Pure: no sockets, clocks or randomness (the caller passes fresh nonces in). Used by replicas on
every peer connection (``actors.transport``) and by the broadcast client on the client port
(``zabray.client.broadcast``); it must not import ``actors``.

The exchange, after the connecting side's identity frame (the transport's ``Handshake``, or the
client protocol's handshake), whose exact bytes are the ``context``::

    connector -> acceptor   HELLO      nonce_c
    acceptor  -> connector  CHALLENGE  nonce_a, mac_a = HMAC(K, "acceptor"  | context | nonce_c | nonce_a)
    connector -> acceptor   PROOF      mac_c = HMAC(K, "connector" | context | nonce_c | nonce_a)

Invariants:
- Each side's MAC covers both nonces, so a captured PROOF or CHALLENGE is useless on any other
  connection (the other side's nonce is fresh), and the identity frame, so a proof made for
  one channel (sender, incarnation, iteration) cannot admit another.
- The role label differs per direction, so a CHALLENGE reflected back as a PROOF fails.
- The connector checks the acceptor's MAC before it sends its own proof or any message, so a
  process squatting on a member's address learns nothing it could replay and is sent nothing.
- MACs are compared in constant time; the secret never appears in a repr, message or error.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass
from typing import Any

import msgpack

from zabray.errors import CodecError, ConfigError

MAGIC = "zabray-auth"
VERSION = 1
NONCE_BYTES = 32
MAC_BYTES = 32
MIN_SECRET_BYTES = 16
MAX_SECRET_BYTES = 1024
PEER = b"peer"
"""Context prefix for replica-to-replica connections."""
CLIENT = b"client"
"""Context prefix for broadcast-client connections."""

_HELLO = "HELLO"
_CHALLENGE = "CHALLENGE"
_PROOF = "PROOF"


class AuthFailed(CodecError):
    """The other side did not prove it holds the ensemble secret (or broke the exchange).

    A ``CodecError``: whoever sees it drops the connection, exactly as for malformed bytes.
    """


class Secret:
    """The ensemble secret. Opaque: its repr and str never show the key."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or not MIN_SECRET_BYTES <= len(key) <= MAX_SECRET_BYTES:
            n = len(key) if isinstance(key, bytes) else type(key).__name__
            raise ConfigError(
                f"an ensemble secret must be {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes, got {n}"
            )
        self._key = key

    @property
    def key(self) -> bytes:
        return self._key

    def __repr__(self) -> str:
        return "Secret(<redacted>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and hmac.compare_digest(self._key, other._key)

    def __hash__(self) -> int:
        return hash(Secret)

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:  # Ray hands it to replicas by pickling
        return (Secret, (self._key,))


def _mac(secret: Secret, role: bytes, context: bytes, nonce_c: bytes, nonce_a: bytes) -> bytes:
    h = hmac.new(secret.key, digestmod=hashlib.sha256)
    h.update(b"zabray-auth/1\x00")
    for part in (role, context, nonce_c, nonce_a):
        h.update(struct.pack(">I", len(part)))  # length-prefixed: no two inputs concatenate alike
        h.update(part)
    return h.digest()


def _check_nonce(nonce: bytes) -> bytes:
    if not isinstance(nonce, bytes) or len(nonce) != NONCE_BYTES:
        raise ValueError(f"a nonce must be {NONCE_BYTES} fresh random bytes")
    return nonce


def _pack(*obj: Any) -> bytes:
    out: bytes = msgpack.packb([MAGIC, VERSION, *obj], use_bin_type=True)
    return out


def _unpack(payload: bytes, kind: str, n: int) -> list[Any]:
    """The fields of an auth frame of ``kind`` with ``n`` byte strings of fixed sizes."""
    try:
        obj = msgpack.unpackb(payload, raw=False, use_list=True)
    except Exception:  # msgpack raises several unrelated types on garbage
        raise AuthFailed(f"expected an auth {kind}, got undecodable bytes") from None
    if type(obj) is not list or len(obj) != 3 + n or obj[0] != MAGIC or obj[2] != kind:
        raise AuthFailed(f"expected an auth {kind}")
    if obj[1] != VERSION:
        raise AuthFailed(f"unsupported auth version {obj[1]!r:.20}")
    fields = obj[3:]
    if any(type(f) is not bytes or len(f) != 32 for f in fields):
        raise AuthFailed(f"auth {kind} fields must be 32-byte strings")
    return fields


@dataclass(slots=True)
class Connector:
    """The connecting side: ``hello()``, then ``proof(challenge)`` (raises ``AuthFailed``)."""

    secret: Secret
    context: bytes
    nonce: bytes
    done: bool = False

    def __post_init__(self) -> None:
        _check_nonce(self.nonce)

    def hello(self) -> bytes:
        return _pack(_HELLO, self.nonce)

    def proof(self, challenge: bytes) -> bytes:
        """Check the acceptor's CHALLENGE; the PROOF payload to send if it holds the secret."""
        if self.done:
            raise AuthFailed("a second auth challenge on one connection")
        nonce_a, mac_a = _unpack(challenge, _CHALLENGE, 2)
        want = _mac(self.secret, b"acceptor", self.context, self.nonce, nonce_a)
        if not hmac.compare_digest(mac_a, want):
            raise AuthFailed("the other side does not hold this ensemble's secret")
        self.done = True
        return _pack(_PROOF, _mac(self.secret, b"connector", self.context, self.nonce, nonce_a))


@dataclass(slots=True)
class Acceptor:
    """The accepting side: ``challenge(hello)``, then ``verify(proof)`` (raises ``AuthFailed``)."""

    secret: Secret
    context: bytes
    nonce: bytes
    _peer_nonce: bytes | None = None
    done: bool = False

    def __post_init__(self) -> None:
        _check_nonce(self.nonce)

    @property
    def challenged(self) -> bool:
        """A HELLO was answered; the next frame must be the PROOF."""
        return self._peer_nonce is not None

    def challenge(self, hello: bytes) -> bytes:
        if self._peer_nonce is not None:
            raise AuthFailed("a second auth hello on one connection")
        (nonce_c,) = _unpack(hello, _HELLO, 1)
        if hmac.compare_digest(nonce_c, self.nonce):  # our own nonce reflected back at us
            raise AuthFailed("the hello repeats this side's nonce")
        self._peer_nonce = nonce_c
        return _pack(_CHALLENGE, self.nonce, _mac(self.secret, b"acceptor", self.context, nonce_c, self.nonce))

    def verify(self, proof: bytes) -> None:
        if self._peer_nonce is None or self.done:
            raise AuthFailed("an auth proof out of turn")
        (mac_c,) = _unpack(proof, _PROOF, 1)
        want = _mac(self.secret, b"connector", self.context, self._peer_nonce, self.nonce)
        if not hmac.compare_digest(mac_c, want):
            raise AuthFailed("the proof does not match this ensemble's secret")
        self.done = True


def is_auth_frame(payload: bytes) -> bool:
    """Cheap test: does ``payload`` start like an auth frame (used to tell a HELLO from a request)?"""
    magic = msgpack.packb(MAGIC, use_bin_type=True)
    return len(payload) > 1 + len(magic) and payload[1 : 1 + len(magic)] == magic
