"""Every Session call and error case on a live 3-replica ZooKeeper ensemble; ordering; sync; watches."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path

import pytest

from tests.client.conftest import followers, wait_until
from zabray.client.session import (
    BadVersionError,
    Check,
    ConnectionLossError,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SetData,
    WatchedEvent,
)
from zabray.tree import BadArgumentsError
from zabray.wire import clientproto as cp
from zabray.wire.framing import FrameDecoder, FrameEncoder

pytestmark = pytest.mark.ray


def test_every_call_and_error(zk) -> None:
    s = zk.session(timeout=5)
    try:
        assert s.session_id != 0 and s.connected_to is not None
        assert s.create("/api", b"root") == "/api"
        with pytest.raises(NodeExistsError):
            s.create("/api")
        with pytest.raises(NoNodeError):
            s.create("/nope/child")
        with pytest.raises(BadArgumentsError):
            s.create("no-slash")
        # Checked before anything is sent, as ZooKeeper's client does: a str value used to be a
        # bare TypeError, a bytes path a NoNodeError about a parent "b'", a read of a relative path
        # a NoNodeError.
        bad = [(lambda: s.create("/api2", "text"), "znode data must be bytes or None, got str"),  # type: ignore[arg-type]
               (lambda: s.multi(SetData("/api", "text")), "znode data must be bytes or None, got str"),  # type: ignore[arg-type]
               (lambda: s.create(b"/api2", b""), "path must be a string, got bytes"),  # type: ignore[arg-type]
               (lambda: s.create("/api/.", b""), "relative path component '.'"),
               (lambda: s.get("/api/"), "path must not end with '/'"),
               (lambda: s.children("relative"), "path must be absolute"),
               (lambda: s.exists("//x"), "empty path component")]
        for call, message in bad:
            with pytest.raises(BadArgumentsError, match=message):
                call()
        data, st = s.get("/api")
        assert data == b"root" and st.version == 0 and st.ephemeral_owner == 0
        s.create("/api-null", None)  # ZooKeeper's null data, kept apart from empty data
        assert s.get("/api-null")[0] is None and s.get("/api-null")[1].data_length == 0
        s.multi(SetData("/api-null", b""), Create("/api-null/n", None))
        assert s.get("/api-null")[0] == b"" and s.get("/api-null/n")[0] is None
        with pytest.raises(NoNodeError):
            s.get("/api/missing")
        st2 = s.set("/api", b"v1", version=0)
        assert st2.version == 1 and s.last_zxid >= st2.mzxid
        with pytest.raises(BadVersionError):
            s.set("/api", b"v2", version=0)
        assert s.set("/api", b"v2").version == 2  # -1 skips the check
        with pytest.raises(NoNodeError):
            s.set("/api/missing", b"")
        assert s.exists("/api/missing") is None
        assert s.exists("/api").version == 2
        seq = [s.create("/api/q-", b"", sequential=True) for _ in range(3)]
        assert seq == [f"/api/q-{i:010d}" for i in range(3)]
        eph = s.create("/api/e", b"", ephemeral=True)
        assert s.exists(eph).ephemeral_owner == s.session_id
        assert s.children("/api") == ["e"] + [p.rsplit("/", 1)[1] for p in seq]
        with pytest.raises(NoNodeError):
            s.children("/api/missing")
        with pytest.raises(NotEmptyError):
            s.delete("/api")
        with pytest.raises(BadVersionError):
            s.delete(seq[0], version=5)
        s.delete(seq[0], version=0)
        with pytest.raises(NoNodeError):
            s.delete(seq[0])
        z = s.sync("/")
        assert z > 0 and s.last_zxid >= z
        res = s.multi(Create("/api/m", b"1"), SetData("/api/m", b"2"), Check("/api/m", 1), Delete(seq[1]))
        assert res[0] == "/api/m" and res[1].version == 1 and res[2] is None and res[3] is None
        with pytest.raises(BadVersionError) as ei:
            s.multi(Create("/api/m2"), Check("/api/m", 7))
        assert ei.value.index == 1
        assert s.exists("/api/m2") is None  # the failed multi left no trace

        async def twins() -> None:
            assert await s.create_async("/api/a", b"x") == "/api/a"
            assert (await s.get_async("/api/a"))[0] == b"x"
            assert (await s.set_async("/api/a", b"y")).version == 1
            assert (await s.exists_async("/api/a")).version == 1
            assert "a" in await s.children_async("/api")
            assert await s.sync_async() > 0
            await s.multi_async(Delete("/api/a"))
            with pytest.raises(NoNodeError):
                await s.delete_async("/api/a")

        asyncio.run(twins())
    finally:
        s.close()
    with pytest.raises((SessionExpiredError, ConnectionLossError)):
        s.get("/api")
    s2 = zk.session(timeout=5)
    try:
        s2.sync()
        assert s2.exists("/api/e") is None  # the closed session's ephemeral went with it
    finally:
        s2.close()


def test_thousand_pipelined_ops_in_issue_order(zk) -> None:
    s = zk.session(timeout=5)
    try:
        s.create("/pipe", b"-1")

        async def go() -> list[object]:
            coros = []
            for i in range(500):
                coros.append(s.set_async("/pipe", str(i).encode()))
                coros.append(s.get_async("/pipe"))  # a read after a write waits for it
            return await asyncio.gather(*coros)

        out = asyncio.run(go())
        assert len(out) == 1000
        for i in range(500):
            st = out[2 * i]
            data, st2 = out[2 * i + 1]
            assert st.version == i + 1
            assert data == str(i).encode() and st2.version == i + 1
        zx = [out[2 * i].mzxid for i in range(500)]
        assert zx == sorted(zx) and len(set(zx)) == 500
    finally:
        s.close()


def test_sync_on_follower_sees_write_through_another_replica(zk) -> None:
    f = followers(zk)
    leader = zk.wait_for_leader()
    writer = zk.session(timeout=5, replica=leader)
    # The preferred replica is tried first, but under load a session may start elsewhere: make
    # sure the reader really sits on a follower and the writer on another replica.
    for _ in range(5):
        reader = zk.session(timeout=5, replica=f[0])
        if reader.connected_to in f and reader.connected_to != writer.connected_to:
            break
        reader.close()
    assert reader.connected_to in f and reader.connected_to != writer.connected_to
    try:
        writer.create("/synced", b"")
        for i in range(20):
            st = writer.set("/synced", str(i).encode())
            reader.sync("/synced")
            data, st2 = reader.get("/synced")
            assert data == str(i).encode() and st2.mzxid >= st.mzxid
    finally:
        writer.close()
        reader.close()


def test_watches_fire_once_in_order_before_the_new_state(zk) -> None:
    f = followers(zk)
    watcher = zk.session(timeout=5, replica=f[0])
    writer = zk.session(timeout=5, replica=f[1] if len(f) > 1 else None)
    try:
        writer.create("/w", b"0")
        for p in ("/w/a", "/w/b", "/w/c"):
            writer.create(p, b"0")
        got: list[WatchedEvent] = []
        lock = threading.Lock()

        def cb(ev: WatchedEvent) -> None:
            with lock:
                got.append(ev)

        # One registration per path (data watches), a child watch and an exists watch.
        for p in ("/w/a", "/w/b", "/w/c"):
            watcher.get(p, watch=cb)
        watcher.children("/w", watch=cb)
        assert watcher.exists("/w/new", watch=cb) is None
        for p in ("/w/c", "/w/a", "/w/b"):
            writer.set(p, b"1")
            writer.set(p, b"2")  # a second change must not fire the one-shot watch again
        writer.create("/w/new", b"")
        # The watcher polls until it sees the last change; by then its callbacks must have run.
        wait_until(lambda: watcher.exists("/w/new") is not None, what="the watcher to see /w/new")
        with lock:
            seen = list(got)
        assert [(e.path, e.type) for e in seen] == [
            ("/w/c", "changed"), ("/w/a", "changed"), ("/w/b", "changed"), ("/w/new", "created"), ("/w", "child")]
        # before-read: a read that shows new state never beats its notification
        for i in range(30):
            mark: list[WatchedEvent] = []
            watcher.get("/w/a", watch=mark.append)
            writer.set("/w/a", f"r{i}".encode())
            while True:
                data, _ = watcher.get("/w/a")
                if data == f"r{i}".encode():
                    assert len(mark) == 1 and mark[0].type == "changed"
                    break
        with lock:
            assert len(got) == 5  # nothing fired twice
    finally:
        watcher.close()
        writer.close()


def test_close_and_expiry_remove_ephemerals(zk) -> None:
    obs = zk.session(timeout=5)
    try:
        a = zk.session(timeout=5)
        a.create("/eph-a", b"", ephemeral=True)
        a.close()
        obs.sync()
        assert obs.exists("/eph-a") is None
        b = zk.session(timeout=1.5)
        b.create("/eph-b", b"", ephemeral=True)
        fired: list[WatchedEvent] = []
        assert obs.exists("/eph-b", watch=fired.append) is not None
        b._kill()  # the client vanishes: no close, no pings
        wait_until(lambda: fired, timeout=15, what="the leader to expire the silent session")
        assert fired[0].type == "deleted"
        obs.sync()
        assert obs.exists("/eph-b") is None
        # A live session that keeps pinging is not expired meanwhile.
        assert not obs.expired
    finally:
        obs.close()


def test_a_session_that_reads_no_replies_is_held_back_then_answered_in_order(zk) -> None:
    """The bespoke client port, as ZooKeeper's: a client pipelining reads of a 500 KB znode
    without reading the replies stops being read (counted in ``client_throttled``) instead of
    having every reply kept in the replica, and gets every reply, in order, once it reads."""
    value = bytes(range(256)) * 2000  # 512,000 bytes: 300 replies would be 150 MB
    s = zk.session(timeout=10)
    try:
        s.create("/big", value)
    finally:
        s.close()
    st = next(r for r in zk.status() if r.client is not None)

    def throttled() -> int:
        return next(int(r.stats.get("client_throttled", 0)) for r in zk.status() if r.sid == st.sid)

    def rss_mb() -> int:
        status = Path(f"/proc/{st.pid}/status").read_text()
        return int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:"))) // 1024

    before, rss0 = throttled(), rss_mb()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting, or it is not honoured
    sock.settimeout(30)
    sock.connect(st.client)
    enc, dec = FrameEncoder(), FrameDecoder()

    def replies(n: int) -> list[cp.ZkRep]:
        out: list[cp.ZkRep] = []
        while len(out) < n:
            data = sock.recv(1 << 20)
            assert data, f"the replica closed the connection after {len(out)} replies"
            out += [cp.decode_reply(p) for p in dec.feed(data)]
        return out

    try:
        enc.add_payload(cp.handshake(zk.name))
        enc.add_payload(cp.encode(cp.ZkReq(1, "connect", [0, 30000, 0, {"data": [], "exist": [], "child": []}, 0])))
        sock.sendall(enc.take())
        assert replies(1)[0].error is None
        n = 300
        for rid in range(2, n + 2):
            enc.add_payload(cp.encode(cp.ZkReq(rid, "get", ["/big", False])))
        sock.sendall(enc.take())
        # Until it holds the client back, or has grown by more than it may.
        wait_until(lambda: throttled() > before or rss_mb() - rss0 >= 64, what="the replica to hold the client back")
        grown = rss_mb() - rss0
        assert grown < 64, f"the replica grew by {grown} MB for a client reading nothing"
        got = replies(n)
    finally:
        sock.close()
    assert [r.rid for r in got] == list(range(2, n + 2))
    assert all(r.error is None and bytes(r.value[0]) == value for r in got)
