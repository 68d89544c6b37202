"""ZooKeeper 3.8 requests kazoo 2.11 has no method for, sent through a started ``KazooClient``.

createContainer, createTTL, getAllChildrenNumber, getEphemerals, addWatch, checkWatches,
removeWatches, whoAmI, multiRead, and creates with raw flags or raw (unnormalised) paths.
Encoded with kazoo's own jute helpers, independently of zabray's codec, so a codec bug on either
side shows up as a difference. Responses are parsed as the Java client parses them; every parser
also reports how many body bytes it did not read, so a missing or extra field is a difference too.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.serialization import (
    MultiHeader,
    ZnodeStat,
    int_struct,
    long_struct,
    read_buffer,
    read_string,
    stat_struct,
    write_buffer,
    write_string,
)
from kazoo.security import ACL

Parser = Callable[[bytes, int], tuple[Any, int]]


class RawRequest:
    """One request of opcode ``type``: ``payload`` as its body, ``parse`` for its response body."""

    def __init__(self, type_: int, payload: bytes, parse: Parser, path: str = "") -> None:
        self.type = type_
        self.payload = payload
        self.parse = parse
        self.path = path

    def serialize(self) -> bytes:
        return self.payload

    def deserialize(self, buf: bytes, offset: int) -> Any:
        try:
            value, end = self.parse(buf, offset)
        except (struct.error, UnicodeDecodeError, IndexError) as e:
            return ("unparseable", type(e).__name__, bytes(buf[offset:]))  # a difference, not a crash
        return value, len(buf) - end  # the answer, and body bytes left unread


def _none(buf: bytes, off: int) -> tuple[Any, int]:
    return None, off


def _int(buf: bytes, off: int) -> tuple[Any, int]:
    return int_struct.unpack_from(buf, off)[0], off + int_struct.size


def _stat(buf: bytes, off: int) -> tuple[ZnodeStat, int]:
    return ZnodeStat._make(stat_struct.unpack_from(buf, off)), off + stat_struct.size


def _strings(buf: bytes, off: int) -> tuple[list[str], int]:
    n = int_struct.unpack_from(buf, off)[0]
    off += int_struct.size
    out = []
    for _ in range(max(n, 0)):
        s, off = read_string(buf, off)
        out.append(s)
    return out, off


def _path_stat(buf: bytes, off: int) -> tuple[Any, int]:
    path, off = read_string(buf, off)
    st, off = _stat(buf, off)
    return (path, st), off


def _who(buf: bytes, off: int) -> tuple[Any, int]:
    n = int_struct.unpack_from(buf, off)[0]
    off += int_struct.size
    out = []
    for _ in range(max(n, 0)):
        scheme, off = read_string(buf, off)
        user, off = read_string(buf, off)
        out.append((scheme, user))
    return out, off


def _acl_bytes(acl: Sequence[ACL]) -> bytes:
    b = bytearray(int_struct.pack(len(acl)))
    for a in acl:
        b += int_struct.pack(a.perms) + write_string(a.id.scheme) + write_string(a.id.id)
    return bytes(b)


def create(op: int, path: str, data: bytes, acl: Sequence[ACL], flags: int, ttl: int | None = None) -> RawRequest:
    """create (1) / create2 (15) / createContainer (19) / createTTL (21) with any flags."""
    body = write_string(path) + write_buffer(data) + _acl_bytes(acl) + int_struct.pack(flags)
    if ttl is not None:
        body += long_struct.pack(ttl)
    parse: Parser = (lambda b, o: read_string(b, o)) if op == 1 else _path_stat
    return RawRequest(op, bytes(body), parse, path)


def all_children_number(path: str) -> RawRequest:
    return RawRequest(104, bytes(write_string(path)), _int, path)


def ephemerals(prefix: str) -> RawRequest:
    return RawRequest(103, bytes(write_string(prefix)), _strings, prefix)


def add_watch(path: str, recursive: bool) -> RawRequest:
    """addWatch: the Java client reads an ErrorResponse (one int) as its answer."""
    return RawRequest(106, bytes(write_string(path) + int_struct.pack(1 if recursive else 0)), _int, path)


def check_watches(path: str, kind: int) -> RawRequest:
    return RawRequest(17, bytes(write_string(path) + int_struct.pack(kind)), _none, path)


def remove_watches(path: str, kind: int) -> RawRequest:
    return RawRequest(18, bytes(write_string(path) + int_struct.pack(kind)), _none, path)


def who_am_i() -> RawRequest:
    return RawRequest(107, b"", _who)


def get_data_raw(path: str) -> RawRequest:
    """getData of a path exactly as given (kazoo normalises paths; the server must check them)."""
    def parse(b: bytes, o: int) -> tuple[Any, int]:
        data, o = read_buffer(b, o)
        st, o = _stat(b, o)
        return (data, st), o
    return RawRequest(4, bytes(write_string(path) + b"\0"), parse, path)


def exists_raw(path: str) -> RawRequest:
    return RawRequest(3, bytes(write_string(path) + b"\0"), _stat, path)


def delete_raw(path: str, version: int) -> RawRequest:
    return RawRequest(2, bytes(write_string(path) + int_struct.pack(version)), _none, path)


def sync_raw(path: str) -> RawRequest:
    return RawRequest(9, bytes(write_string(path)), lambda b, o: read_string(b, o), path)


def multi_read(ops: Sequence[tuple[str, str]]) -> RawRequest:
    """multiRead of ("get", path) / ("children", path): each op answers its value or its error."""
    body = bytearray()
    for kind, path in ops:
        t = 4 if kind == "get" else 8
        body += MultiHeader(t, False, -1).serialize() + write_string(path) + b"\0"
    body += MultiHeader(-1, True, -1).serialize()

    def parse(b: bytes, o: int) -> tuple[Any, int]:
        out: list[Any] = []
        while True:
            h, o = MultiHeader.deserialize(b, o)
            if h.done:
                return out, o
            if h.type == 4:
                data, o = read_buffer(b, o)
                st, o = _stat(b, o)
                out.append((data, st))
            elif h.type == 8:
                kids, o = _strings(b, o)
                out.append(sorted(kids))
            else:
                err, o = _int(b, o)
                out.append(("err", err))
    return RawRequest(22, bytes(body), parse)


def call(client: KazooClient, req: RawRequest, timeout: float) -> Any:
    """Send ``req`` on ``client``'s session and wait for its answer (KazooException on error)."""
    result = client.handler.async_result()
    client._call(req, result)
    return result.get(timeout=timeout)
