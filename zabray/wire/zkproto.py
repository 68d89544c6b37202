"""ZooKeeper's client protocol (3.8): records and request/reply framing, sans IO (the codes
themselves are in ``zabray.tree.codes``).

The source of truth is ZooKeeper's ``zookeeper.jute`` and its ``ZooDefs``/``KeeperException``
constants; the numbers below are those. A client connection carries 4-byte big-endian
length-prefixed frames: first ``ConnectRequest`` (plus a trailing read-only flag), answered by
``ConnectResponse``; then requests (``RequestHeader`` + the opcode's record) answered by
``ReplyHeader`` + the opcode's response record (omitted when ``err`` is not OK). Watch events
arrive as replies with xid -1 carrying a ``WatcherEvent``. Pings, auth and set-watches use the
special xids -2, -4 and -8. A connection whose first four bytes spell a four-letter word
(``ruok``...) is an admin command, not a session.

Records are frozen, slotted dataclasses validated when decoded (``CodecError`` on garbage).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, ClassVar

from zabray.errors import CodecError
from zabray.fastinit import fast_inits
from zabray.tree.codes import (  # noqa: F401 (re-exported: callers spell them zkproto.X)
    AddWatchMode,
    CreateMode,
    Err,
    EventType,
    KeeperState,
    OpCode,
    Perm,
    WatcherType,
    Xid,
)
from zabray.wire.jute import Reader, Record, Writer

DEFAULT_MAX_FRAME = 0xFFFFF  # jute.maxbuffer's default: 1 MiB - 1
_LEN = struct.Struct(">i")


# -- data records -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Id(Record):
    scheme: str
    id: str
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring", "ustring")


@dataclass(frozen=True, slots=True)
class ACL(Record):
    perms: int
    id: Id
    FIELDS: ClassVar[tuple[Any, ...]] = ("int", Id)


OPEN_ACL_UNSAFE = (ACL(Perm.ALL, Id("world", "anyone")),)
READ_ACL_UNSAFE = (ACL(Perm.READ, Id("world", "anyone")),)
CREATOR_ALL_ACL = (ACL(Perm.ALL, Id("auth", "")),)


@dataclass(frozen=True, slots=True)
class Stat(Record):
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int
    dataLength: int
    numChildren: int
    pzxid: int
    FIELDS: ClassVar[tuple[Any, ...]] = (
        "long", "long", "long", "long", "int", "int", "int", "long", "int", "int", "long",
    )


@dataclass(frozen=True, slots=True)
class ClientInfo(Record):
    authScheme: str
    user: str
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring", "ustring")


# -- session and framing records ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectRequest(Record):
    """The first frame of a session connection; ``read_only`` is an optional trailing byte."""

    protocolVersion: int
    lastZxidSeen: int
    timeOut: int
    sessionId: int
    passwd: bytes | None
    read_only: bool = False
    FIELDS: ClassVar[tuple[Any, ...]] = ("int", "long", "int", "long", "buffer")

    def write(self, w: Writer) -> None:
        Record.write(self, w)
        w.boolean(self.read_only)

    @classmethod
    def read(cls, r: Reader) -> ConnectRequest:
        a, b, c, d, e = (r.int32(), r.int64(), r.int32(), r.int64(), r.buffer())
        ro = r.boolean() if r.remaining else False
        return cls(a, b, c, d, e, ro)


@dataclass(frozen=True, slots=True)
class ConnectResponse(Record):
    protocolVersion: int
    timeOut: int
    sessionId: int
    passwd: bytes | None
    read_only: bool = False
    FIELDS: ClassVar[tuple[Any, ...]] = ("int", "int", "long", "buffer")

    def write(self, w: Writer) -> None:
        Record.write(self, w)
        w.boolean(self.read_only)

    @classmethod
    def read(cls, r: Reader) -> ConnectResponse:
        a, b, c, d = (r.int32(), r.int32(), r.int64(), r.buffer())
        ro = r.boolean() if r.remaining else False
        return cls(a, b, c, d, ro)


@dataclass(frozen=True, slots=True)
class RequestHeader(Record):
    xid: int
    type: int
    FIELDS: ClassVar[tuple[Any, ...]] = ("int", "int")


@dataclass(frozen=True, slots=True)
class ReplyHeader(Record):
    xid: int
    zxid: int
    err: int
    FIELDS: ClassVar[tuple[Any, ...]] = ("int", "long", "int")


@dataclass(frozen=True, slots=True)
class MultiHeader(Record):
    type: int
    done: bool
    err: int
    FIELDS: ClassVar[tuple[Any, ...]] = ("int", "bool", "int")


@dataclass(frozen=True, slots=True)
class AuthPacket(Record):
    type: int
    scheme: str
    auth: bytes | None
    FIELDS: ClassVar[tuple[Any, ...]] = ("int", "ustring", "buffer")


@dataclass(frozen=True, slots=True)
class WatcherEvent(Record):
    type: int
    state: int
    path: str | None
    FIELDS: ClassVar[tuple[Any, ...]] = ("int", "int", "ustring")


@dataclass(frozen=True, slots=True)
class ErrorResponse(Record):
    err: int
    FIELDS: ClassVar[tuple[Any, ...]] = ("int",)


# -- request records ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PathRequest(Record):
    """sync, getACL, getAllChildrenNumber: a bare path."""

    path: str
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring",)


@dataclass(frozen=True, slots=True)
class PathWatchRequest(Record):
    """exists, getData, getChildren, getChildren2: a path and whether to leave a watch."""

    path: str
    watch: bool
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring", "bool")


@dataclass(frozen=True, slots=True)
class CreateRequest(Record):
    path: str
    data: bytes | None
    acl: tuple[ACL, ...] | None
    flags: int
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring", "buffer", ("vector", ACL), "int")


@dataclass(frozen=True, slots=True)
class CreateTTLRequest(Record):
    path: str
    data: bytes | None
    acl: tuple[ACL, ...] | None
    flags: int
    ttl: int
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring", "buffer", ("vector", ACL), "int", "long")


@dataclass(frozen=True, slots=True)
class PathVersionRequest(Record):
    """delete and check: a path and the expected version (-1: any)."""

    path: str
    version: int
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring", "int")


@dataclass(frozen=True, slots=True)
class SetDataRequest(Record):
    path: str
    data: bytes | None
    version: int
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring", "buffer", "int")

    @classmethod
    def read(cls, r: Reader) -> SetDataRequest:  # the hottest request: no per-field dispatch
        return cls(r.ustring(), r.buffer(), r.int32())  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class SetACLRequest(Record):
    path: str
    acl: tuple[ACL, ...] | None
    version: int
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring", ("vector", ACL), "int")


@dataclass(frozen=True, slots=True)
class PathTypeRequest(Record):
    """addWatch (type = AddWatchMode), checkWatches and removeWatches (type = WatcherType)."""

    path: str
    type: int
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring", "int")


@dataclass(frozen=True, slots=True)
class SetWatches(Record):
    relativeZxid: int
    dataWatches: tuple[str, ...] | None
    existWatches: tuple[str, ...] | None
    childWatches: tuple[str, ...] | None
    FIELDS: ClassVar[tuple[Any, ...]] = ("long",) + (("vector", "ustring"),) * 3


@dataclass(frozen=True, slots=True)
class SetWatches2(Record):
    relativeZxid: int
    dataWatches: tuple[str, ...] | None
    existWatches: tuple[str, ...] | None
    childWatches: tuple[str, ...] | None
    persistentWatches: tuple[str, ...] | None
    persistentRecursiveWatches: tuple[str, ...] | None
    FIELDS: ClassVar[tuple[Any, ...]] = ("long",) + (("vector", "ustring"),) * 5


# -- response records ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PathResponse(Record):
    """create and sync answer the (possibly sequential) path."""

    path: str
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring",)


@dataclass(frozen=True, slots=True)
class Create2Response(Record):
    path: str
    stat: Stat
    FIELDS: ClassVar[tuple[Any, ...]] = ("ustring", Stat)


@dataclass(frozen=True, slots=True)
class StatResponse(Record):
    """exists, setData and setACL answer a Stat."""

    stat: Stat
    FIELDS: ClassVar[tuple[Any, ...]] = (Stat,)


@dataclass(frozen=True, slots=True)
class GetDataResponse(Record):
    data: bytes | None
    stat: Stat
    FIELDS: ClassVar[tuple[Any, ...]] = ("buffer", Stat)


@dataclass(frozen=True, slots=True)
class ChildrenResponse(Record):
    """getChildren's children; getEphemerals' paths."""

    children: tuple[str, ...] | None
    FIELDS: ClassVar[tuple[Any, ...]] = (("vector", "ustring"),)


@dataclass(frozen=True, slots=True)
class Children2Response(Record):
    children: tuple[str, ...] | None
    stat: Stat
    FIELDS: ClassVar[tuple[Any, ...]] = (("vector", "ustring"), Stat)


@dataclass(frozen=True, slots=True)
class CountResponse(Record):
    totalNumber: int
    FIELDS: ClassVar[tuple[Any, ...]] = ("int",)


@dataclass(frozen=True, slots=True)
class GetACLResponse(Record):
    acl: tuple[ACL, ...] | None
    stat: Stat
    FIELDS: ClassVar[tuple[Any, ...]] = (("vector", ACL), Stat)


@dataclass(frozen=True, slots=True)
class WhoAmIResponse(Record):
    clientInfo: tuple[ClientInfo, ...] | None
    FIELDS: ClassVar[tuple[Any, ...]] = (("vector", ClientInfo),)


@dataclass(frozen=True, slots=True)
class GetSASLRequest(Record):
    """A SASL mechanism's token from the client (opcode 102)."""

    token: bytes | None
    FIELDS: ClassVar[tuple[Any, ...]] = ("buffer",)


