"""ZooKeeper's client protocol through the pure adapter (``zabray.wire.zkserver``) and the pure
service, bytes in and bytes out, with a hand-driven core (no sockets, no Ray): the handshake,
passwords, replies per opcode, errors, watch events, and what closes a connection."""

from __future__ import annotations

import dataclasses

import pytest

from tests.core.test_zk_service_core import Harness
from zabray.errors import CodecError
from zabray.tree import digest_id
from zabray.wire import four_letter
from zabray.wire import zkproto as zp
from zabray.wire.zkserver import PASSWORD_LEN, ZkServerConn, password_key, session_password
from zabray.zk import messages as zm

KEY = password_key(b"s" * 32, "t")
OPEN = (zp.ACL(zp.Perm.ALL, zp.Id("world", "anyone")),)


class Client:
    """One client connection: bytes through the adapter into the service and back."""

    def __init__(self, h: Harness, conn: int = 1, session: int = 0, passwd: bytes = b"\0" * 16,
                 last_zxid: int = 0) -> None:
        self.h, self.conn = h, conn
        self.wire = ZkServerConn(key=KEY, peer_ip="10.0.0.7")
        self.split = zp.FrameSplitter(admin_words=False)
        self.closed = False
        self.pending: dict[int, int] = {}
        self.events: list[zp.WatcherEvent] = []
        self.got: dict[int, tuple[zp.ReplyHeader, zp.Record | None]] = {}
        self._seen = len(h.out)
        self.raw: list[bytes] = []
        self.send(zp.encode_record(zp.ConnectRequest(0, last_zxid, 30000, session, passwd, False)))
        h.commit()
        self.pump()

    def send(self, data: bytes) -> None:
        fed = self.wire.feed(data)
        self.raw.append(fed.send)
        self.closed |= fed.close
        for rid, op in fed.requests:
            self.h.feed(zm.ClientRequest(self.conn, rid, op))
        self.pump()

    def pump(self) -> None:
        for a in self.h.out[self._seen:]:
            if getattr(a, "conn", None) != self.conn:
                continue
            if type(a) is zm.CloseConn:
                self.closed = True
                continue
            data, close = self.wire.encode(a)
            self.raw.append(data)
            self.closed |= close
        self._seen = len(self.h.out)
        for payload in self.split.feed(b"".join(self.raw)):
            if not hasattr(self, "hello"):
                self.hello = zp.ConnectResponse.decode(payload)
                continue
            hdr, rec = zp.decode_reply(payload, None)
            if hdr.xid == zp.Xid.NOTIFICATION:
                assert isinstance(rec, zp.WatcherEvent)
                self.events.append(rec)
                continue
            self.got[hdr.xid] = zp.decode_reply(payload, self.pending.get(hdr.xid))
        self.raw.clear()

    def call(self, xid: int, op: int, body: zp.Record | None, commit: bool = True) -> tuple[zp.ReplyHeader, zp.Record | None]:
        self.pending[xid] = op
        self.send(zp.encode_request(xid, op, body))
        if commit:
            self.h.commit()
            self.pump()
        return self.got.pop(xid)


def test_a_session_is_opened_with_a_password_any_replica_can_check() -> None:
    h = Harness()
    c = Client(h)
    sid = c.hello.sessionId
    assert sid != 0 and c.hello.timeOut == 30000 and c.hello.passwd == session_password(sid, KEY)
    assert len(c.hello.passwd) == PASSWORD_LEN and not c.closed
    # Resuming on another connection with the right password keeps the session...
    again = Client(h, conn=2, session=sid, passwd=c.hello.passwd)
    assert again.hello.sessionId == sid and again.hello.timeOut > 0 and not again.closed
    # ... a wrong password is told the session expired (timeout 0) and is closed.
    wrong = Client(h, conn=3, session=sid, passwd=b"x" * 16)
    assert wrong.hello.timeOut == 0 and wrong.hello.sessionId == 0 and wrong.closed


