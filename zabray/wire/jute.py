"""Jute, ZooKeeper's binary serialization, as a sans-IO reader and writer.

Every value is big-endian: ``int`` 4 bytes, ``long`` 8, ``boolean`` 1, ``buffer`` and
``ustring`` an int length (-1 means null) then the bytes (UTF-8 for a ustring), ``vector`` an
int count (-1 means null) then the items. Records are these fields in declaration order with
no tags, so a reader must know the record it expects: the opcode of a request, or the xid of a
reply, says which.

Invariants: the reader never reads past its buffer, never accepts a negative length other
than -1, and rejects invalid UTF-8; every such failure is a ``CodecError`` (the connection that
carried the bytes is dropped, the server carries on). A record's ``FIELDS`` lists its fields'
jute types in order; ``encode``/``decode`` are driven by that table so one code path serialises
every record and nothing is written by hand twice.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, ClassVar, TypeVar

from zabray.errors import CodecError

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_BOOL = struct.Struct(">?")
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


class Reader:
    """Reads jute values from one buffer, front to back; ``CodecError`` on anything malformed."""

    __slots__ = ("_buf", "_pos", "_end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self._buf = bytes(buf)
        self._pos = pos
        self._end = len(self._buf)

    @property
    def remaining(self) -> int:
        return self._end - self._pos

    @property
    def pos(self) -> int:
        return self._pos

    def _take(self, n: int) -> int:
        p = self._pos
        if n < 0 or p + n > self._end:
            raise CodecError(f"jute: record truncated at byte {p} (needs {n}, has {self._end - p})")
        self._pos = p + n
        return p

    def int32(self) -> int:
        return int(_INT.unpack_from(self._buf, self._take(4))[0])

    def int64(self) -> int:
        return int(_LONG.unpack_from(self._buf, self._take(8))[0])

    def unpack(self, fixed: struct.Struct) -> tuple[Any, ...]:
        """The next ``fixed.size`` bytes as ``fixed`` lays them out."""
        return fixed.unpack_from(self._buf, self._take(fixed.size))

    def boolean(self) -> bool:
        b = self._buf[self._take(1)]
        if b > 1:
            raise CodecError(f"jute: boolean byte {b} is neither 0 nor 1")
        return b == 1

    def _length(self, what: str) -> int:
        n = self.int32()
        if n < -1:
            raise CodecError(f"jute: negative {what} length {n}")
        return n

    def buffer(self) -> bytes | None:
        n = self._length("buffer")
        if n == -1:
            return None
        p = self._take(n)
        return self._buf[p : p + n]

    def ustring(self) -> str | None:
        n = self._length("string")
        if n == -1:
            return None
        p = self._take(n)
        try:
            return self._buf[p : p + n].decode("utf-8")
        except UnicodeDecodeError as e:
            raise CodecError(f"jute: string is not UTF-8 ({e.reason})") from None

    def vector(self, item: Callable[[Reader], Any]) -> list[Any] | None:
        n = self._length("vector")
        if n == -1:
            return None
        if n > self.remaining:  # every item takes at least one byte: a cheap bound on garbage counts
            raise CodecError(f"jute: vector of {n} items in {self.remaining} bytes")
        return [item(self) for _ in range(n)]

    def end(self) -> None:
        """Assert the record consumed the whole buffer (trailing garbage is malformed)."""
        if self._pos != self._end:
            raise CodecError(f"jute: {self._end - self._pos} unexpected trailing bytes")


class Writer:
    """Appends jute values to a bytearray; values out of their type's range are a ``CodecError``."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def int32(self, v: int) -> None:
        try:
            self.buf += _INT.pack(v)
        except struct.error:
            raise CodecError(f"jute: {v!r} is not a 32-bit int") from None

    def int64(self, v: int) -> None:
        try:
            self.buf += _LONG.pack(v)
        except struct.error:
            raise CodecError(f"jute: {v!r} is not a 64-bit long") from None

    def boolean(self, v: bool) -> None:
        self.buf += _BOOL.pack(bool(v))

    def buffer(self, v: bytes | None) -> None:
        if v is None:
            self.buf += _INT.pack(-1)
            return
        self.buf += _INT.pack(len(v))
        self.buf += v

    def ustring(self, v: str | None) -> None:
        self.buffer(None if v is None else v.encode("utf-8"))

    def vector(self, items: Sequence[Any] | None, item: Callable[[Writer, Any], None]) -> None:
        if items is None:
            self.buf += _INT.pack(-1)
            return
        self.buf += _INT.pack(len(items))
        for x in items:
            item(self, x)


R = TypeVar("R", bound="Record")


