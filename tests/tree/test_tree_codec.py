"""Request and txn encodings: round trips, and typed errors on anything malformed."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from tree_harness import Leader

from zabray.errors import CorruptionError, FormatVersionError
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid
from zabray.tree import (
    BadArgumentsError,
    Check,
    CloseSession,
    Create,
    CreateSession,
    DataTree,
    Delete,
    DeleteContainer,
    Multi,
    NoNodeError,
    Request,
    SetACL,
    SetData,
    Sync,
    TxnRecord,
    ZooKeeperError,
    create,
    decode_request,
    decode_txn,
    encode_request,
    error_for_code,
    validate_path,
)
from zabray.tree.ops import (
    CheckTxn,
    CloseSessionTxn,
    CreateSessionTxn,
    CreateTxn,
    DeleteContainerTxn,
    DeleteTxn,
    ErrorTxn,
    MultiTxn,
    SetACLTxn,
    SetDataTxn,
    SyncTxn,
    encode_txn,
)

OPS = [
    Create("/a", b"\x00\xff", True, False),
    Create("/a/", b"", False, True),
    Delete("/a", -1),
    SetData("/a", b"x", 7),
    Check("/a", 0),
    Multi((Create("/m"), Delete("/m", 0), SetData("/", b""), Check("/"))),
    Multi(()),
    CreateSession(30000),
    CloseSession(),
    Sync("/a"),
    Create("/c", b"", False, True, ((1, "world", "anyone"), (31, "auth", "")), container=True, stat=True),
    Create("/t", b"", ttl=2**40 - 1),
    SetACL("/a", ((16, "digest", "u:h"), (3, "ip", "10.0.0.0/8")), 3),
    SetACL("/a", (), -1),
    DeleteContainer("/c"),
]


@pytest.mark.parametrize("op", OPS, ids=lambda o: type(o).__name__)
def test_request_round_trip(op) -> None:  # type: ignore[no-untyped-def]
    req = Request(2**64 - 1, 123456789, op)
    assert decode_request(encode_request(req)) == req
    req = Request(7, 1, op, (("digest", "u:h"), ("ip", "127.0.0.1"), ("super", "")))
    assert decode_request(encode_request(req)) == req


BODIES = [
    CreateTxn("/a", b"d", 0, 1),
    CreateTxn("/a/e0000000001", b"", 2**63, 2),
    DeleteTxn("/a"),
    SetDataTxn("/", b"x", 1),
    CheckTxn("/a", -1),
    MultiTxn((CreateTxn("/m", b"", 0, 1), DeleteTxn("/m"), CheckTxn("/", 0))),
    CreateSessionTxn(1),
    CloseSessionTxn(("/a", "/b")),
    CloseSessionTxn(()),
    SyncTxn("/"),
    CreateTxn("/c", b"", 2**63, 3, ((1, "digest", "u:h"),), True),
    CreateTxn("/t", b"", 0xFF << 56 | 1000, 3, (), False),
    SetACLTxn("/a", ((31, "world", "anyone"),), 1),
    SetACLTxn("/zookeeper/config", (), -1),
    DeleteContainerTxn("/c"),
    ErrorTxn(9, "NO_AUTH", "msg", "/a", None),
    ErrorTxn(1, "NO_NODE", "msg", "/a", None),
    ErrorTxn(5, "BAD_VERSION", "msg", None, 3),
    ErrorTxn(0, "BAD_ARGUMENTS", "", None, None),
]


@pytest.mark.parametrize("b", BODIES, ids=lambda b: type(b).__name__)
def test_txn_round_trip(b) -> None:  # type: ignore[no-untyped-def]
    rec = TxnRecord(5, 9, b)
    assert decode_txn(encode_txn(rec)) == rec


def req_bytes(*v: object) -> bytes:
    return msgpack.packb(list(v), use_bin_type=True)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",
        req_bytes(2, 0, 0),  # too short
        req_bytes(3, 0, 0, [2, "/a", -1], []),  # unknown version
        req_bytes(True, 0, 0, [2, "/a", -1], []),  # bool is not a version
        req_bytes(2, -1, 0, [2, "/a", -1], []),  # negative session
        req_bytes(2, 0, -5, [2, "/a", -1], []),  # negative time
        req_bytes(2, 0, 0, [2, "/a", -1]),  # no auth ids
        req_bytes(2, 0, 0, [2, "/a", -1], [["digest"]]),  # auth id is not (scheme, id)
        req_bytes(2, 0, 0, [2, "/a", -1], [[1, "x"]]),  # scheme is not a string
        req_bytes(2, 0, 0, [99, "/a"], []),  # unknown op
        req_bytes(2, 0, 0, [0, "x"], []),  # ERROR is not a request op
        req_bytes(2, 0, 0, [1, "/a", "str-not-bytes", False, False, [], False, -1, False], []),
        req_bytes(2, 0, 0, [1, "/a", b"", 1, False, [], False, -1, False], []),  # int is not a bool
        req_bytes(2, 0, 0, [1, b"/a", b"", False, False, [], False, -1, False], []),  # bytes is not a path
        req_bytes(2, 0, 0, [1, "/a", b"", False, False, [[1, "world"]], False, -1, False], []),  # acl entry
        req_bytes(2, 0, 0, [1, "/a", b"", False, False, [[2**31, "world", "anyone"]], False, -1, False], []),
        req_bytes(2, 0, 0, [1, "/a", b"", False, False, [], False, "1", False], []),  # ttl not an int
        req_bytes(2, 0, 0, [1, "/a", b"", False, False], []),  # create arity (format 1)
        req_bytes(2, 0, 0, [9, "/a", [], 2**31], []),  # set_acl version beyond int32
        req_bytes(2, 0, 0, [10], []),  # delete_container arity
        req_bytes(2, 0, 0, [2, "/a", -(2**31) - 1], []),  # version below int32
        req_bytes(2, 0, 0, [2, "/a", 2**31], []),  # version beyond int32
        req_bytes(2, 0, 0, [2, "/a"], []),  # arity
        req_bytes(2, 0, 0, [5, [[6, 1000]]], []),  # sessions cannot be in a multi
        req_bytes(2, 0, 0, [5, [[5, []]]], []),  # nor can multis
        req_bytes(2, 0, 0, [5, [[9, "/a", [], -1]]], []),  # nor set_acl
        req_bytes(2, 0, 0, [6, 0], []),  # timeout must be positive
        req_bytes(1, 0, 0, {"a": 1}),
        msgpack.packb({"not": "a list"}),
    ],
)
def test_bad_request_raises_bad_arguments(data: bytes) -> None:
    with pytest.raises(BadArgumentsError):
        decode_request(data)
    # and the leader turns it into an error txn rather than failing
    body = decode_txn(DataTree().prepare(data, 1)).body
    assert type(body) is ErrorTxn and body.code == BadArgumentsError.code and body.op == 0


def test_builders_check_types() -> None:
    with pytest.raises(BadArgumentsError):
        create("/a", "text", time_ms=1)  # type: ignore[arg-type]
    with pytest.raises(BadArgumentsError):
        create("/a", time_ms=-1)
    with pytest.raises(BadArgumentsError):
        encode_request(Request(0, 0, Multi((CreateSession(10),))))  # type: ignore[arg-type]
    with pytest.raises(BadArgumentsError):
        encode_request(Request(0, 0, "op"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "data",
    [
        b"\xc1",
        req_bytes(3, 0, 0, [2, "/a"]),  # unknown version
        req_bytes(2, 0, 0, [2, "a"]),  # invalid path
        req_bytes(2, 0, 0, [2, "/"]),  # deleting the root
        req_bytes(2, 0, 0, [1, "/a", b"", 0, 0, [], False]),  # parent_cversion must be >= 1
        req_bytes(2, 0, 0, [1, "/a", b"", 0, 1]),  # create arity (format 1)
        req_bytes(2, 0, 0, [1, "/a", b"", 0xFF << 56, 1, [], False]),  # a TTL marker with ttl 0
        req_bytes(2, 0, 0, [1, "/a", b"", 0x81 << 56, 1, [], False]),  # neither session nor marker
        req_bytes(2, 0, 0, [1, "/a", b"", 0, 1, [[31, "world"]], False]),  # acl entry
        req_bytes(2, 0, 0, [3, "/a", b"", 0]),  # a set_data version is >= 1
        req_bytes(2, 0, 0, [9, "/a", [], 2**31]),  # aversion beyond int32
        req_bytes(2, 0, 0, [10, "/"]),  # delete_container of the root
        req_bytes(2, 0, 0, [0, 1, "NO_SUCH_CODE", "", None, None]),
        req_bytes(2, 0, 0, [0, 42, "NO_NODE", "", None, None]),
        req_bytes(2, 0, 0, [7, ["/"]]),
        req_bytes(2, 0, 0, [5, [[6, 10]]]),
        req_bytes(2, 0, 0, [5, [[9, "/a", [], 1]]]),  # set_acl is not part of a multi
        req_bytes(2, 0, 0, [11]),
    ],
)
def test_bad_txn_raises_corruption(data: bytes) -> None:
    with pytest.raises(CorruptionError):
        decode_txn(data)
    t = DataTree()
    with pytest.raises(CorruptionError):
        t.apply(Txn(Zxid(1), data))
    assert t.last_zxid == 0


def test_txn_that_does_not_fit_raises_corruption() -> None:
    ld = Leader()
    ld.write(create("/a", time_ms=1))

    def apply(b) -> None:  # type: ignore[no-untyped-def]
        ld.tree.apply(Txn(Zxid(1 + ld.tree.last_zxid), encode_txn(TxnRecord(0, 0, b))))

    for b in (
        CreateTxn("/a", b"", 0, 2),  # exists
        CreateTxn("/x/y", b"", 0, 1),  # no parent
        CreateTxn("/b", b"", 0, 5),  # cversion does not follow
        CreateTxn("/b", b"", 77, 2),  # owner not live
        DeleteTxn("/nope"),
        SetDataTxn("/a", b"", 5),
        CheckTxn("/a", 3),
        CloseSessionTxn(()),  # session 0 is not live
        CreateSessionTxn(10),  # session 0
        SetACLTxn("/a", (), 5),  # aversion does not follow
        SetACLTxn("/nope", (), 1),
        DeleteTxn("/zookeeper/quota"),  # ZooKeeper's own znodes stay
        DeleteContainerTxn("/nope"),
    ):
        with pytest.raises(CorruptionError):
            apply(b)


def test_format_1_txn_is_refused_by_name() -> None:
    old = msgpack.packb([1, 0, 0, [1, "/a", b"", 0, 1]], use_bin_type=True)
    with pytest.raises(FormatVersionError, match="format 1"):
        decode_txn(old)


def test_paths() -> None:
    for good in ("/", "/a", "/a/b", "/a.b/..c", "/ünïcode", "/a b"):
        assert validate_path(good) == good
    for bad in (
        "",
        "a",
        "/a/",
        "//",
        "/a//b",
        "/.",
        "/a/..",
        "/a\0",
        "/a\x1f",
        "/a\x7f",
        "/a\ufff5",
        5,
        None,
    ):
        with pytest.raises(BadArgumentsError):
            validate_path(bad)
    assert validate_path("/a/", sequential=True) == "/a/"
    with pytest.raises(BadArgumentsError):
        validate_path("/a//", sequential=True)


def test_error_codes_are_stable_and_typed() -> None:
    e = error_for_code("NO_NODE", "m", path="/p", index=2)
    assert type(e) is NoNodeError and (e.code, e.message, e.path, e.index) == ("NO_NODE", "m", "/p", 2)
    u = error_for_code("FUTURE_CODE", "m")
    assert type(u) is ZooKeeperError and u.code == "FUTURE_CODE"


@example("\x00")
@example("\x1f")
@example(" ")
@example("~")
@example("\x7f")
@example("\x9f")
@example("\xa0")
@example("\ud7ff")
@example("\ud800")
@example("\udfff")
@example("\ue000")
@example("\uffef")
@example("\ufff0")
@example("\uffff")
@example("\U00010000")
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), min_size=1, max_size=3))
def test_path_characters_follow_zookeepers_rule(name: str) -> None:
    """The compiled character class rejects exactly what ZooKeeper's per-character rule does."""
    from zabray.tree.paths import _bad_char

    path = "/x" + name.replace("/", "y")
    if any(_bad_char(c) for c in path):
        with pytest.raises(BadArgumentsError, match="invalid character"):
            validate_path(path)
    elif path.rsplit("/", 1)[1] not in (".", ".."):
        assert validate_path(path) == path


