"""Garbage on the quorum and client ports drops that connection; the replica keeps serving."""

from __future__ import annotations

import socket
import struct
import zlib

import msgpack
import pytest

from tests.driver.conftest import assert_no_loss, converged, wait_until
from zabray.errors import CodecError
from zabray.trace import records as trace
from zabray.wire import clientproto as cp
from zabray.wire.framing import DEFAULT_MAX_FRAME, frame

pytestmark = pytest.mark.ray


def blast(addr: tuple[str, int], payload: bytes) -> bool:
    """Send ``payload`` and report whether the replica closed the connection on us."""
    with socket.create_connection(addr, timeout=5) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(10)
        try:
            return s.recv(1024) == b""
        except ConnectionResetError:
            return True


def bad_crc_frame(payload: bytes) -> bytes:
    return struct.pack(">II", len(payload), zlib.crc32(payload) ^ 1) + payload


ATTACKS = {
    "garbage": b"\x00\xffGET / HTTP/1.1\r\n\r\n" * 10,
    "bad checksum": bad_crc_frame(msgpack.packb(["zabray", 1, "x", 9, 1])),
    "truncated frame": frame(b"x" * 100)[:50],
    "huge length": struct.pack(">II", 2**31, 0) + b"abc",
    "wrong ensemble": frame(msgpack.packb(["zabray", 1, "someone-else", 2, 1])),
    "old iteration": frame(msgpack.packb(["zabray", 1, "ENSEMBLE", 2, 0, 2, 1, 0, 0])),
    "client wrong ensemble": frame(msgpack.packb(["zabray-client", cp.VERSION, "someone-else"])),
}


def test_hostile_frames_drop_only_their_connection_and_lose_nothing(start) -> None:
    ens = start(3)
    ens.wait_for_leader(30)
    acked = {int(z): trace.digest(v) for v in [b"a", b"b", b"c"] for z in [ens.submit(v)]}
    replicas = ens.info["replicas"]
    for sid, info in replicas.items():
        quorum = (info["quorum"][0], int(info["quorum"][1]))
        client = (info["client"][0], int(info["client"][1]))
        for name, payload in ATTACKS.items():
            payload = payload.replace(b"ENSEMBLE", ens.name.encode())
            assert blast(quorum, payload), f"replica {sid} kept a quorum connection after {name}"
            assert blast(client, payload), f"replica {sid} kept a client connection after {name}"
        # A well-framed client request with a malformed body is dropped too.
        hello = frame(cp.handshake(ens.name))
        assert blast(client, hello + frame(msgpack.packb(["SUBMIT", -1, "not bytes"])))
    # A value too large for one frame is refused before it is sent; the client goes on.
    with pytest.raises(CodecError, match="too large: a client frame holds at most"):
        ens.submit(bytes(DEFAULT_MAX_FRAME))
    for v in [b"d", b"e"]:
        acked[int(ens.submit(v))] = trace.digest(v)
    wait_until(lambda: converged(ens), what="every replica still serving")
    assert_no_loss(ens, acked)
    st = ens.status()
    assert all(s.transport.get("bad_frames", 0) + s.transport.get("refused_handshakes", 0) > 0 for s in st)
    assert all(s.stats["bad_client_frames"] > 0 for s in st)
