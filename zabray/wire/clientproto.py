"""The client port's wire protocol: CRC-checked frames (``zabray.wire.framing``) of msgpack arrays.

The first frame on a connection is the handshake ``["zabray-client", 2, ensemble]``; a
connection naming another ensemble, or sending anything malformed, is dropped.

Requests:  ``["SUBMIT", rid, value]``, ``["STATUS", rid]``.
Replies:   ``["COMMITTED", rid, zxid]``, ``["FAILED", rid, reason, uncertain]``,
           ``["STATUS", rid, sid, state, established, epoch]`` (what a client needs to find the
           leader: the replica's id, its state's name, whether it leads an established
           epoch, its current epoch).

ZooKeeper service (only on a ``service: zookeeper`` ensemble, see ``zabray.zk``):
request ``["ZK", rid, op, args]``; replies ``["ZREPLY", rid, zxid, error, value]`` (error is
None or ``[code, message, path, index]``) and unsolicited events ``["ZEVENT", kind, args]``
(watch notifications, session expiry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from zabray.errors import CodecError
from zabray.fastinit import fast_inits

MAGIC = "zabray-client"
VERSION = 2
"""2: the STATUS reply is a fixed record (sid, state, established, epoch), no longer a map."""


@dataclass(frozen=True, slots=True)
class SubmitReq:
    rid: int
    value: bytes


@dataclass(frozen=True, slots=True)
class StatusReq:
    rid: int


@dataclass(frozen=True, slots=True)
class ZkReq:
    rid: int
    op: str
    args: list[Any]


@dataclass(frozen=True, slots=True)
class ZkRep:
    rid: int
    zxid: int
    error: list[Any] | None
    value: Any


def error_reply(rid: int, zxid: int, code: str, message: str) -> ZkRep:
    """A ZooKeeper request's refusal, before any service saw it (error code and message)."""
    return ZkRep(rid, zxid, [code, message, None, None], None)


@dataclass(frozen=True, slots=True)
class ZkEvent:
    kind: str
    args: list[Any]


@dataclass(frozen=True, slots=True)
class CommittedRep:
    rid: int
    zxid: int


@dataclass(frozen=True, slots=True)
class FailedRep:
    rid: int
    reason: str
    uncertain: bool


@dataclass(frozen=True, slots=True)
class StatusRep:
    rid: int
    sid: int
    state: str
    """LOOKING, FOLLOWING, LEADING, OBSERVING, or STARTING."""
    established: bool
    """A leader that a quorum acknowledged: it takes writes."""
    epoch: int


def handshake(ensemble: str) -> bytes:
    return msgpack.packb([MAGIC, VERSION, ensemble], use_bin_type=True)


def check_handshake(payload: bytes, ensemble: str) -> None:
    obj = _unpack(payload)
    if not (isinstance(obj, list) and len(obj) == 3 and obj[0] == MAGIC):
        raise CodecError("not a zabray client handshake")
    if obj[1] != VERSION:
        raise CodecError(f"client protocol version {obj[1]!r:.20} unsupported (this replica speaks {VERSION})")
    if obj[2] != ensemble:
        raise CodecError(f"handshake for ensemble {obj[2]!r:.40}, this is {ensemble!r}")


def _unpack(payload: bytes) -> Any:
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as e:
        raise CodecError(f"undecodable client frame: {e}") from None


def _rid(v: Any) -> int:
    if type(v) is not int or not 0 <= v < 1 << 63:
        raise CodecError("request id must be a non-negative integer")
    return v


def encode(msg: Any) -> bytes:
    t = type(msg)
    if t is SubmitReq:
        obj: list[Any] = ["SUBMIT", msg.rid, msg.value]
    elif t is StatusReq:
        obj = ["STATUS", msg.rid]
    elif t is CommittedRep:
        obj = ["COMMITTED", msg.rid, msg.zxid]
    elif t is FailedRep:
        obj = ["FAILED", msg.rid, msg.reason, msg.uncertain]
    elif t is ZkReq:
        obj = ["ZK", msg.rid, msg.op, msg.args]
    elif t is ZkRep:
        obj = ["ZREPLY", msg.rid, msg.zxid, msg.error, msg.value]
    elif t is ZkEvent:
        obj = ["ZEVENT", msg.kind, msg.args]
    else:
        obj = ["STATUS", msg.rid, msg.sid, msg.state, msg.established, msg.epoch]
    return msgpack.packb(obj, use_bin_type=True)


def decode_request(payload: bytes) -> SubmitReq | StatusReq | ZkReq:
    obj = _unpack(payload)
    if type(obj) is list and obj:
        if obj[0] == "ZK" and len(obj) == 4 and type(obj[2]) is str and type(obj[3]) is list:
            return ZkReq(_rid(obj[1]), obj[2], obj[3])
        if obj[0] == "SUBMIT" and len(obj) == 3 and type(obj[2]) is bytes:
            return SubmitReq(_rid(obj[1]), obj[2])
        if obj[0] == "STATUS" and len(obj) == 2:
            return StatusReq(_rid(obj[1]))
    raise CodecError("malformed client request")


def decode_reply(payload: bytes) -> CommittedRep | FailedRep | StatusRep | ZkRep | ZkEvent:
    obj = _unpack(payload)
    if type(obj) is list and obj:
        if obj[0] == "ZREPLY" and len(obj) == 5 and type(obj[2]) is int:
            return ZkRep(_rid(obj[1]), obj[2], obj[3], obj[4])
        if obj[0] == "ZEVENT" and len(obj) == 3 and type(obj[1]) is str and type(obj[2]) is list:
            return ZkEvent(obj[1], obj[2])
        if obj[0] == "COMMITTED" and len(obj) == 3 and type(obj[2]) is int:
            return CommittedRep(_rid(obj[1]), obj[2])
        if obj[0] == "FAILED" and len(obj) == 4 and type(obj[2]) is str and type(obj[3]) is bool:
            return FailedRep(_rid(obj[1]), obj[2], obj[3])
        if (obj[0] == "STATUS" and len(obj) == 6 and type(obj[2]) is int and type(obj[3]) is str
                and type(obj[4]) is bool and type(obj[5]) is int):
            return StatusRep(_rid(obj[1]), obj[2], obj[3], obj[4], obj[5])
    raise CodecError("malformed client reply")


fast_inits(globals())  # built on every message or write: see zabray.fastinit