@given(
    st.integers(0, 50), st.integers(0, 50),
    st.one_of(st.just(0), st.integers(1, 2**63 - 1), st.integers(2**63, 2**64 - 1)),
)
def test_a_client_stat_reports_creations_and_owners_as_zookeeper_does(cversion: int, children: int, owner: int) -> None:
    """The stored Stat counts child creations in ``cversion`` and keeps kind markers in the
    owner; a client sees ZooKeeper's cversion (creations and deletions) and owner 0 for those."""
    from zabray.tree.znode import SESSION_ID_LIMIT, Stat, client_stat

    stored = Stat(1, 2, 3, 4, 5, cversion, 6, owner, 7, children, 8)
    seen = client_stat(stored)
    assert seen == Stat(1, 2, 3, 4, 5, 2 * cversion - children, 6, owner if owner < SESSION_ID_LIMIT else 0, 7,
                        children, 8)


_edge_ints = st.sampled_from([-(2**63) - 1, -(2**63), -2, -1, 0, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1, 2**64])


_auths = st.sampled_from([[], [["ip", "127.0.0.1"]], [["digest", "u:h"], ["ip", "::1"]], [["ip"]], [["ip", 1]],
                          [("ip", "x")], "ip"])


@given(_edge_ints, _edge_ints, st.sampled_from(["/a", "/a/b", "a", "/a/", "//a", "/a\x00", 7]),
       st.sampled_from([b"", b"v", "v", None]), _edge_ints, _auths)
