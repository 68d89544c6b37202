"""The client port's codec (``zabray.wire.clientproto``): every message survives a round trip,
and a reply of the wrong shape is a ``CodecError`` (the connection is dropped), never a
half-read message a client would act on."""

from __future__ import annotations

import msgpack
import pytest

from zabray.errors import CodecError
from zabray.wire import clientproto as cp

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("msg", [cp.SubmitReq(1, b"v"), cp.StatusReq(2), cp.ZkReq(3, "get", ["/a", False])])
def test_requests_round_trip(msg: object) -> None:
    assert cp.decode_request(cp.encode(msg)) == msg


@pytest.mark.parametrize("msg", [
    cp.CommittedRep(1, 1 << 32 | 5), cp.FailedRep(2, "no quorum", True), cp.StatusRep(3, 2, "LEADING", True, 7),
    cp.StatusRep(4, 1, "STARTING", False, 0), cp.ZkRep(5, 9, None, b"x"), cp.ZkEvent("watch", [1, 3, "/a"]),
])
def test_replies_round_trip(msg: object) -> None:
    assert cp.decode_reply(cp.encode(msg)) == msg


@pytest.mark.parametrize("obj", [
    ["STATUS", 1, {"sid": 1, "state": "LEADING"}],  # the shape before the reply was typed
    ["STATUS", 1, 2, "LEADING", 1, 7],  # established as an int, not a bool
    ["STATUS", 1, "2", "LEADING", True, 7],
    ["STATUS", 1, 2, "LEADING", True],
    ["STATUS", -1, 2, "LEADING", True, 7],
])
def test_a_status_reply_of_the_wrong_shape_is_refused(obj: list[object]) -> None:
    with pytest.raises(CodecError):
        cp.decode_reply(msgpack.packb(obj, use_bin_type=True))
