"""The pure challenge-response (``zabray.wire.auth``): who passes, who is refused, and replays."""

from __future__ import annotations

import pickle

import pytest

from zabray.errors import ConfigError
from zabray.wire.auth import CLIENT, PEER, Acceptor, AuthFailed, Connector, Secret, is_auth_frame

K = Secret(b"k" * 32)
OTHER = Secret(b"o" * 32)
CTX = PEER + b"handshake-bytes"


def nonce(i: int) -> bytes:
    return i.to_bytes(32, "big")


def exchange(conn_secret: Secret, acc_secret: Secret, *, ctx_c: bytes = CTX, ctx_a: bytes = CTX,
             nc: int = 1, na: int = 2) -> tuple[Connector, Acceptor, bytes, bytes, bytes]:
    c = Connector(conn_secret, ctx_c, nonce(nc))
    a = Acceptor(acc_secret, ctx_a, nonce(na))
    hello = c.hello()
    chal = a.challenge(hello)
    proof = c.proof(chal)
    a.verify(proof)
    return c, a, hello, chal, proof


def test_both_sides_with_the_secret_complete() -> None:
    c, a, hello, chal, proof = exchange(K, K)
    assert c.done and a.done
    assert all(is_auth_frame(p) for p in (hello, chal, proof))
    assert not is_auth_frame(b"\x93\xa6SUBMIT\x01\xc4\x01x")


def test_connector_refuses_an_acceptor_without_the_secret() -> None:
    c = Connector(K, CTX, nonce(1))
    a = Acceptor(OTHER, CTX, nonce(2))
    with pytest.raises(AuthFailed, match="does not hold"):
        c.proof(a.challenge(c.hello()))
    assert not c.done


def test_acceptor_refuses_a_connector_without_the_secret() -> None:
    c = Connector(OTHER, CTX, nonce(1))
    a = Acceptor(K, CTX, nonce(2))
    chal = a.challenge(c.hello())
    # The connector notices first (the acceptor's MAC does not match its key) ...
    with pytest.raises(AuthFailed):
        c.proof(chal)
    # ... and a proof forged with the wrong key fails at the acceptor.
    from zabray.wire.auth import _mac, _pack

    forged = _pack("PROOF", _mac(OTHER, b"connector", CTX, nonce(1), nonce(2)))
    with pytest.raises(AuthFailed, match="does not match"):
        a.verify(forged)
    assert not a.done


def test_identity_is_bound_a_proof_for_one_channel_does_not_admit_another() -> None:
    with pytest.raises(AuthFailed):
        exchange(K, K, ctx_c=PEER + b"channel(2,1,5,5)", ctx_a=PEER + b"channel(2,1,5,6)")
    with pytest.raises(AuthFailed):
        exchange(K, K, ctx_c=CLIENT + b"x", ctx_a=PEER + b"x")


def test_replayed_proof_and_challenge_are_refused() -> None:
    _, _, hello, chal, proof = exchange(K, K, nc=1, na=2)
    # Replay the whole connector side to an acceptor with a fresh nonce.
    a2 = Acceptor(K, CTX, nonce(3))
    a2.challenge(hello)
    with pytest.raises(AuthFailed):
        a2.verify(proof)
    # Replay the acceptor side to a connector with a fresh nonce.
    c2 = Connector(K, CTX, nonce(4))
    c2.hello()
    with pytest.raises(AuthFailed):
        c2.proof(chal)


def test_reflection_and_out_of_turn_messages_are_refused() -> None:
    c = Connector(K, CTX, nonce(1))
    a = Acceptor(K, CTX, nonce(2))
    chal = a.challenge(c.hello())
    with pytest.raises(AuthFailed):  # the acceptor's own challenge, reflected as a proof
        a.verify(chal)
    a2 = Acceptor(K, CTX, nonce(2))
    with pytest.raises(AuthFailed, match="out of turn"):
        a2.verify(b"anything")
    with pytest.raises(AuthFailed, match="repeats"):  # our nonce sent back as the hello
        Acceptor(K, CTX, nonce(7)).challenge(Connector(K, CTX, nonce(7)).hello())
    a3 = Acceptor(K, CTX, nonce(2))
    h = Connector(K, CTX, nonce(1)).hello()
    a3.challenge(h)
    with pytest.raises(AuthFailed, match="second"):
        a3.challenge(h)


@pytest.mark.parametrize("payload", [b"", b"\xc1", b"\x93\x01\x02\x03", b"\x94\xabzabray-auth\x01\xa5HELLO\xc4\x01x"])
def test_garbage_is_an_auth_failure_not_a_crash(payload: bytes) -> None:
    with pytest.raises(AuthFailed):
        Acceptor(K, CTX, nonce(2)).challenge(payload)
    with pytest.raises(AuthFailed):
        Connector(K, CTX, nonce(1)).proof(payload)


def test_secret_is_never_shown_and_survives_pickling() -> None:
    s = Secret(b"\x01" * 16 + b"topsecret-value!")
    assert "topsecret" not in repr(s) and "topsecret" not in str(s) and "topsecret" not in f"{[s]}"
    assert pickle.loads(pickle.dumps(s)) == s
    with pytest.raises(ConfigError, match="16 to"):
        Secret(b"short")
    with pytest.raises(ConfigError):
        Secret("a string" * 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Connector(K, CTX, b"short nonce")