@dataclass(frozen=True, slots=True)
class SetSASLResponse(Record):
    """The server's SASL token in answer."""

    token: bytes | None
    FIELDS: ClassVar[tuple[Any, ...]] = ("buffer",)


# -- multi ---------------------------------------------------------------------------------

_END = MultiHeader(-1, True, -1)

#: What each op inside a multi (or multiRead) carries, by opcode.
MULTI_OPS: dict[int, type[Record]] = {
    OpCode.CREATE: CreateRequest,
    OpCode.CREATE2: CreateRequest,
    OpCode.CREATE_CONTAINER: CreateRequest,
    OpCode.CREATE_TTL: CreateTTLRequest,
    OpCode.DELETE: PathVersionRequest,
    OpCode.DELETE_CONTAINER: PathRequest,
    OpCode.SET_DATA: SetDataRequest,
    OpCode.CHECK: PathVersionRequest,
    OpCode.GET_CHILDREN: PathWatchRequest,
    OpCode.GET_DATA: PathWatchRequest,
}

#: The result record of each op type inside a multi reply (None: no body).
MULTI_RESULTS: dict[int, type[Record] | None] = {
    OpCode.CREATE: PathResponse,
    OpCode.CREATE2: Create2Response,
    OpCode.CREATE_CONTAINER: Create2Response,
    OpCode.CREATE_TTL: Create2Response,
    OpCode.DELETE: None,
    OpCode.DELETE_CONTAINER: None,
    OpCode.SET_DATA: StatResponse,
    OpCode.CHECK: None,
    OpCode.GET_CHILDREN: ChildrenResponse,
    OpCode.GET_DATA: GetDataResponse,
    OpCode.ERROR: ErrorResponse,
}