class Record:
    """Base of jute records: subclasses are frozen, slotted dataclasses with a ``FIELDS`` table.

    ``FIELDS`` holds one jute type per dataclass field, in order: ``"int"``, ``"long"``,
    ``"bool"``, ``"buffer"``, ``"ustring"``, a Record subclass, or ``("vector", t)``.
    """

    FIELDS: ClassVar[tuple[Any, ...]] = ()

    def encode(self) -> bytes:
        w = Writer()
        self.write(w)
        return bytes(w.buf)

    def write(self, w: Writer) -> None:
        cls = type(self)
        fixed = _fixed(cls)
        if fixed is not None:
            try:
                w.buf += fixed.pack(*[getattr(self, name) for name in _NAMES[cls]])
                return
            except struct.error:
                pass  # a value out of range: the field-by-field path names it
        for name, write in _writers(cls):
            write(w, getattr(self, name))

    @classmethod
    def read(cls: type[R], r: Reader) -> R:
        fixed = _fixed(cls)
        if fixed is not None:
            return cls(*r.unpack(fixed))
        return cls(*[read(r) for read in _readers(cls)])

    @classmethod
    def decode(cls: type[R], data: bytes | bytearray | memoryview) -> R:
        """Decode a whole buffer holding exactly one record."""
        r = Reader(data)
        rec = cls.read(r)
        r.end()
        return rec


_NAMES: dict[type, tuple[str, ...]] = {}
_FIXED: dict[type, struct.Struct | None] = {}
_FIXED_CODES = {"int": "i", "long": "q"}


def _fixed(cls: type) -> struct.Struct | None:
    """One struct for a record made only of ints and longs (Stat, the headers): packed and
    unpacked in one call (a setData reply encodes in 2.3 us against 3.1 field by field).
    None for any other record, and for one with fields past its table."""
    try:
        return _FIXED[cls]
    except KeyError:
        pass
    table: tuple[Any, ...] = getattr(cls, "FIELDS", ())
    ok = bool(table) and len(table) == len(_names(cls)) and all(
        isinstance(t, str) and t in _FIXED_CODES for t in table)
    fixed = _FIXED[cls] = struct.Struct(">" + "".join(_FIXED_CODES[t] for t in table)) if ok else None
    return fixed


def _names(cls: type) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


_WRITERS: dict[type, tuple[tuple[str, Callable[[Writer, Any], None]], ...]] = {}
_READERS: dict[type, tuple[Callable[[Reader], Any], ...]] = {}
_WRITE_OF: dict[str, Callable[[Writer, Any], None]] = {
    "int": Writer.int32, "long": Writer.int64, "bool": Writer.boolean, "buffer": Writer.buffer,
    "ustring": Writer.ustring,
}
_READ_OF: dict[str, Callable[[Reader], Any]] = {
    "int": Reader.int32, "long": Reader.int64, "bool": Reader.boolean, "buffer": Reader.buffer,
    "ustring": Reader.ustring,
}


def _writers(cls: type) -> tuple[tuple[str, Callable[[Writer, Any], None]], ...]:
    """Each field's name and writer, resolved from ``FIELDS`` once per class rather than
    dispatched on its type name per value (a create request's ACLs are three records deep).
    A record may carry fields past its table (ConnectRequest's optional read-only flag),
    written by its own ``write``: so the table's end is the end."""
    ws = _WRITERS.get(cls)
    if ws is None:
        table: tuple[Any, ...] = getattr(cls, "FIELDS", ())
        ws = _WRITERS[cls] = tuple(zip(_names(cls), map(_writer, table), strict=False))
    return ws


def _readers(cls: type) -> tuple[Callable[[Reader], Any], ...]:
    rs = _READERS.get(cls)
    if rs is None:
        rs = _READERS[cls] = tuple(map(_reader, getattr(cls, "FIELDS", ())))
    return rs


def _writer(t: Any) -> Callable[[Writer, Any], None]:
    if isinstance(t, str):
        try:
            return _WRITE_OF[t]
        except KeyError:  # pragma: no cover - a typo in a FIELDS table
            raise TypeError(f"unknown jute type {t!r}") from None
    if isinstance(t, tuple):
        inner = _writer(t[1])
        return lambda w, v: w.vector(v, inner)
    return _write_record


def _write_record(w: Writer, v: Record) -> None:
    v.write(w)


def _reader(t: Any) -> Callable[[Reader], Any]:
    if isinstance(t, str):
        try:
            return _READ_OF[t]
        except KeyError:  # pragma: no cover
            raise TypeError(f"unknown jute type {t!r}") from None
    if isinstance(t, tuple):
        inner = _reader(t[1])

        def vector(r: Reader) -> tuple[Any, ...] | None:
            items = r.vector(inner)
            return None if items is None else tuple(items)
        return vector
    read: Callable[[Reader], Any] = t.read
    return read
