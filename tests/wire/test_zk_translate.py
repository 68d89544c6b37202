"""The jute adapter's answers, byte for byte where Apache ZooKeeper 3.8 differs from the obvious
(each case here was a difference the differential test, tests/zkcompat, found). Pure: no server."""

from __future__ import annotations

import struct

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from zabray.errors import CodecError
from zabray.tree.znode import TTL_MAX
from zabray.tree.znode import Stat as TreeStat
from zabray.wire import zkproto as zp
from zabray.wire.zk_translate import fast_set_data, stat_out, stat_reply, to_op, to_response
from zabray.zk import messages as zm

ACL = (zp.ACL(zp.Perm.ALL, zp.Id("world", "anyone")),)


def test_add_watch_answers_an_error_response_body() -> None:
    # FinalRequestProcessor answers addWatch with ErrorResponse(0) and the Java client reads
    # that int: a bodiless reply makes it fail with an EOF.
    frame = zp.encode_reply(5, 9, 0, to_response(zp.OpCode.ADD_WATCH, None))
    hdr, body = zp.decode_reply(frame[4:], zp.OpCode.ADD_WATCH)
    assert (hdr.xid, hdr.err) == (5, 0) and body == zp.ErrorResponse(0)
    assert len(frame) == 4 + 16 + 4


@pytest.mark.parametrize("ttl", [-1, 0, TTL_MAX + 1])
def test_create_ttl_with_a_ttl_out_of_range_is_bad_arguments(ttl: int) -> None:
    # -1 used to read as "no TTL" and create a plain persistent znode; ZooKeeper answers
    # BAD_ARGUMENTS before looking at the path or the parent.
    for mode in (zp.CreateMode.PERSISTENT_WITH_TTL, zp.CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL):
        req = zp.Request(1, zp.OpCode.CREATE_TTL, zp.CreateTTLRequest("/no/parent/", b"", ACL, mode, ttl))
        assert isinstance(to_op(req), zm.Malformed)


def test_create_ttl_in_range_keeps_its_ttl() -> None:
    req = zp.Request(1, zp.OpCode.CREATE_TTL, zp.CreateTTLRequest("/t", b"", ACL, zp.CreateMode.PERSISTENT_WITH_TTL, 5))
    op = to_op(req)
    assert isinstance(op, zm.Create) and op.ttl == 5


def test_a_null_acl_id_reads_as_empty() -> None:
    # kazoo writes the empty id of an ("auth", "") ACL as a null string (length -1); ZooKeeper
    # ignores an auth ACL's id, so the create must reach the tree (INVALID_ACL or success there),
    # not fail as BAD_ARGUMENTS.
    acl = (zp.ACL(31, zp.Id("auth", None)),)
    op = to_op(zp.Request(1, zp.OpCode.CREATE2, zp.CreateRequest("/k", b"v", acl, 0)))
    assert isinstance(op, zm.Create) and op.acl == ((31, "auth", ""),)
    op = to_op(zp.Request(2, zp.OpCode.SET_ACL, zp.SetACLRequest("/k", acl, -1)))
    assert isinstance(op, zm.SetACL) and op.acl == ((31, "auth", ""),)


def _create_op(op: int, flags: int) -> zm.ClientOp:
    return to_op(zp.Request(1, op, zp.CreateRequest("/c", b"", ACL, flags)))


def test_the_opcode_not_the_flags_makes_a_container() -> None:
    # ZooKeeper logs a CreateContainerTxn for createContainer whatever the flags, and a plain
    # CreateTxn for create/create2 even with the container flag.
    for flags, seq in ((zp.CreateMode.CONTAINER, False), (zp.CreateMode.PERSISTENT, False),
                       (zp.CreateMode.PERSISTENT_SEQUENTIAL, True), (zp.CreateMode.EPHEMERAL, False)):
        op = _create_op(zp.OpCode.CREATE_CONTAINER, flags)
        assert isinstance(op, zm.Create) and op.container and not op.ephemeral and op.sequential == seq
    for code in (zp.OpCode.CREATE, zp.OpCode.CREATE2):
        op = _create_op(code, zp.CreateMode.CONTAINER)
        assert isinstance(op, zm.Create) and not op.container and op.ttl == -1
    for code in (zp.OpCode.CREATE, zp.OpCode.CREATE2, zp.OpCode.CREATE_CONTAINER):
        assert isinstance(_create_op(code, zp.CreateMode.PERSISTENT_WITH_TTL), zm.Malformed)
    plain = to_op(zp.Request(1, zp.OpCode.CREATE_TTL, zp.CreateTTLRequest("/t", b"", ACL, 0, 5000)))
    assert isinstance(plain, zm.Malformed)