def test_replies_carry_each_opcodes_record_and_zookeepers_error_codes() -> None:
    h = Harness()
    c = Client(h)
    hdr, rec = c.call(1, zp.OpCode.CREATE2, zp.CreateRequest("/a", b"v", OPEN, zp.CreateMode.PERSISTENT))
    assert hdr.err == 0 and isinstance(rec, zp.Create2Response) and rec.path == "/a" and rec.stat.dataLength == 1
    hdr, rec = c.call(2, zp.OpCode.CREATE, zp.CreateRequest("/a/s-", b"", OPEN, zp.CreateMode.EPHEMERAL_SEQUENTIAL))
    assert isinstance(rec, zp.PathResponse) and rec.path == "/a/s-0000000000"
    hdr, rec = c.call(3, zp.OpCode.GET_DATA, zp.PathWatchRequest("/a", True))
    assert isinstance(rec, zp.GetDataResponse) and rec.data == b"v" and hdr.zxid == rec.stat.mzxid + 1
    hdr, _ = c.call(4, zp.OpCode.EXISTS, zp.PathWatchRequest("/nope", False))
    assert hdr.err == zp.Err.NO_NODE  # exists of a missing znode: NONODE in the header, as ZooKeeper
    hdr, _ = c.call(5, zp.OpCode.SET_DATA, zp.SetDataRequest("/a", b"w", 7))
    assert hdr.err == zp.Err.BAD_VERSION
    hdr, rec = c.call(6, zp.OpCode.GET_CHILDREN2, zp.PathWatchRequest("/a", False))
    assert isinstance(rec, zp.Children2Response) and rec.children == ("s-0000000000",) and rec.stat.numChildren == 1
    _, rec = c.call(7, zp.OpCode.GET_EPHEMERALS, zp.PathRequest("/"))
    assert isinstance(rec, zp.ChildrenResponse) and rec.children == ("/a/s-0000000000",)
    _, rec = c.call(8, zp.OpCode.GET_ALL_CHILDREN_NUMBER, zp.PathRequest("/a"))
    assert isinstance(rec, zp.CountResponse) and rec.totalNumber == 1
    _, rec = c.call(9, zp.OpCode.WHO_AM_I, None)
    assert isinstance(rec, zp.WhoAmIResponse) and rec.clientInfo == (zp.ClientInfo("ip", "10.0.0.7"),)
    hdr, rec = c.call(10, zp.OpCode.SET_DATA, zp.SetDataRequest("/a", b"w", 0))
    assert isinstance(rec, zp.StatResponse) and rec.stat.version == 1
    assert [(e.type, e.path) for e in c.events] == [(zp.EventType.NODE_DATA_CHANGED, "/a")]


def test_a_failed_multi_answers_ok_with_every_ops_own_result() -> None:
    h = Harness()
    c = Client(h)
    multi = zp.MultiRequest(((zp.OpCode.CREATE, zp.CreateRequest("/m", b"", OPEN, 0)),
                             (zp.OpCode.CHECK, zp.PathVersionRequest("/m", 5)),
                             (zp.OpCode.DELETE, zp.PathVersionRequest("/m", -1))))
    hdr, rec = c.call(1, zp.OpCode.MULTI, multi)
    assert hdr.err == 0 and isinstance(rec, zp.MultiResponse)
    assert [(op, err) for op, err, _ in rec.results] == [
        (zp.OpCode.ERROR, zp.Err.OK), (zp.OpCode.ERROR, zp.Err.BAD_VERSION),
        (zp.OpCode.ERROR, zp.Err.RUNTIME_INCONSISTENCY)]
    ok = zp.MultiRequest(((zp.OpCode.CREATE, zp.CreateRequest("/m", b"", OPEN, 0)),
                          (zp.OpCode.SET_DATA, zp.SetDataRequest("/m", b"x", 0))))
    hdr, rec = c.call(2, zp.OpCode.MULTI, ok)
    assert isinstance(rec, zp.MultiResponse) and [r[0] for r in rec.results] == [zp.OpCode.CREATE, zp.OpCode.SET_DATA]


def test_digest_auth_grants_access_and_a_bad_scheme_fails_and_closes() -> None:
    h = Harness()
    c = Client(h)
    acl = (zp.ACL(zp.Perm.ALL, zp.Id("digest", digest_id("alice:pw"))),)
    c.call(1, zp.OpCode.CREATE, zp.CreateRequest("/s", b"x", acl, 0))
    hdr, _ = c.call(2, zp.OpCode.GET_DATA, zp.PathWatchRequest("/s", False))
    assert hdr.err == zp.Err.NO_AUTH
    hdr, _ = c.call(zp.Xid.AUTH, zp.OpCode.AUTH, zp.AuthPacket(0, "digest", b"alice:pw"))
    assert hdr.err == 0
    hdr, rec = c.call(3, zp.OpCode.GET_DATA, zp.PathWatchRequest("/s", False))
    assert hdr.err == 0 and isinstance(rec, zp.GetDataResponse) and rec.data == b"x"
    assert not c.closed
    hdr, _ = c.call(zp.Xid.AUTH, zp.OpCode.AUTH, zp.AuthPacket(0, "kerberos", b"x"))
    assert hdr.err == zp.Err.AUTH_FAILED and c.closed


def test_unimplemented_operations_answer_unimplemented_and_unknown_opcodes_close() -> None:
    h = Harness()
    c = Client(h)
    # deleteContainer is a known opcode the service does not offer a client: UNIMPLEMENTED,
    # connection kept
    c.pending[1] = zp.OpCode.DELETE_CONTAINER
    c.send(zp.encode_request(1, zp.OpCode.DELETE_CONTAINER, zp.PathRequest("/x")))
    hdr, _ = c.got.pop(1)
    assert hdr.err == zp.Err.UNIMPLEMENTED and not c.closed
    with pytest.raises(CodecError, match="unknown opcode 999"):
        c.wire.feed(zp.encode_request(2, 999, None))