@dataclass(frozen=True, slots=True)
class MultiRequest(Record):
    """``ops``: (opcode, record) pairs; on the wire each is preceded by a MultiHeader."""

    ops: tuple[tuple[int, Record], ...]

    def write(self, w: Writer) -> None:
        for op, rec in self.ops:
            MultiHeader(op, False, -1).write(w)
            rec.write(w)
        _END.write(w)

    @classmethod
    def read(cls, r: Reader) -> MultiRequest:
        ops: list[tuple[int, Record]] = []
        while True:
            h = MultiHeader.read(r)
            if h.done:
                return cls(tuple(ops))
            body = MULTI_OPS.get(h.type)
            if body is None:
                raise CodecError(f"multi: op type {h.type} cannot be part of a multi")
            ops.append((h.type, body.read(r)))


@dataclass(frozen=True, slots=True)
class MultiResponse(Record):
    """``results``: (opcode, err, record or None); an op that failed is (ERROR, err, ErrorResponse)."""

    results: tuple[tuple[int, int, Record | None], ...]

    def write(self, w: Writer) -> None:
        for op, err, rec in self.results:
            MultiHeader(op, False, err).write(w)
            if rec is not None:
                rec.write(w)
        _END.write(w)

    @classmethod
    def read(cls, r: Reader) -> MultiResponse:
        out: list[tuple[int, int, Record | None]] = []
        while True:
            h = MultiHeader.read(r)
            if h.done:
                return cls(tuple(out))
            if h.type not in MULTI_RESULTS:
                raise CodecError(f"multi: result type {h.type} is unknown")
            body = MULTI_RESULTS[h.type]
            out.append((h.type, h.err, None if body is None else body.read(r)))


