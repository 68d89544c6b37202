"""Framing: round trips, arbitrary splits, and every kind of bad input raising only CodecError."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zabray.errors import CodecError
from zabray.protocol.codec import decode, encode
from zabray.protocol.events import ChannelId
from zabray.protocol.messages import Ack, Commit, Diff, Proposal, Txn
from zabray.protocol.zxid import Zxid
from zabray.wire.framing import (
    HEADER_SIZE,
    KIND_CHANNEL,
    KIND_ELECTION,
    FrameDecoder,
    FrameEncoder,
    Handshake,
    decode_handshake,
    encode_frames,
    frame,
)


def _msgs(n: int) -> list:
    out = []
    for i in range(n):
        z = Zxid.of(3, i + 1)
        if i % 3 == 0:
            out.append(Proposal(Txn(z, bytes([i % 256]) * (i % 1500), origin=i % 5, request_id=i)))
        elif i % 3 == 1:
            out.append(Ack(z))
        else:
            out.append(Commit(z))
    return out


def test_round_trip_many_messages_in_one_batch() -> None:
    msgs = _msgs(2000)
    enc = FrameEncoder()
    for m in msgs:
        enc.add(m)
    assert enc.pending_frames == 2000
    data = enc.take()
    assert len(enc) == 0 and enc.pending_frames == 0
    dec = FrameDecoder()
    assert [decode(p) for p in dec.feed(data)] == msgs
    assert dec.buffered == 0
    dec.check_eof()


def test_take_hands_over_the_buffer() -> None:
    enc = FrameEncoder()
    enc.add(Ack(Zxid(1)))
    first = enc.take()
    enc.add(Ack(Zxid(2)))
    assert bytes(first) == encode_frames([Ack(Zxid(1))])
    assert len(first) == HEADER_SIZE + len(encode(Ack(Zxid(1))))
    assert [decode(p) for p in FrameDecoder().feed(first + enc.take())] == [Ack(Zxid(1)), Ack(Zxid(2))]


def test_split_at_every_byte_boundary() -> None:
    msgs = _msgs(12)
    data = encode_frames(msgs)
    for cut in range(len(data) + 1):
        dec = FrameDecoder()
        got = dec.feed(data[:cut]) + dec.feed(data[cut:])
        assert [decode(p) for p in got] == msgs, cut
        assert dec.buffered == 0


def test_byte_at_a_time() -> None:
    msgs = _msgs(30)
    data = encode_frames(msgs)
    dec = FrameDecoder()
    got: list[bytes] = []
    for i in range(len(data)):
        got += dec.feed(data[i : i + 1])
    assert [decode(p) for p in got] == msgs


@given(st.lists(st.integers(min_value=0, max_value=400), max_size=30), st.data())
@settings(max_examples=150, deadline=None)
def test_random_chunking(cuts: list[int], data: st.DataObject) -> None:
    msgs = data.draw(st.lists(st.binary(min_size=1, max_size=300), max_size=20))
    stream = b"".join(frame(m) for m in msgs)
    dec = FrameDecoder()
    got: list[bytes] = []
    pos = 0
    for c in sorted(set(cuts)):
        got += dec.feed(memoryview(stream)[pos:c] if c > pos else b"")
        pos = max(pos, c)
    got += dec.feed(bytearray(stream[pos:]))
    assert got == msgs


def test_corrupt_checksum_raises_and_stays_failed() -> None:
    data = bytearray(encode_frames([Ack(Zxid(5)), Ack(Zxid(6))]))
    data[5] ^= 0x01  # first frame's CRC
    dec = FrameDecoder()
    with pytest.raises(CodecError, match="checksum"):
        dec.feed(data)
    with pytest.raises(CodecError, match="already failed"):
        dec.feed(encode_frames([Ack(Zxid(7))]))


def test_corrupt_payload_raises() -> None:
    data = bytearray(encode_frames([Proposal(Txn(Zxid(9), b"x" * 100))]))
    data[-1] ^= 0xFF
    with pytest.raises(CodecError):
        FrameDecoder().feed(data)


def test_huge_length_raises_before_buffering() -> None:
    dec = FrameDecoder(max_frame=1024)
    with pytest.raises(CodecError, match="exceeds"):
        dec.feed(struct.pack(">II", 1025, 0))
    with pytest.raises(CodecError, match="exceeds"):
        FrameDecoder().feed(struct.pack(">II", 0xFFFFFFFF, 0) + b"abc")


def test_default_limit_is_64_mib() -> None:
    dec = FrameDecoder()
    assert dec.max_frame == 64 << 20
    assert dec.feed(struct.pack(">II", 64 << 20, 0)) == []  # allowed: waits for the payload
    with pytest.raises(CodecError):
        FrameDecoder().feed(struct.pack(">II", (64 << 20) + 1, 0))


def test_empty_frame_is_garbage() -> None:
    with pytest.raises(CodecError, match="empty"):
        FrameDecoder().feed(struct.pack(">II", 0, zlib.crc32(b"")))


def test_garbage_raises() -> None:
    with pytest.raises(CodecError):
        FrameDecoder().feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")


def test_truncated_stream_detected_at_eof() -> None:
    data = encode_frames([Ack(Zxid(1)), Ack(Zxid(2))])
    dec = FrameDecoder()
    assert len(dec.feed(data[:-3])) == 1
    assert dec.buffered > 0
    with pytest.raises(CodecError, match="ended inside"):
        dec.check_eof()


def test_encoder_refuses_oversized_and_empty_frames() -> None:
    enc = FrameEncoder(max_frame=100)
    with pytest.raises(CodecError):
        enc.add_payload(b"x" * 101)
    with pytest.raises(CodecError):
        enc.add_payload(b"")
    with pytest.raises(CodecError):
        enc.add(Diff((Txn(Zxid(1), b"y" * 200),)))
    assert len(enc) == 0
    enc.add_payload(b"x" * 100)
    assert FrameDecoder(max_frame=100).feed(enc.take()) == [b"x" * 100]


def test_bad_max_frame_is_rejected() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame=0)
    with pytest.raises(ValueError):
        FrameEncoder(max_frame=1 << 32)


@given(st.binary(max_size=2000))
@settings(max_examples=400, deadline=None)
def test_fuzz_random_bytes_only_raise_codec_error(blob: bytes) -> None:
    dec = FrameDecoder(max_frame=1 << 16)
    try:
        for p in dec.feed(blob):
            decode(p)
            decode_handshake(p)
        dec.check_eof()
    except CodecError:
        pass


@given(st.lists(st.binary(min_size=1, max_size=200), max_size=10))
@settings(max_examples=300, deadline=None)
def test_fuzz_valid_frames_random_payloads_only_raise_codec_error(payloads: list[bytes]) -> None:
    """Frames with correct CRCs around garbage: framing passes them, the codecs must reject them."""
    for p in FrameDecoder().feed(b"".join(frame(x) for x in payloads)):
        for parse in (decode, decode_handshake):
            try:
                parse(p)
            except CodecError:
                pass


@given(st.binary(min_size=1, max_size=64), st.integers(min_value=0, max_value=10_000))
@settings(max_examples=300, deadline=None)
def test_fuzz_bit_flips_in_valid_stream(noise: bytes, where: int) -> None:
    data = bytearray(encode_frames(_msgs(10)))
    at = where % len(data)
    data[at : at + len(noise)] = bytes(a ^ b for a, b in zip(data[at : at + len(noise)], noise, strict=False))
    dec = FrameDecoder()
    try:
        for p in dec.feed(data):
            decode(p)
        dec.check_eof()
    except CodecError:
        pass


def test_handshake_round_trip() -> None:
    ch = ChannelId(2, 1, 7, 42)
    hs = Handshake("ens", 2, KIND_CHANNEL, ch)
    assert decode_handshake(hs.encode()) == hs
    he = Handshake("ens", 3, KIND_ELECTION)
    assert decode_handshake(he.encode()) == he


@pytest.mark.parametrize(
    "payload",
    [
        b"\x93\x01\x02\x03",  # not the magic
        b"\xc1",
        Handshake("e", 1, KIND_ELECTION).encode()[:-1],
        b"\x95\xa6zabray\x02\xa1e\x01\x01",  # version 2
        b"\x95\xa6zabray\x01\xa1e\xff\x01",  # negative sid
        b"\x95\xa6zabray\x01\xa1e\x01\x00",  # channel kind without a channel
        b"\x99\xa6zabray\x01\xa1e\x01\x01\x01\x01\x01\x01",  # election kind with channel fields
    ],
)
def test_bad_handshakes(payload: bytes) -> None:
    with pytest.raises(CodecError):
        decode_handshake(payload)
