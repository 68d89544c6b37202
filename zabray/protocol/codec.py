"""The one wire codec: versioned msgpack arrays ``[VERSION, TAG, field...]``.

Decoding validates the version, the tag, the number of fields and every field's type, and
raises ``CodecError`` on anything else, so a garbled or hostile frame can never become a
message. Integers are range-checked (non-negative, 64-bit) because zxids, epochs and sids are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import msgpack

from zabray.errors import CodecError
from zabray.protocol.membership import Membership
from zabray.protocol.messages import ALL_MESSAGES, Ack, Commit, Message, Ping, Proposal, Proposals, Txn
from zabray.protocol.zxid import Zxid

VERSION = 1
_INT_MIN = -(1 << 63)
_U64 = 1 << 64


def _int(v: Any) -> int:
    if type(v) is not int or not _INT_MIN <= v < _U64:
        raise CodecError(f"expected an integer, got {type(v).__name__}")
    return v


def _zxid(v: Any) -> Zxid:
    if type(v) is not int or not 0 <= v < _U64:
        raise CodecError(f"expected a zxid, got {v!r:.40}")
    return Zxid(v)


def _bytes(v: Any) -> bytes:
    if type(v) is not bytes:
        raise CodecError(f"expected bytes, got {type(v).__name__}")
    return v


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        raise CodecError(f"expected a bool, got {type(v).__name__}")
    return v


def _str(v: Any) -> str:
    if type(v) is not str:
        raise CodecError(f"expected a string, got {type(v).__name__}")
    return v


def _txn(v: Any) -> Txn:
    if type(v) is not list or len(v) not in (4, 5):
        raise CodecError("expected a txn [zxid, value, origin, request_id(, configuration)]")
    z = _zxid(v[0])
    if len(v) == 4:
        return Txn(z, _bytes(v[1]), _int(v[2]), _int(v[3]))
    # A reconfiguration txn: its configuration's member lines (its version is the zxid).
    return Txn(z, _bytes(v[1]), _int(v[2]), _int(v[3]), Membership.parse(_str(v[4]), z))


def _txns(v: Any) -> tuple[Txn, ...]:
    if type(v) is not list:
        raise CodecError("expected a list of txns")
    return tuple(_txn(t) for t in v)


def _ints(v: Any) -> tuple[int, ...]:
    if type(v) is not list:
        raise CodecError("expected a list of integers")
    return tuple(_int(x) for x in v)


def _requests(v: Any) -> tuple[tuple[int, bytes], ...]:
    if type(v) is not list:
        raise CodecError("expected a list of [request_id, value] pairs")
    out = []
    for p in v:
        if type(p) is not list or len(p) != 2:
            raise CodecError("expected a [request_id, value] pair")
        out.append((_int(p[0]), _bytes(p[1])))
    return tuple(out)


def _enc_txn(t: Txn) -> list[Any]:
    if t.config is not None:
        return [t.zxid, t.value, t.origin, t.request_id, t.config.body()]
    return [t.zxid, t.value, t.origin, t.request_id]


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "int": _int,
    "bytes": _bytes,
    "bool": _bool,
    "str": _str,
    "Txn": _txn,
    "tuple[Txn, ...]": _txns,
    "tuple[int, ...]": _ints,
    "tuple[tuple[int, bytes], ...]": _requests,
}
_ENCODERS: dict[str, Callable[[Any], Any]] = {
    "Txn": _enc_txn,
    "tuple[Txn, ...]": lambda ts: [_enc_txn(t) for t in ts],
    "tuple[int, ...]": list,
    "tuple[tuple[int, bytes], ...]": lambda rs: [list(r) for r in rs],
}
_ZXID_FIELDS = {"zxid", "last_zxid"}


@dataclasses.dataclass(frozen=True, slots=True)
class _Spec:
    cls: type[Message]
    names: tuple[str, ...]
    decoders: tuple[Callable[[Any], Any], ...]
    encoders: tuple[Callable[[Any], Any] | None, ...]


def _build_specs() -> dict[int, _Spec]:
    specs: dict[int, _Spec] = {}
    for cls in ALL_MESSAGES:
        if cls.TAG in specs:
            raise AssertionError(f"duplicate tag {cls.TAG}")
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        names = tuple(f.name for f in fields)
        types = tuple(str(f.type) for f in fields)
        decs = tuple(
            _zxid if n in _ZXID_FIELDS else _DECODERS[t] for n, t in zip(names, types, strict=True)
        )
        encs = tuple(_ENCODERS.get(t) for t in types)
        specs[cls.TAG] = _Spec(cls, names, decs, encs)
    return specs


_SPECS = _build_specs()
_BY_CLASS = {s.cls: s for s in _SPECS.values()}


# Fast paths for the broadcast hot path (PROPOSALs, alone or in PROPOSALS frames; ACK/COMMIT per
# batch): the same wire format and the same checks as the generic code, without the per-field
# dispatch. None sends a frame to the generic code, which raises the precise error.
_PROPOSAL, _ACK, _COMMIT, _PING, _PROPOSALS = 30, 31, 32, 34, 37


def _fast_txn(t: Any) -> Txn | None:
    if type(t) is list and len(t) == 4:
        z, v, o, r = t
        if (type(z) is int and 0 <= z < _U64 and type(v) is bytes and type(o) is int
                and _INT_MIN <= o < _U64 and type(r) is int and _INT_MIN <= r < _U64):
            return Txn(Zxid(z), v, o, r)
    return None


def _fast_decode(tag: int, obj: list[Any]) -> Message | None:
    if tag == _PROPOSAL and len(obj) == 3:
        txn = _fast_txn(obj[2])
        return None if txn is None else Proposal(txn)
    if tag == _PROPOSALS and len(obj) == 3 and type(obj[2]) is list:
        txns = []
        for t in obj[2]:
            txn = _fast_txn(t)
            if txn is None:
                return None
            txns.append(txn)
        return Proposals(tuple(txns))
    if (tag == _ACK or tag == _COMMIT or tag == _PING) and len(obj) == 3:
        z = obj[2]
        if type(z) is int and 0 <= z < _U64:
            return (Ack if tag == _ACK else Commit if tag == _COMMIT else Ping)(Zxid(z))
    return None


def to_wire(msg: Message) -> list[Any]:
    t = type(msg)
    if t is Proposal:
        x = msg.txn  # type: ignore[attr-defined]
        if x.config is None:
            return [VERSION, _PROPOSAL, [x.zxid, x.value, x.origin, x.request_id]]
        return [VERSION, _PROPOSAL, _enc_txn(x)]
    if t is Ack or t is Commit or t is Ping:
        return [VERSION, t.TAG, msg.zxid]  # type: ignore[attr-defined]
    spec = _BY_CLASS[t]
    out: list[Any] = [VERSION, spec.cls.TAG]
    for name, enc in zip(spec.names, spec.encoders, strict=True):
        v = getattr(msg, name)
        out.append(enc(v) if enc is not None else v)
    return out


def from_wire(obj: Any) -> Message:
    if type(obj) is not list or len(obj) < 2:
        raise CodecError("a message is an array [version, tag, fields...]")
    if obj[0] != VERSION:
        raise CodecError(f"unsupported codec version {obj[0]!r:.20} (this build speaks {VERSION})")
    if obj[0] == VERSION and type(obj[1]) is int and 30 <= obj[1] <= 37:
        fast = _fast_decode(obj[1], obj)
        if fast is not None:
            return fast
    spec = _SPECS.get(obj[1]) if type(obj[1]) is int else None
    if spec is None:
        raise CodecError(f"unknown message tag {obj[1]!r:.20}")
    if len(obj) != 2 + len(spec.names):
        raise CodecError(f"{spec.cls.NAME} needs {len(spec.names)} fields, got {len(obj) - 2}")
    return spec.cls(*(dec(v) for dec, v in zip(spec.decoders, obj[2:], strict=True)))


def encode(msg: Message) -> bytes:
    return msgpack.packb(to_wire(msg), use_bin_type=True)


_unpackb = msgpack.unpackb


def decode(data: bytes) -> Message:
    try:
        obj = _unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except CodecError:
        raise
    except Exception as e:  # msgpack raises several unrelated types on garbage
        raise CodecError(f"undecodable frame: {e}") from None
    return from_wire(obj)