# -- per-opcode tables ---------------------------------------------------------------------

#: The record following a RequestHeader, by opcode (None: the request has no body).
REQUESTS: dict[int, type[Record] | None] = {
    OpCode.CREATE: CreateRequest,
    OpCode.CREATE2: CreateRequest,
    OpCode.CREATE_CONTAINER: CreateRequest,
    OpCode.CREATE_TTL: CreateTTLRequest,
    OpCode.DELETE: PathVersionRequest,
    OpCode.DELETE_CONTAINER: PathRequest,
    OpCode.EXISTS: PathWatchRequest,
    OpCode.GET_DATA: PathWatchRequest,
    OpCode.SET_DATA: SetDataRequest,
    OpCode.GET_ACL: PathRequest,
    OpCode.SET_ACL: SetACLRequest,
    OpCode.GET_CHILDREN: PathWatchRequest,
    OpCode.GET_CHILDREN2: PathWatchRequest,
    OpCode.GET_ALL_CHILDREN_NUMBER: PathRequest,
    OpCode.GET_EPHEMERALS: PathRequest,
    OpCode.SYNC: PathRequest,
    OpCode.CHECK: PathVersionRequest,
    OpCode.MULTI: MultiRequest,
    OpCode.MULTI_READ: MultiRequest,
    OpCode.PING: None,
    OpCode.CLOSE_SESSION: None,
    OpCode.WHO_AM_I: None,
    OpCode.AUTH: AuthPacket,
    OpCode.SASL: GetSASLRequest,
    OpCode.SET_WATCHES: SetWatches,
    OpCode.SET_WATCHES2: SetWatches2,
    OpCode.ADD_WATCH: PathTypeRequest,
    OpCode.CHECK_WATCHES: PathTypeRequest,
    OpCode.REMOVE_WATCHES: PathTypeRequest,
}

#: The record following a ReplyHeader whose err is OK, by the request's opcode.
RESPONSES: dict[int, type[Record] | None] = {
    OpCode.CREATE: PathResponse,
    OpCode.CREATE2: Create2Response,
    OpCode.CREATE_CONTAINER: Create2Response,
    OpCode.CREATE_TTL: Create2Response,
    OpCode.DELETE: None,
    OpCode.DELETE_CONTAINER: None,
    OpCode.EXISTS: StatResponse,
    OpCode.GET_DATA: GetDataResponse,
    OpCode.SET_DATA: StatResponse,
    OpCode.GET_ACL: GetACLResponse,
    OpCode.SET_ACL: StatResponse,
    OpCode.GET_CHILDREN: ChildrenResponse,
    OpCode.GET_CHILDREN2: Children2Response,
    OpCode.GET_ALL_CHILDREN_NUMBER: CountResponse,
    OpCode.GET_EPHEMERALS: ChildrenResponse,
    OpCode.SYNC: PathResponse,
    OpCode.CHECK: None,
    OpCode.MULTI: MultiResponse,
    OpCode.MULTI_READ: MultiResponse,
    OpCode.PING: None,
    OpCode.CLOSE_SESSION: None,
    OpCode.WHO_AM_I: WhoAmIResponse,
    OpCode.AUTH: None,
    OpCode.SASL: SetSASLResponse,
    OpCode.SET_WATCHES: None,
    OpCode.SET_WATCHES2: None,
    OpCode.ADD_WATCH: ErrorResponse,  # ZooKeeper answers ErrorResponse(0); its Java client reads it
    OpCode.CHECK_WATCHES: None,
    OpCode.REMOVE_WATCHES: None,
}


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded client request: its header and the opcode's record (None for bodiless ops).

    ``known`` is False for an opcode this table does not know (answered UNIMPLEMENTED or the
    connection closed, as the server decides); its body is then left undecoded.
    """

    xid: int
    op: int
    body: Record | None
    known: bool = True


def decode_request(payload: bytes | bytearray | memoryview) -> Request:
    """Decode one request frame's payload (the length prefix already stripped)."""
    r = Reader(payload)
    h = RequestHeader.read(r)
    if h.type not in REQUESTS:
        return Request(h.xid, h.type, None, known=False)
    cls = REQUESTS[h.type]
    body = None if cls is None else cls.read(r)
    r.end()
    return Request(h.xid, h.type, body)


