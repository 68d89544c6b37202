"""Hostile bytes on ZooKeeper's client port of a real 3-replica zabray ensemble (issue 13).

Random streams, random request frames after a good handshake, truncated frames, length prefixes
beyond ``zk_max_frame``, unknown opcodes, requests before the handshake and a resume with a wrong
password go to every replica over raw sockets. Each bad connection must be closed by the
replica (and counted in ``bad_zk_frames``), and nothing else may change: no replica restarts, a
kazoo session open throughout keeps its id, a wrong password does not end the session it names,
and every write kazoo had acknowledged before is read back afterwards.

A client that pipelines requests and does not read the replies is held back, as ZooKeeper holds
it: the replica stops taking its requests (counted in ``zk_throttled``) instead of keeping every
reply in memory, and answers all of them, in order, once the client reads.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from tests.driver.conftest import wait_until
from zabray.driver.ensemble import Ensemble
from zabray.wire import zkproto as zp

pytestmark = pytest.mark.ray
MAX_FRAME = 64 * 1024  # zk_max_frame for this ensemble: oversized frames stay cheap to send
MAX_OUTSTANDING = 50  # zk_max_outstanding for this ensemble


@pytest.fixture(scope="module")
def ens(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    tmp = tmp_path_factory.mktemp("zk-hostile")
    e = Ensemble.start(3, name=f"hostile-{os.getpid()}-{time.monotonic_ns() % 10**8}", data_dir=str(tmp / "data"),
                       run_dir=str(tmp / "run"), service="zookeeper", trace=False, zk_max_frame=MAX_FRAME,
                       zk_max_outstanding=MAX_OUTSTANDING)
    e.wait_for_leader()
    yield e
    e.stop()


def _ports(ens: Ensemble) -> list[int]:
    return [r.zk_client[1] for r in sorted(ens.status(), key=lambda r: r.sid) if r.zk_client]


def _bad_frames(ens: Ensemble) -> int:
    return sum(int(r.stats.get("bad_zk_frames", 0)) for r in ens.status())


def _closed_by_server(s: socket.socket, timeout: float = 30) -> bytes:
    """Read until the replica closes the connection; returns what it sent before closing."""
    s.settimeout(timeout)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return got
            got += b
    except ConnectionResetError:
        return got
    except TimeoutError:
        raise AssertionError(f"the replica kept a hostile connection open for {timeout} s") from None
    finally:
        s.close()


def _send(s: socket.socket, data: bytes) -> None:
    """Send, unless the replica already closed the connection (it may, mid-garbage)."""
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _handshake(port: int, session: int = 0, passwd: bytes = b"\0" * 16) -> tuple[socket.socket, zp.ConnectResponse]:
    s = _connect(port)
    s.sendall(zp.encode_record(zp.ConnectRequest(0, 0, 10000, session, passwd, False)))
    split = zp.FrameSplitter(admin_words=False)
    s.settimeout(30)
    while True:
        data = s.recv(65536)
        if not data:
            raise AssertionError("the replica closed the connection during the handshake")
        frames = split.feed(data)
        if frames:
            return s, zp.ConnectResponse.decode(frames[0])


def test_hostile_bytes_close_only_their_connection(ens: Ensemble) -> None:
    ports = _ports(ens)
    pids = {r.sid: r.pid for r in ens.status()}
    kz = KazooClient(hosts=ens.connect_string(), timeout=20)
    kz.start(timeout=30)
    try:
        session = kz.client_id[0]
        acked = {f"/h/n{i}": f"value-{i}".encode() for i in range(40)}
        kz.ensure_path("/h")
        for path, data in acked.items():
            kz.create(path, data)
        before = _bad_frames(ens)
        rng = random.Random(13)
        expected_bad = 0

        for port in ports:
            # A length prefix beyond zk_max_frame, before and after the handshake.
            for size in (MAX_FRAME + 1, 2**31 - 1, -5):
                s = _connect(port)
                _send(s, struct.pack(">i", size) + b"\0" * 64)
                _closed_by_server(s)
                expected_bad += 1
            s, _ = _handshake(port)
            _send(s, struct.pack(">i", MAX_FRAME + 100) + b"x" * 100)
            _closed_by_server(s)
            expected_bad += 1
            # An unknown opcode after the handshake.
            s, _ = _handshake(port)
            _send(s, zp.encode_request(1, 999, None))
            _closed_by_server(s)
            expected_bad += 1
            # A request before the handshake (getData where ConnectRequest belongs).
            s = _connect(port)
            _send(s, zp.encode_request(1, zp.OpCode.GET_DATA, zp.PathWatchRequest("/h/n0", False)))
            _closed_by_server(s)
            expected_bad += 1
            # Truncated frames: the client goes away mid-frame; the replica must just forget it.
            for cut in (2, 9, 20):
                s = _connect(port)
                _send(s, zp.encode_record(zp.ConnectRequest(0, 0, 10000, 0, b"\0" * 16, False))[:cut])
                s.close()
            s, _ = _handshake(port)
            _send(s, zp.encode_request(7, zp.OpCode.CREATE, zp.CreateRequest("/h/x", b"d", (), 0))[:-3])
            s.close()
            # Random streams, each ended by an oversized prefix so the replica must close it.
            for _ in range(5):
                s = _connect(port)
                _send(s, rng.randbytes(rng.randrange(1, 300)) + struct.pack(">i", 2**31 - 1))
                _closed_by_server(s)
            # Random request frames after a good handshake: known and unknown opcodes, garbage
            # bodies; then an unknown opcode, so every such connection ends closed.
            opcodes = [int(o) for o in zp.OpCode] + [rng.randrange(-20, 200) for _ in range(5)]
            for _ in range(8):
                s, _ = _handshake(port)
                for _ in range(rng.randrange(1, 6)):
                    body = rng.randbytes(rng.randrange(0, 64))
                    hdr = struct.pack(">ii", rng.randrange(1, 1000), rng.choice(opcodes))
                    _send(s, struct.pack(">i", len(hdr) + len(body)) + hdr + body)
                _send(s, zp.encode_request(1000, 999, None))
                _closed_by_server(s)
            # Resuming kazoo's live session with a wrong password: told "expired", closed.
            s, resp = _handshake(port, session=session, passwd=b"w" * 16)
            assert (resp.sessionId, resp.timeOut) == (0, 0), resp
            _closed_by_server(s)

        # Nothing but those connections went away.
        assert _bad_frames(ens) - before >= expected_bad
        assert {r.sid: r.pid for r in ens.status()} == pids, "a replica restarted"
        assert all(r.alive for r in ens.status())
        assert kz.connected and kz.client_id[0] == session
        for path, data in acked.items():
            assert kz.get(path)[0] == data, path
        kz.create("/h/after", b"still serving")
        fresh = KazooClient(hosts=ens.connect_string(), timeout=20)
        fresh.start(timeout=30)
        try:
            assert fresh.get("/h/after")[0] == b"still serving"
            assert {f"/h/{c}" for c in fresh.get_children("/h")} >= set(acked)
        finally:
            fresh.stop()
            fresh.close()
    finally:
        kz.stop()
        kz.close()


def _stat(ens: Ensemble, sid: int, key: str) -> int:
    return next(int(r.stats.get(key, 0)) for r in ens.status() if r.sid == sid)


def _flood(ens: Ensemble, sid: int, requests: list[bytes]) -> tuple[socket.socket, int]:
    """A session on replica ``sid`` whose socket takes little at a time, ``requests`` sent on
    it and none of their replies read; returns it once the replica has held it back (or has
    taken every request, which a replica that never holds a client back does), with how many
    requests it took."""
    port = next(r.zk_client[1] for r in ens.status() if r.sid == sid and r.zk_client)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting, or it is not honoured
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    s.sendall(zp.encode_record(zp.ConnectRequest(0, 0, 30000, 0, b"\0" * 16, False)))
    split = zp.FrameSplitter(admin_words=False)
    while not split.feed(s.recv(4096)):
        pass
    throttled, taken = _stat(ens, sid, "zk_throttled"), _stat(ens, sid, "zk_requests")
    s.sendall(b"".join(requests))
    wait_until(lambda: (_stat(ens, sid, "zk_throttled") > throttled
                        or _stat(ens, sid, "zk_requests") - taken >= len(requests)),
               what="the replica to hold the client back (or take every request)")
    return s, _stat(ens, sid, "zk_requests") - taken


def _replies(s: socket.socket, n: int) -> list[tuple[int, int, bytes]]:
    """Read ``n`` reply frames: (xid, err, body) each."""
    split = zp.FrameSplitter(admin_words=False)
    out: list[tuple[int, int, bytes]] = []
    while len(out) < n:
        data = s.recv(1 << 20)
        assert data, f"the replica closed the connection after {len(out)} of {n} replies"
        for f in split.feed(data):
            xid, _zxid, err = struct.unpack_from(">iqi", f)
            out.append((xid, err, f[16:]))
    return out


def test_a_client_that_reads_no_replies_is_held_back_then_answered_in_order(ens: Ensemble) -> None:
    """Reads of a 60 KB znode: 2,000 replies would be 120 MB kept in the replica. It takes
    requests only while under 4 MiB of its replies wait (plus what the sockets hold), then all
    2,000 are answered, in order, as the client reads."""
    kz = KazooClient(hosts=ens.connect_string(), timeout=20)
    kz.start(timeout=30)
    value = bytes(range(256)) * 234  # 59,904 bytes
    try:
        kz.create("/flood", value)
        sid = sorted(r.sid for r in ens.status())[0]
        n = 2000
        s, taken = _flood(ens, sid, [zp.encode_request(x, zp.OpCode.GET_DATA, zp.PathWatchRequest("/flood", False))
                                     for x in range(1, n + 1)])
        try:
            # What it took has its replies in the replica or the sockets: 4 MiB in the
            # transport, 4 MiB more in a burst, a few MiB in the kernel; far from all of them.
            assert taken < 500, f"the replica took {taken} of {n} requests from a client reading none"
            got = _replies(s, n)
        finally:
            s.close()
        assert [x for x, _, _ in got] == list(range(1, n + 1))
        assert all(err == 0 for _, err, _ in got)
        assert all(body[4 : 4 + len(value)] == value for _, _, body in got)
        assert kz.get("/flood")[0] == value  # and it serves on
    finally:
        kz.stop()
        kz.close()


def test_a_client_with_too_many_writes_unanswered_is_held_back_then_answered_in_order(ens: Ensemble) -> None:
    """Pipelined writes: the replica takes ``zk_max_outstanding`` of them, no more until they are
    answered, then every write is applied and answered in order."""
    kz = KazooClient(hosts=ens.connect_string(), timeout=20)
    kz.start(timeout=30)
    try:
        kz.create("/pipelined", b"")
        sid = sorted(r.sid for r in ens.status())[-1]
        n = 600
        throttled = _stat(ens, sid, "zk_throttled")
        s, _ = _flood(ens, sid, [zp.encode_request(x, zp.OpCode.SET_DATA,
                                                   zp.SetDataRequest("/pipelined", b"v%d" % x, x - 1))
                                 for x in range(1, n + 1)])
        try:
            # Its small replies fit in the sockets, so it goes on taking writes as they are
            # answered: how many it has taken by now depends on timing. That it stopped at
            # the limit does not.
            assert _stat(ens, sid, "zk_throttled") > throttled, "the replica took every write at once"
            got = _replies(s, n)
        finally:
            s.close()
        # Each write named the version the one before it made: all applied, in order.
        assert [(x, err) for x, err, _ in got] == [(x, 0) for x in range(1, n + 1)]
        data, stat = kz.get("/pipelined")
        assert (data, stat.version) == (b"v%d" % n, n)
    finally:
        kz.stop()
        kz.close()