@pytest.mark.parametrize("code", ["NOT_READY", "BEHIND", "CONNECTION_LOSS"])
def test_a_replica_that_cannot_serve_closes_instead_of_answering(code: str) -> None:
    wire = ZkServerConn(key=KEY, peer_ip="1.2.3.4")
    fed = wire.feed(zp.encode_record(zp.ConnectRequest(0, 0, 5000, 0, b"\0" * 16, False)))
    (rid, op), = fed.requests
    assert isinstance(op, zm.Connect) and op.auth == (("ip", "1.2.3.4"),)
    data, close = wire.encode(zm.Reply(1, rid, 0, zm.ErrorInfo(code, "x")))
    assert data == b"" and close  # the client moves to another server; ZooKeeper answers no such code


def test_closing_a_session_answers_then_closes_and_an_expired_session_closes() -> None:
    h = Harness()
    c = Client(h)
    hdr, _ = c.call(1, zp.OpCode.CLOSE_SESSION, None)
    assert hdr.err == 0 and c.closed
    wire = ZkServerConn(key=KEY, peer_ip="")
    assert wire.encode(zm.SessionEnded(1, 5, 9)) == (b"", True)


def test_frames_beyond_the_limit_and_garbage_handshakes_are_codec_errors() -> None:
    wire = ZkServerConn(key=KEY, peer_ip="", max_frame=2048)
    with pytest.raises(CodecError, match="outside"):
        wire.feed((4096).to_bytes(4, "big") + b"\0" * 10)
    with pytest.raises(CodecError):
        ZkServerConn(key=KEY, peer_ip="").feed(b"\0\0\0\3abc")


def test_four_letter_words_are_answered_only_from_the_allow_list() -> None:
    wire = ZkServerConn(key=KEY, peer_ip="")
    fed = wire.feed(b"ruok")
    assert fed.word == "ruok" and fed.close and not fed.requests
    view = four_letter.AdminView(mode="leader", zxid=0x100000003, znodes=5, watches=2, connections=3, outstanding=0, received=10, sent=9,
                                 sessions={7: ["/e"], 8: []})
    allowed = four_letter.parse_words("ruok,srvr,mntr")
    assert four_letter.answer("ruok", allowed, view) == "imok"
    srvr = four_letter.answer("srvr", allowed, view)
    assert "Mode: leader" in srvr and "Zxid: 0x100000003" in srvr and "Node count: 5" in srvr
    mntr = dict(line.split("\t") for line in four_letter.answer("mntr", allowed, view).splitlines())
    assert mntr["zk_server_state"] == "leader" and mntr["zk_ephemerals_count"] == "1"
    assert "Latency min/avg/max: 0/0.0/0" in srvr and mntr["zk_avg_latency"] == "0.0"  # no request yet
    lat = four_letter.Latency()
    for ms in (3, 1, 8):
        lat.add(ms)
    srvr = four_letter.answer("srvr", allowed, dataclasses.replace(view, latency=lat.view()))
    assert "Latency min/avg/max: 1/4.0/8" in srvr
    assert four_letter.answer("dump", allowed, view) == "dump is not executed because it is not in the whitelist.\n"
    with pytest.raises(ValueError, match="xyzw"):
        four_letter.parse_words("ruok,xyzw")


def test_sasl_tokens_travel_in_opcode_102_and_are_answered_with_zxid_0() -> None:
    from puresasl.client import SASLClient

    from tests.core.test_zk_sasl import _harness

    h = _harness()
    c = Client(h)
    c.wire.nonce = "per-connection-nonce"
    cli = SASLClient(host="zk-sasl-md5", service="zookeeper", mechanism="DIGEST-MD5", username="jaasuser",
                     password="jaas_password")
    token, xid = cli.process(None), 1
    server_tokens = []
    while True:
        hdr, rec = c.call(xid, zp.OpCode.SASL, zp.GetSASLRequest(token or b""), commit=False)
        assert hdr.err == 0 and hdr.zxid == 0 and isinstance(rec, zp.SetSASLResponse)
        server_tokens.append(rec.token)
        token, xid = cli.process(rec.token), xid + 1
        if cli.complete:
            break
    assert b'nonce="per-connection-nonce"' in server_tokens[0] and server_tokens[1].startswith(b"rspauth=")
    hdr, rec = c.call(xid, zp.OpCode.WHO_AM_I, None)
    assert isinstance(rec, zp.WhoAmIResponse) and zp.ClientInfo("sasl", "jaasuser") in (rec.clientInfo or ())
    other = Client(h, conn=2)
    other.wire.nonce = "n2"
    hdr, _ = other.call(1, zp.OpCode.SASL, zp.GetSASLRequest(b"\x60\x82gssapi"), commit=False)
    assert hdr.err == zp.Err.AUTH_FAILED and other.closed
