"""Wire framing for replica-to-replica TCP connections. Pure: no sockets, no event loop.

A frame is ``length (4 bytes, big-endian) | crc32(payload) (4 bytes, big-endian) | payload``;
the payload is one msgpack document (a ``zabray.protocol.codec`` message, or the handshake that
opens every connection). TCP already gives integrity per segment, but the CRC catches a
desynchronised stream (a bug, a middlebox, a hostile peer) before it can be decoded as a message,
and the length limit keeps a garbled header from making us buffer gigabytes.

Invariants:
- ``FrameDecoder.feed`` returns only payloads whose CRC matched, in stream order, each exactly
  once; on anything malformed it raises ``CodecError`` and stays failed (a stream that went bad
  once can never be trusted again, so the caller drops the connection).
- ``FrameEncoder`` produces exactly the bytes ``FrameDecoder`` accepts and refuses to produce a
  frame the peer would reject for its size.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any

import msgpack

from zabray.errors import CodecError
from zabray.protocol.codec import encode
from zabray.protocol.events import ChannelId
from zabray.protocol.messages import Message

HEADER = struct.Struct(">II")
"""(payload length, crc32 of payload)."""
HEADER_SIZE = HEADER.size
DEFAULT_MAX_FRAME = 64 << 20
"""Largest payload accepted or produced, in bytes (SNAP and DIFF chunks must fit)."""

_crc32 = zlib.crc32
_pack_header = HEADER.pack
_unpack_header = HEADER.unpack_from


def _check_max(max_frame: int) -> int:
    if type(max_frame) is not int or not 1 <= max_frame < 1 << 32:
        raise ValueError(f"max_frame must be an int in [1, 2**32), got {max_frame!r}")
    return max_frame


def frame(payload: bytes) -> bytes:
    """One frame around ``payload`` (no size limit check: use ``FrameEncoder`` on the data path)."""
    return _pack_header(len(payload), _crc32(payload)) + payload


class FrameEncoder:
    """Accumulates frames in one buffer so a connection can write a whole batch in one syscall.

    ``take()`` hands the buffer over and starts a new one, so the caller may pass it to a
    transport that keeps a reference to it (no later mutation can corrupt a pending write).
    """

    __slots__ = ("_buf", "_count", "max_frame")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = _check_max(max_frame)
        self._buf = bytearray()
        self._count = 0

    def add_payload(self, payload: bytes) -> None:
        """Append one frame. Raises ``CodecError`` if the payload exceeds ``max_frame`` or is empty."""
        n = len(payload)
        if not 0 < n <= self.max_frame:
            raise CodecError(f"frame payload of {n} bytes is outside (0, {self.max_frame}]")
        buf = self._buf
        buf += _pack_header(n, _crc32(payload))
        buf += payload
        self._count += 1

    def add(self, msg: Message) -> None:
        """Encode ``msg`` with the codec and append it as one frame."""
        self.add_payload(encode(msg))

    def take(self) -> bytearray:
        """The frames added since the last ``take`` (possibly empty); the encoder starts afresh."""
        buf = self._buf
        self._buf = bytearray()
        self._count = 0
        return buf

    @property
    def pending_frames(self) -> int:
        return self._count

    def __len__(self) -> int:
        """Bytes buffered and not yet taken."""
        return len(self._buf)


def encode_frames(msgs: list[Message] | tuple[Message, ...], max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """Convenience: every message framed, concatenated in order."""
    enc = FrameEncoder(max_frame)
    for m in msgs:
        enc.add(m)
    return bytes(enc.take())


class FrameDecoder:
    """Incremental decoder: feed it whatever the socket produced, get back whole payloads.

    Frames may be split anywhere, and one ``feed`` may complete many frames (decoded in one pass,
    so a large read costs one call). Only the bytes of an incomplete frame are kept between calls.
    """

    __slots__ = ("_buf", "_failed", "max_frame")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = _check_max(max_frame)
        self._buf = bytearray()
        self._failed: str | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Payloads completed by ``data``, in order. Raises ``CodecError`` on a bad frame."""
        if self._failed is not None:
            raise CodecError(f"stream already failed: {self._failed}")
        buf: bytes | bytearray | memoryview
        if self._buf:
            self._buf += data
            buf = self._buf
        else:
            buf = data
        out: list[bytes] = []
        pos = 0
        n = len(buf)
        max_frame = self.max_frame
        # One view for all slices: each payload is copied exactly once, out of the read buffer.
        with memoryview(buf) as view:
            while n - pos >= HEADER_SIZE:
                length, crc = _unpack_header(view, pos)
                if length > max_frame:
                    self._fail(f"frame length {length} exceeds the limit of {max_frame} bytes")
                if length == 0:
                    self._fail("empty frame")
                end = pos + HEADER_SIZE + length
                if end > n:
                    break
                payload = view[pos + HEADER_SIZE : end].tobytes()
                if _crc32(payload) != crc:
                    self._fail("frame checksum mismatch")
                out.append(payload)
                pos = end
        if buf is self._buf:
            if pos:
                del self._buf[:pos]
        elif pos < n:
            self._buf = bytearray(buf[pos:])
        return out

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held back; non-zero at EOF means the stream was truncated."""
        return len(self._buf)

    def check_eof(self) -> None:
        """Call at end of stream: raises ``CodecError`` if it ended inside a frame."""
        if self._buf and self._failed is None:
            self._fail(f"stream ended inside a frame ({len(self._buf)} bytes buffered)")

    def _fail(self, why: str) -> None:
        self._failed = why
        self._buf = bytearray()
        raise CodecError(why)


# -- handshake ----------------------------------------------------------------------------------

HANDSHAKE_MAGIC = "zabray"
HANDSHAKE_VERSION = 1
KIND_CHANNEL = 0
KIND_ELECTION = 1
_MAX_ENSEMBLE = 256
_I63 = 1 << 63


@dataclass(frozen=True, slots=True)
class Handshake:
    """The first frame on every connection, sent by the connecting side.

    Wire form (msgpack array): ``["zabray", 1, ensemble, sid, KIND_CHANNEL, learner, leader,
    incarnation, iteration]`` for a channel, ``["zabray", 1, ensemble, sid, KIND_ELECTION]`` for
    election traffic. ``channel`` is set exactly when ``kind == KIND_CHANNEL``.
    """

    ensemble: str
    sid: int
    kind: int
    channel: ChannelId | None = None

    def encode(self) -> bytes:
        head: list[Any] = [HANDSHAKE_MAGIC, HANDSHAKE_VERSION, self.ensemble, self.sid, self.kind]
        if self.kind == KIND_CHANNEL:
            c = self.channel
            if c is None:
                raise ValueError("a channel handshake needs a ChannelId")
            head += [c.learner, c.leader, c.incarnation, c.iteration]
        return msgpack.packb(head, use_bin_type=True)


def _nat(v: Any, what: str) -> int:
    if type(v) is not int or not 0 <= v < _I63:
        raise CodecError(f"handshake {what} must be a non-negative 63-bit integer")
    return v


def decode_handshake(payload: bytes) -> Handshake:
    """Parse and validate a handshake payload; raises ``CodecError`` on anything else."""
    try:
        obj = msgpack.unpackb(payload, raw=False, strict_map_key=True, use_list=True)
    except Exception as e:  # msgpack raises several unrelated types on garbage
        raise CodecError(f"undecodable handshake: {e}") from None
    if type(obj) is not list or len(obj) < 5 or obj[0] != HANDSHAKE_MAGIC:
        raise CodecError("not a zabray handshake")
    if obj[1] != HANDSHAKE_VERSION:
        raise CodecError(f"unsupported handshake version {obj[1]!r:.20}")
    ensemble = obj[2]
    if type(ensemble) is not str or len(ensemble) > _MAX_ENSEMBLE:
        raise CodecError("handshake ensemble must be a short string")
    sid = _nat(obj[3], "sid")
    kind = obj[4]
    if kind == KIND_ELECTION and type(kind) is int and len(obj) == 5:
        return Handshake(ensemble, sid, KIND_ELECTION)
    if kind == KIND_CHANNEL and type(kind) is int and len(obj) == 9:
        ch = ChannelId(
            _nat(obj[5], "learner"),
            _nat(obj[6], "leader"),
            _nat(obj[7], "incarnation"),
            _nat(obj[8], "iteration"),
        )
        return Handshake(ensemble, sid, KIND_CHANNEL, ch)
    raise CodecError(f"bad handshake kind {kind!r:.20} with {len(obj)} fields")