def test_a_set_data_request_and_txn_decode_by_the_same_rules_on_the_fast_path(
    session: int, t: int, path: object, data: object, version: int, auth: object
) -> None:
    """setData requests and txns are checked inline (their hot path); what that accepts and
    what it refuses is exactly what the field-by-field rules say."""
    from zabray.tree.ops import REQUEST_VERSION, TXN_VERSION, OpCode, SetDataTxn
    from zabray.tree.paths import validate_path

    def valid_path(p: object) -> bool:
        try:
            validate_path(p)
            return True
        except BadArgumentsError:
            return False

    fits = 0 <= session < 2**64 and 0 <= t < 2**63 and (data is None or type(data) is bytes) and type(path) is str
    if not (-(2**63) <= min(session, t, version) and max(session, t, version) < 2**64):
        return  # msgpack has no such integer
    raw = msgpack.packb([REQUEST_VERSION, session, t, [int(OpCode.SET_DATA), path, data, version], auth],
                        use_bin_type=True)  # (msgpack sends a tuple as a list)
    ids_ok = type(auth) is list and all(len(e) == 2 and all(type(x) is str for x in e) for e in auth)
    if fits and -(2**31) <= version < 2**31 and ids_ok:  # (a request's path is checked later, by the processor)
        ids = tuple(tuple(e) for e in auth)  # type: ignore[union-attr]
        assert decode_request(raw) == Request(session, t, SetData(path, data, version), ids)  # type: ignore[arg-type]
    else:
        with pytest.raises(BadArgumentsError):
            decode_request(raw)
    txn = msgpack.packb([TXN_VERSION, t, session, [int(OpCode.SET_DATA), path, data, version]], use_bin_type=True)
    if fits and valid_path(path) and 1 <= version < 2**63:
        assert decode_txn(txn) == TxnRecord(t, session, SetDataTxn(path, data, version))  # type: ignore[arg-type]
    else:
        with pytest.raises(CorruptionError):
            decode_txn(txn)


@pytest.mark.parametrize("perms", [31, 31.0, True, "31", 2**31])
@pytest.mark.parametrize("scheme, ident", [("world", "anyone"), (b"world", "anyone"), ("world", b"anyone")])
def test_the_open_acl_decodes_by_the_same_rules_on_its_fast_path(perms: object, scheme: object, ident: object) -> None:
    """Nearly every create carries world:anyone with all perms, recognised whole; a row that only
    compares equal to it (31.0 == 31, True == 1 in Python) still goes through every check."""
    from zabray.tree.ops import TXN_VERSION, OpCode
    from zabray.tree.znode import OPEN_ACL

    body = [int(OpCode.CREATE), "/a", b"", 0, 1, [[perms, scheme, ident]], False]
    raw = msgpack.packb([TXN_VERSION, 1, 0, body], use_bin_type=True)
    if type(perms) is int and perms == 31 and scheme == "world" and ident == "anyone":
        assert decode_txn(raw) == TxnRecord(1, 0, CreateTxn("/a", b"", 0, 1, OPEN_ACL))
    else:
        with pytest.raises(CorruptionError):
            decode_txn(raw)