def test_get_ephemerals_with_a_null_prefix_means_all() -> None:
    # kazoo sends the prefix "" as a null string; ZooKeeper takes a blank prefix as "all".
    op = to_op(zp.Request(1, zp.OpCode.GET_EPHEMERALS, zp.PathRequest(None)))  # type: ignore[arg-type]
    assert op == zm.GetEphemerals("/")


u64 = st.integers(min_value=0, max_value=2**64 - 1)
i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
i32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@given(st.tuples(u64, u64, i64, i64, i32, i32, i32, u64, i32, i32, u64), i32, st.integers(-(2**63), 2**63 - 1))
def test_a_stat_reply_packed_at_once_is_the_general_encoding(values: tuple[int, ...], xid: int, zxid: int) -> None:
    """setData, setACL and exists answer with ``stat_reply``: byte for byte what the record path
    (ReplyHeader, then StatResponse of the Java-signed Stat) writes."""
    stat = TreeStat(*values)
    assert stat_reply(xid, zxid, stat) == zp.encode_reply(xid, zxid, 0, zp.StatResponse(stat_out(stat)))


def test_a_stat_reply_out_of_range_is_left_to_the_general_path() -> None:
    stat = TreeStat(1, 2, 3, 4, 2**31, 0, 0, 0, 1, 0, 1)  # a version no int32 holds
    assert stat_reply(1, 2, stat) is None
    with pytest.raises(CodecError):
        zp.encode_reply(1, 2, 0, zp.StatResponse(stat_out(stat)))


def _general(payload: bytes) -> tuple[int, zm.ClientOp] | str:
    """What the record path makes of a request payload: (xid, op), or the error it raises."""
    try:
        req = zp.decode_request(payload)
        return req.xid, to_op(req)
    except CodecError as e:
        return f"CodecError: {e}"


_set_data_payloads = st.builds(
    lambda xid, path, data, version: zp.encode_request(xid, zp.OpCode.SET_DATA,
                                                       zp.SetDataRequest(path, data, version))[4:],
    i32, st.text(max_size=12) | st.text(max_size=12) | st.none(),
    st.binary(max_size=40) | st.binary(max_size=40) | st.none(), i32,
)


@st.composite
def _damaged(draw: st.DrawFn) -> bytes:
    """A setData payload, then cut, extended, or with one byte changed (lengths and opcode too)."""
    p = bytearray(draw(_set_data_payloads))
    how = draw(st.sampled_from(["as is", "cut", "extend", "flip"]))
    if how == "cut":
        del p[draw(st.integers(0, len(p))):]
    elif how == "extend":
        p += draw(st.binary(min_size=1, max_size=6))
    elif how == "flip" and p:
        i = draw(st.integers(0, len(p) - 1))
        p[i] = draw(st.integers(0, 255))
    return bytes(p)


@settings(max_examples=300)
@given(st.one_of(_damaged(), _damaged(), st.binary(max_size=40)))
@example(struct.pack(">iii", 12, zp.OpCode.SET_DATA, -12) + bytes(8))  # a negative path length whose
# "data length" would then be the xid, which matches the payload's length
def test_a_set_data_read_in_place_is_what_the_record_path_reads(payload: bytes) -> None:
    """The setData fast path (``fast_set_data``) gives exactly the record path's (xid, op) for
    every payload it accepts, and leaves every other one (other opcodes, null path or data,
    truncated, trailing bytes, bad UTF-8) to it."""
    fast = fast_set_data(payload)
    if fast is not None:
        assert fast == _general(payload)
        assert type(fast[1].data) is bytes and type(fast[1].path) is str


def test_the_set_data_fast_path_takes_the_usual_request_and_leaves_the_odd_ones() -> None:
    frame = zp.encode_request(7, zp.OpCode.SET_DATA, zp.SetDataRequest("/a/\u00e9", b"v" * 1024, -1))
    assert fast_set_data(frame[4:]) == (7, zm.SetData("/a/\u00e9", b"v" * 1024, -1))
    for odd in (zp.SetDataRequest(None, b"v", 1), zp.SetDataRequest("/a", None, 1)):  # type: ignore[arg-type]
        assert fast_set_data(zp.encode_request(7, zp.OpCode.SET_DATA, odd)[4:]) is None
    exists = zp.encode_request(7, zp.OpCode.EXISTS, zp.PathWatchRequest("/a", False))
    assert fast_set_data(exists[4:]) is None
