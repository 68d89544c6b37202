"""The jute codec: round trips, byte-for-byte agreement with kazoo's serializer, and garbage.

kazoo is an independent implementation of the same wire format, so agreeing with it on every
request it can build (and parsing what it would parse) checks field order and widths without a
server. The oracle test (test_zkproto_oracle.py) checks the same codec against ZooKeeper itself.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.protocol import serialization as kz
from kazoo.security import ACL as KzACL
from kazoo.security import Id as KzId

from zabray.errors import CodecError
from zabray.wire import zkproto as zp
from zabray.wire.jute import Reader, Writer

STAT = zp.Stat(1 << 32 | 5, 1 << 32 | 9, 1700000000000, 1700000000123, 3, 2, 1, 0x1234, 11, 2, 1 << 32 | 7)
ACLS = (zp.ACL(zp.Perm.ALL, zp.Id("world", "anyone")), zp.ACL(zp.Perm.READ, zp.Id("digest", "u:h")))
KZ_ACLS = [KzACL(31, KzId("world", "anyone")), KzACL(1, KzId("digest", "u:h"))]

SAMPLES: list[zp.Record] = [
    zp.ConnectRequest(0, 77, 30000, 0x1122334455, b"\0" * 16, True),
    zp.ConnectResponse(0, 30000, 0x1122334455, b"p" * 16, False),
    zp.RequestHeader(7, zp.OpCode.CREATE),
    zp.ReplyHeader(-1, 99, zp.Err.NO_NODE),
    zp.WatcherEvent(zp.EventType.NODE_DATA_CHANGED, zp.KeeperState.SYNC_CONNECTED, "/a"),
    zp.CreateRequest("/a", b"x", ACLS, zp.CreateMode.EPHEMERAL_SEQUENTIAL),
    zp.CreateRequest("/null", None, None, 0),
    zp.CreateTTLRequest("/t", b"", ACLS, zp.CreateMode.PERSISTENT_WITH_TTL, 5000),
    zp.SetDataRequest("/a", b"y" * 100, -1),
    zp.PathWatchRequest("/a/b", True),
    zp.PathVersionRequest("/a", 4),
    zp.SetACLRequest("/a", ACLS, 0),
    zp.SetWatches2(5, ("/d",), ("/e",), ("/c",), ("/p",), ()),
    zp.AuthPacket(0, "digest", b"user:pw"),
    zp.Create2Response("/a0000000001", STAT),
    zp.GetDataResponse(b"data", STAT),
    zp.Children2Response(("b", "c"), STAT),
    zp.GetACLResponse(ACLS, STAT),
    zp.WhoAmIResponse((zp.ClientInfo("ip", "127.0.0.1"),)),
    zp.MultiRequest(((zp.OpCode.CREATE, zp.CreateRequest("/m", b"", ACLS, 0)),
                     (zp.OpCode.CHECK, zp.PathVersionRequest("/m", 0)),
                     (zp.OpCode.SET_DATA, zp.SetDataRequest("/m", b"z", -1)),
                     (zp.OpCode.DELETE, zp.PathVersionRequest("/m", -1)))),
    zp.MultiResponse(((zp.OpCode.CREATE, 0, zp.PathResponse("/m")),
                      (zp.OpCode.ERROR, zp.Err.BAD_VERSION, zp.ErrorResponse(zp.Err.BAD_VERSION)),
                      (zp.OpCode.ERROR, zp.Err.RUNTIME_INCONSISTENCY, zp.ErrorResponse(zp.Err.RUNTIME_INCONSISTENCY)))),
]


@pytest.mark.parametrize("rec", SAMPLES, ids=lambda r: type(r).__name__)
def test_round_trip(rec: zp.Record) -> None:
    assert type(rec).decode(rec.encode()) == rec


@pytest.mark.parametrize("rec", SAMPLES, ids=lambda r: type(r).__name__)
def test_every_truncation_is_a_codec_error(rec: zp.Record) -> None:
    data = rec.encode()
    optional_tail = isinstance(rec, (zp.ConnectRequest, zp.ConnectResponse))
    for n in range(len(data) - (1 if optional_tail else 0)):
        with pytest.raises(CodecError):
            type(rec).decode(data[:n])


def test_trailing_bytes_are_rejected() -> None:
    with pytest.raises(CodecError, match="trailing"):
        zp.PathRequest.decode(zp.PathRequest("/a").encode() + b"\0")


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (zp.CreateRequest("/a", b"v", ACLS, 3), kz.Create("/a", b"v", KZ_ACLS, 3)),
        (zp.PathVersionRequest("/a", 5), kz.Delete("/a", 5)),
        (zp.PathWatchRequest("/a", True), kz.Exists("/a", True)),
        (zp.PathWatchRequest("/a", False), kz.GetData("/a", None)),
        (zp.SetDataRequest("/a", b"d", 7), kz.SetData("/a", b"d", 7)),
        (zp.PathRequest("/a"), kz.GetACL("/a")),
        (zp.SetACLRequest("/a", ACLS, 2), kz.SetACL("/a", KZ_ACLS, 2)),
        (zp.PathWatchRequest("/a", True), kz.GetChildren2("/a", True)),
        (zp.PathRequest("/a"), kz.Sync("/a")),
        (zp.PathVersionRequest("/a", 1), kz.CheckVersion("/a", 1)),
        (zp.AuthPacket(0, "digest", b"u:p"), kz.Auth(0, "digest", "u:p")),
        (zp.ConnectRequest(0, 9, 10000, 0, b"\0" * 16, False), kz.Connect(0, 9, 10000, 0, b"\0" * 16, False)),
        (
            zp.MultiRequest(((zp.OpCode.CREATE, zp.CreateRequest("/a", b"", ACLS, 0)),
                             (zp.OpCode.DELETE, zp.PathVersionRequest("/b", -1)))),
            kz.Transaction([kz.Create("/a", b"", KZ_ACLS, 0), kz.Delete("/b", -1)]),
        ),
    ],
    ids=lambda x: type(x).__name__,
)
def test_requests_match_kazoo_bytes(ours: zp.Record, theirs: object) -> None:
    assert ours.encode() == bytes(theirs.serialize())  # type: ignore[attr-defined]


def test_kazoo_parses_our_replies() -> None:
    kz_stat = kz.ZnodeStat(*[getattr(STAT, f) for f in kz.ZnodeStat._fields])
    data, stat = kz.GetData.deserialize(zp.GetDataResponse(b"abc", STAT).encode(), 0)
    assert (data, stat) == (b"abc", kz_stat)
    assert kz.Create.deserialize(zp.PathResponse("/x0000000003").encode(), 0) == "/x0000000003"
    assert kz.GetChildren2.deserialize(zp.Children2Response(("a", "b"), STAT).encode(), 0) == (["a", "b"], kz_stat)
    hdr, _ = kz.ReplyHeader.deserialize(zp.ReplyHeader(3, 1 << 32, -101).encode(), 0)
    assert hdr == (3, 1 << 32, -101)
    ev, _ = kz.Watch.deserialize(zp.WatcherEvent(2, 3, "/gone").encode(), 0)
    assert ev == (2, 3, "/gone")
    results = kz.Transaction.deserialize(
        zp.MultiResponse(((zp.OpCode.CREATE, 0, zp.PathResponse("/a")),
                          (zp.OpCode.SET_DATA, 0, zp.StatResponse(STAT)),
                          (zp.OpCode.DELETE, 0, None))).encode(), 0)
    assert results == ["/a", kz_stat, True]
    conn, _ = kz.Connect.deserialize(zp.ConnectResponse(0, 4000, 0xABC, b"s" * 16, False).encode(), 0)
    assert (conn.time_out, conn.session_id, conn.passwd) == (4000, 0xABC, b"s" * 16)


def test_request_frames_decode_by_opcode() -> None:
    frame = zp.encode_request(5, zp.OpCode.SET_DATA, zp.SetDataRequest("/a", b"v", 2))
    (size,) = struct.unpack(">i", frame[:4])
    assert size == len(frame) - 4
    req = zp.decode_request(frame[4:])
    assert req == zp.Request(5, zp.OpCode.SET_DATA, zp.SetDataRequest("/a", b"v", 2))
    assert zp.decode_request(zp.encode_request(-2, zp.OpCode.PING, None)[4:]).body is None
    unknown = zp.decode_request(zp.RequestHeader(1, 999).encode() + b"junk")
    assert not unknown.known and unknown.op == 999


def test_reply_body_is_sent_only_on_success() -> None:
    ok = zp.encode_reply(1, 10, zp.Err.OK, zp.StatResponse(STAT))
    failed = zp.encode_reply(1, 10, zp.Err.NO_NODE, zp.StatResponse(STAT))
    assert len(failed) == 4 + 16 and len(ok) == 4 + 16 + 68
    hdr, body = zp.decode_reply(ok[4:], zp.OpCode.EXISTS)
    assert hdr.err == 0 and body == zp.StatResponse(STAT)
    hdr, body = zp.decode_reply(failed[4:], zp.OpCode.EXISTS)
    assert hdr.err == zp.Err.NO_NODE and body is None


def test_negative_lengths_and_bad_values() -> None:
    w = Writer()
    w.int32(-5)
    with pytest.raises(CodecError, match="negative"):
        Reader(bytes(w.buf)).buffer()
    with pytest.raises(CodecError, match="neither 0 nor 1"):
        Reader(b"\x02").boolean()
    with pytest.raises(CodecError, match="UTF-8"):
        Reader(struct.pack(">i", 2) + b"\xff\xfe").ustring()
    with pytest.raises(CodecError, match="vector"):
        Reader(struct.pack(">i", 1 << 30)).vector(Reader.int32)
    with pytest.raises(CodecError, match="32-bit"):
        zp.RequestHeader(1 << 31, 1).encode()
    with pytest.raises(CodecError, match="cannot be part of a multi"):
        zp.MultiRequest.decode(zp.MultiHeader(zp.OpCode.PING, False, -1).encode())


def test_frame_splitter_any_chunking_and_limits() -> None:
    frames = [zp.encode_request(i, zp.OpCode.GET_DATA, zp.PathWatchRequest(f"/n{i}", False)) for i in range(5)]
    stream = b"".join(frames)
    for step in (1, 3, 7, len(stream)):
        sp = zp.FrameSplitter()
        got: list[bytes] = []
        for i in range(0, len(stream), step):
            got += sp.feed(stream[i : i + step])
        assert got == [f[4:] for f in frames]
    with pytest.raises(CodecError, match="outside"):
        zp.FrameSplitter(max_frame=100).feed(struct.pack(">i", 101))
    with pytest.raises(CodecError, match="outside"):
        zp.FrameSplitter().feed(struct.pack(">i", -7))
    sp = zp.FrameSplitter()
    assert sp.feed(b"ru") == [] and sp.feed(b"ok") == [] and sp.first_word == "ruok"


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_requests_only_raise_codec_errors(data: bytes) -> None:
    try:
        zp.decode_request(data)
    except CodecError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    st.text(max_size=30), st.one_of(st.none(), st.binary(max_size=50)),
    st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1),
)
def test_property_round_trip(path: str, data: bytes | None, v: int, ttl: int) -> None:
    rec = zp.CreateTTLRequest(path, data, ACLS, v, ttl)
    assert zp.CreateTTLRequest.decode(rec.encode()) == rec


ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(st.tuples(longs, longs, longs, longs, ints, ints, ints, longs, ints, ints, longs))
def test_an_all_number_record_packs_as_field_by_field_would(values: tuple[int, ...]) -> None:
    """Stat and the headers are packed in one struct call: the same bytes, the same values."""
    stat = zp.Stat(*values)
    w = Writer()
    for v, t in zip(values, zp.Stat.FIELDS, strict=True):
        (w.int32 if t == "int" else w.int64)(v)
    assert stat.encode() == bytes(w.buf)
    assert zp.Stat.decode(bytes(w.buf)) == stat


@pytest.mark.parametrize("bad", [2**31, -(2**31) - 1])
def test_an_out_of_range_number_is_still_named(bad: int) -> None:
    with pytest.raises(CodecError, match="32-bit int"):
        zp.ReplyHeader(1, 2, bad).encode()
    with pytest.raises(CodecError, match="truncated"):
        zp.ReplyHeader.decode(b"\0" * 15)
