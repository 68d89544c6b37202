"""Zxid packing and the wire codec: every packet round-trips; garbage only ever raises CodecError."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zabray.errors import CodecError
from zabray.protocol import codec
from zabray.protocol import messages as m
from zabray.protocol.membership import Membership
from zabray.protocol.zxid import Zxid

u32 = st.integers(0, 2**32 - 1)
u63 = st.integers(0, 2**63 - 1)


def test_zxid_orders_by_epoch_then_counter() -> None:
    assert Zxid.of(1, 2**32 - 1) < Zxid.of(2, 0) < Zxid.of(2, 1)
    z = Zxid.of(7, 42)
    assert (z.epoch, z.counter) == (7, 42)
    assert repr(z) == "7:42"
    assert z.next() == Zxid.of(7, 43)


@pytest.mark.parametrize("epoch,counter", [(-1, 0), (0, -1), (2**32, 0), (0, 2**32)])
def test_zxid_rejects_out_of_range_parts(epoch: int, counter: int) -> None:
    with pytest.raises(ValueError):
        Zxid.of(epoch, counter)


plain_txns = st.builds(m.Txn, st.builds(Zxid, u63), st.binary(max_size=64), st.integers(-1, 100), u32)


@st.composite
def config_txns(draw: st.DrawFn) -> m.Txn:
    """A reconfiguration txn: its configuration travels with it (its version is the zxid)."""
    z = Zxid(draw(u63))
    sids = draw(st.lists(st.integers(1, 50), min_size=1, max_size=6, unique=True))
    observers = draw(st.sets(st.sampled_from(sids)))
    addresses = {s: f"h{s}:{2000 + s}:{3000 + s};h{s}:{4000 + s}" for s in sids if draw(st.booleans())}
    config = Membership.of([s for s in sids if s not in observers], observers, z, addresses)
    return m.Txn(z, draw(st.binary(max_size=16)), draw(st.integers(-1, 100)), draw(u32), config)


txns = st.one_of(plain_txns, config_txns())

MESSAGES = st.one_of(
    st.builds(m.Notification, u32, st.integers(0, 3), u32, u63, u32, u32),
    st.builds(m.Notification, u32, st.integers(0, 3), u32, u63, u32, u32, u63, st.text(max_size=40)),
    st.builds(m.FollowerInfo, u32, u32, u63),
    st.builds(m.ObserverInfo, u32, u32, u63),
    st.builds(m.LeaderInfo, u32),
    st.builds(m.AckEpoch, u32, u63, st.booleans()),
    st.builds(m.Diff, st.lists(txns, max_size=5).map(tuple)),
    st.builds(m.Trunc, u63),
    st.builds(m.Snap, u63, st.binary(max_size=64)),
    st.builds(m.Snap, u63, st.binary(max_size=64), st.booleans(), st.text(max_size=40)),
    st.builds(m.NewLeader, u32, u63),
    st.builds(m.AckNewLeader, u32, u63),
    st.builds(m.UpToDate, u63),
    st.builds(m.Proposal, txns),
    st.builds(m.Proposals, st.lists(txns, min_size=1, max_size=5).map(tuple)),
    st.builds(m.Ack, u63),
    st.builds(m.Commit, u63),
    st.builds(m.Inform, st.lists(txns, max_size=5).map(tuple)),
    st.builds(m.Ping, u63),
    st.builds(m.Request, st.integers(-1, 100), u32, st.binary(max_size=64)),
    st.builds(m.Requests, st.integers(-1, 100),
              st.lists(st.tuples(u32, st.binary(max_size=64)), max_size=5).map(tuple)),
    st.builds(m.Touch, st.lists(u63, max_size=5).map(tuple)),
    st.builds(m.ReconfigRequest, st.integers(-1, 100), u32, st.binary(max_size=64)),
    st.builds(m.CommitAndActivate, u63, u32),
    st.builds(m.InformAndActivate, st.lists(txns, max_size=5).map(tuple), u32),
    st.builds(m.Refused, u32, st.text(max_size=40)),
)


@given(MESSAGES)
@settings(max_examples=500)
def test_every_packet_round_trips(msg: m.Message) -> None:
    assert codec.decode(codec.encode(msg)) == msg


def test_every_packet_type_is_covered_by_the_round_trip_strategy() -> None:
    tags = {cls.TAG for cls in m.ALL_MESSAGES}
    assert len(tags) == len(m.ALL_MESSAGES) == 24


def test_a_requests_frame_with_a_malformed_pair_raises_codec_error() -> None:
    good = codec.to_wire(m.Requests(2, ((1, b"a"), (2, b"b"))))
    for bad in ([[1, b"a"], [2]], [[1, "a"]], [[-(2**64), b"a"]], [(1, b"a", 3)], "x"):
        with pytest.raises(CodecError):
            codec.from_wire([*good[:3], bad])


@given(st.binary(max_size=200))
@settings(max_examples=1000)
def test_garbage_raises_only_codec_error(data: bytes) -> None:
    try:
        codec.decode(data)
    except CodecError:
        pass


@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.binary(max_size=8) | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=6), max_leaves=20))
@settings(max_examples=500)
def test_well_formed_msgpack_of_the_wrong_shape_raises_codec_error(obj: object) -> None:
    for candidate in (obj, [1, 30, obj], [1, 10, obj, obj, obj], [1, 20, [obj]]):
        try:
            codec.decode(msgpack.packb(candidate, use_bin_type=True))
        except CodecError:
            pass


@pytest.mark.parametrize(
    "obj,needle",
    [
        ([2, 31, 5], "version"),
        ([1, 999, 5], "tag"),
        ([1, 31], "needs 1 fields"),
        ([1, 31, -5], "zxid"),
        ([1, 31, "x"], "zxid"),
        ([1, 30, [1, b"v", 1]], "txn"),
        ([1, 13, 1, 2, 1], "bool"),
        ({"a": 1}, "array"),
    ],
)
def test_decode_says_what_is_wrong(obj: object, needle: str) -> None:
    with pytest.raises(CodecError, match=needle):
        codec.decode(msgpack.packb(obj, use_bin_type=True))
