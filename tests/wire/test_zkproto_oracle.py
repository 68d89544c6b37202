"""zabray's ZooKeeper codec against Apache ZooKeeper 3.8 itself: every frame it sends is accepted
and every reply it gets decodes to what ZooKeeper's documented semantics say."""

from __future__ import annotations

import pytest

from tests.wire.rawclient import RawClient
from zabray.driver import apache_zk
from zabray.wire import four_letter
from zabray.wire import zkproto as zp

pytestmark = pytest.mark.zookeeper
OPEN = zp.OPEN_ACL_UNSAFE


def test_session_ops_and_watch_events(apache_zookeeper: apache_zk.ApacheZooKeeper) -> None:
    c = RawClient(apache_zookeeper.client_ports[0])
    try:
        assert c.session.sessionId != 0 and len(c.session.passwd or b"") == 16
        hdr, rec = c.call(zp.OpCode.CREATE2, zp.CreateRequest("/w", b"v0", OPEN, zp.CreateMode.PERSISTENT))
        assert hdr.err == 0 and isinstance(rec, zp.Create2Response)
        assert rec.path == "/w" and rec.stat.czxid == rec.stat.mzxid == rec.stat.pzxid == hdr.zxid
        assert rec.stat.dataLength == 2 and rec.stat.version == 0 and rec.stat.ctime == rec.stat.mtime
        hdr, rec = c.call(zp.OpCode.CREATE, zp.CreateRequest("/w/s-", b"", OPEN, zp.CreateMode.EPHEMERAL_SEQUENTIAL))
        assert rec == zp.PathResponse("/w/s-0000000000")
        hdr, rec = c.call(zp.OpCode.GET_DATA, zp.PathWatchRequest("/w", True))
        assert isinstance(rec, zp.GetDataResponse) and rec.data == b"v0" and rec.stat.numChildren == 1
        assert rec.stat.cversion == 1 and rec.stat.pzxid > rec.stat.mzxid
        hdr, rec = c.call(zp.OpCode.SET_DATA, zp.SetDataRequest("/w", b"v1", 0))
        assert hdr.err == 0 and isinstance(rec, zp.StatResponse) and rec.stat.version == 1
        assert c.events == [zp.WatcherEvent(zp.EventType.NODE_DATA_CHANGED, zp.KeeperState.SYNC_CONNECTED, "/w")]
        hdr, rec = c.call(zp.OpCode.SET_DATA, zp.SetDataRequest("/w", b"v2", 0))
        assert hdr.err == zp.Err.BAD_VERSION and rec is None
        hdr, rec = c.call(zp.OpCode.EXISTS, zp.PathWatchRequest("/nope", False))
        assert hdr.err == zp.Err.NO_NODE and rec is None
        hdr, rec = c.call(zp.OpCode.GET_CHILDREN2, zp.PathWatchRequest("/w", False))
        assert isinstance(rec, zp.Children2Response) and rec.children == ("s-0000000000",)
        hdr, rec = c.call(zp.OpCode.GET_ACL, zp.PathRequest("/w"))
        assert isinstance(rec, zp.GetACLResponse) and rec.acl == OPEN
        hdr, rec = c.call(zp.OpCode.GET_ALL_CHILDREN_NUMBER, zp.PathRequest("/w"))
        assert rec == zp.CountResponse(1)
        hdr, rec = c.call(zp.OpCode.GET_EPHEMERALS, zp.PathRequest("/"))
        assert rec == zp.ChildrenResponse(("/w/s-0000000000",))
        hdr, rec = c.call(zp.OpCode.SYNC, zp.PathRequest("/w"))
        assert rec == zp.PathResponse("/w")
        hdr, rec = c.call(zp.OpCode.WHO_AM_I, None)
        assert isinstance(rec, zp.WhoAmIResponse) and rec.clientInfo == (zp.ClientInfo("ip", "127.0.0.1"),)
        hdr, rec = c.call(zp.OpCode.PING, None, xid=zp.Xid.PING)
        assert hdr.xid == zp.Xid.PING and hdr.err == 0
    finally:
        c.close()


