"""The pure server side of one ZooKeeper connection (zabray.wire.zkserver), without sockets."""

from __future__ import annotations

from zabray.tree.znode import Stat
from zabray.wire import zkproto as zp
from zabray.wire.zkserver import ZkServerConn
from zabray.zk import messages as zm


def _connected() -> tuple[ZkServerConn, list[int]]:
    """A connection past its handshake and three getData requests (xids 1, 2, 3) in flight."""
    conn = ZkServerConn(key=b"k" * 32, peer_ip="127.0.0.1")
    fed = conn.feed(zp.encode_record(zp.ConnectRequest(0, 0, 10_000, 0, bytes(16), False)))
    (rid, _), = fed.requests
    data, close = conn.encode(zm.Reply(0, rid, 1, None, (0x1234, 10_000)))
    assert data and not close
    frames = b"".join(zp.encode_request(x, zp.OpCode.GET_DATA, zp.PathWatchRequest("/a", False)) for x in (1, 2, 3))
    return conn, [r for r, _ in conn.feed(frames).requests]


def test_nothing_is_sent_after_a_reply_that_closes_the_connection() -> None:
    # The client must never see xid 3 answered while xid 2 never is: ZooKeeper's clients match
    # replies to requests in order, and kazoo fails the connection on a skipped xid.
    conn, (r1, r2, r3) = _connected()
    data, close = conn.encode(zm.Reply(0, r1, 5, None, (b"x", _stat())))
    assert data and not close
    data, close = conn.encode(zm.Reply(0, r2, 5, zm.ErrorInfo("CONNECTION_LOSS", "leader lost"), None))
    assert data == b"" and close
    data, close = conn.encode(zm.Reply(0, r3, 5, None, (b"x", _stat())))
    assert data == b"" and close
    data, _ = conn.encode(zm.WatchFired(0, "data", "/a", "changed", 6))
    assert data == b""


def _stat() -> Stat:
    return Stat(czxid=1, mzxid=1, ctime=0, mtime=0, version=0, cversion=0, aversion=0, ephemeral_owner=0,
                data_length=1, num_children=0, pzxid=1)