def encode_request(xid: int, op: int, body: Record | None) -> bytes:
    """A length-prefixed request frame."""
    w = Writer()
    w.buf += b"\0\0\0\0"
    RequestHeader(xid, op).write(w)
    if body is not None:
        body.write(w)
    _LEN.pack_into(w.buf, 0, len(w.buf) - 4)
    return bytes(w.buf)


def encode_reply(xid: int, zxid: int, err: int, body: Record | None = None, *, body_on_error: bool = False) -> bytes:
    """A length-prefixed reply frame; the body is sent only when ``err`` is OK (as ZooKeeper does),
    or with ``body_on_error`` (ZooKeeper's failed SASL step carries its null token)."""
    w = Writer()
    w.buf += b"\0\0\0\0"
    ReplyHeader(xid, zxid, err).write(w)
    if body is not None and (err == Err.OK or body_on_error):
        body.write(w)
    _LEN.pack_into(w.buf, 0, len(w.buf) - 4)
    return bytes(w.buf)


def encode_record(rec: Record) -> bytes:
    """A length-prefixed frame holding one record (the connect handshake)."""
    body = rec.encode()
    return _LEN.pack(len(body)) + body


def decode_reply(payload: bytes | bytearray | memoryview, op: int | None) -> tuple[ReplyHeader, Record | None]:
    """Decode a reply frame's payload for a request of opcode ``op`` (None: watch events by xid)."""
    r = Reader(payload)
    h = ReplyHeader.read(r)
    if h.xid == Xid.NOTIFICATION:
        return h, WatcherEvent.read(r)
    if h.err != Err.OK or op is None:
        return h, None
    cls = RESPONSES.get(op)
    body = None if cls is None else cls.read(r)
    r.end()
    return h, body


FOUR_LETTER_WORDS = frozenset(
    {"ruok", "srvr", "stat", "mntr", "conf", "cons", "crst", "envi", "wchs", "wchc", "wchp",
     "isro", "dump", "srst", "dirs", "gtmk", "stmk"}
)


class FrameSplitter:
    """Splits a byte stream into length-prefixed frames, sans IO.

    ``feed`` returns the complete frames so far. A length that is negative or larger than
    ``max_frame`` is a ``CodecError`` (the connection is dropped before the bytes are buffered).
    ``first_word`` is the four-letter word when the stream opened with one instead of a frame.
    """

    __slots__ = ("_buf", "_max", "_started", "first_word")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME, *, admin_words: bool = True) -> None:
        self._buf = bytearray()
        self._max = max_frame
        self._started = not admin_words
        self.first_word: str | None = None

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        if not self._started:
            if len(buf) < 4:
                return []
            self._started = True
            word = bytes(buf[:4]).decode("ascii", "replace")
            if word in FOUR_LETTER_WORDS:
                self.first_word = word
                buf.clear()
                return []
        out: list[bytes] = []
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            (size,) = _LEN.unpack_from(buf, pos)
            if size < 0 or size > self._max:
                raise CodecError(f"frame length {size} is outside 0..{self._max} (jute.maxbuffer)")
            if n - pos - 4 < size:
                break
            out.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return out


fast_inits(globals())  # built on every message or write: see zabray.fastinit