def test_multi_that_fails_halfway(apache_zookeeper: apache_zk.ApacheZooKeeper) -> None:
    c = RawClient(apache_zookeeper.client_ports[0])
    try:
        multi = zp.MultiRequest((
            (zp.OpCode.CREATE, zp.CreateRequest("/m", b"", OPEN, 0)),
            (zp.OpCode.CHECK, zp.PathVersionRequest("/m", 5)),
            (zp.OpCode.DELETE, zp.PathVersionRequest("/m", -1)),
        ))
        hdr, rec = c.call(zp.OpCode.MULTI, multi)
        # A failed multi is answered OK in the header; every op's result is an error result:
        # the failing op's own code, OK (rolled back) before it, RUNTIME_INCONSISTENCY after it.
        assert hdr.err == 0 and isinstance(rec, zp.MultiResponse)
        assert [(op, err) for op, err, _ in rec.results] == [
            (zp.OpCode.ERROR, zp.Err.OK),
            (zp.OpCode.ERROR, zp.Err.BAD_VERSION),
            (zp.OpCode.ERROR, zp.Err.RUNTIME_INCONSISTENCY),
        ], rec
        hdr, rec = c.call(zp.OpCode.EXISTS, zp.PathWatchRequest("/m", False))
        assert hdr.err == zp.Err.NO_NODE
        ok = zp.MultiRequest(((zp.OpCode.CREATE, zp.CreateRequest("/m", b"", OPEN, 0)),
                              (zp.OpCode.SET_DATA, zp.SetDataRequest("/m", b"x", 0)),
                              (zp.OpCode.CHECK, zp.PathVersionRequest("/m", 1))))
        hdr, rec = c.call(zp.OpCode.MULTI, ok)
        assert hdr.err == 0 and isinstance(rec, zp.MultiResponse)
        assert [(op, err) for op, err, _ in rec.results] == [(zp.OpCode.CREATE, 0), (zp.OpCode.SET_DATA, 0), (zp.OpCode.CHECK, 0)]
    finally:
        c.close()


def test_digest_auth_and_acl_enforcement(apache_zookeeper: apache_zk.ApacheZooKeeper) -> None:
    owner = RawClient(apache_zookeeper.client_ports[0])
    other = RawClient(apache_zookeeper.client_ports[0])
    try:
        hdr, _ = owner.call(zp.OpCode.AUTH, zp.AuthPacket(0, "digest", b"alice:secret"), xid=zp.Xid.AUTH)
        assert hdr.err == 0
        hdr, rec = owner.call(zp.OpCode.CREATE, zp.CreateRequest("/private", b"s", zp.CREATOR_ALL_ACL, 0))
        assert hdr.err == 0, hdr
        hdr, rec = owner.call(zp.OpCode.GET_ACL, zp.PathRequest("/private"))
        assert isinstance(rec, zp.GetACLResponse) and rec.acl[0].id.scheme == "digest"
        assert rec.acl[0].id.id.startswith("alice:")
        hdr, _ = other.call(zp.OpCode.GET_DATA, zp.PathWatchRequest("/private", False))
        assert hdr.err == zp.Err.NO_AUTH
    finally:
        owner.close()
        other.close()


def test_unknown_opcode_and_four_letter_words(apache_zookeeper: apache_zk.ApacheZooKeeper) -> None:
    port = apache_zookeeper.client_ports[0]
    assert apache_zk.four_letter("127.0.0.1", port, "ruok") == "imok"
    srvr = apache_zk.four_letter("127.0.0.1", port, "srvr")
    assert "Mode: standalone" in srvr
    # zabray's srvr has ZooKeeper's lines in ZooKeeper's order (scripts read it by position too)
    ours = four_letter.answer("srvr", four_letter.ALL_WORDS, four_letter.AdminView(
        mode="standalone", zxid=0, znodes=4, watches=0, connections=1,
        outstanding=0, received=0, sent=0))
    assert [x.split(":")[0] for x in ours.splitlines()] == [x.split(":")[0] for x in srvr.splitlines() if x]
    c = RawClient(port)
    try:
        hdr, _ = c.call(zp.OpCode.RECONFIG, None)
        assert hdr.err != 0
    finally:
        c.close()
