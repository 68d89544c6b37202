"""ZooKeeper's client requests as the service's requests, and the service's answers as ZooKeeper's
response records, pure.

``to_op`` turns one decoded request (``zabray.wire.zkproto.Request``) into a
``zabray.zk.messages`` request; a request the service cannot express becomes ``Malformed``
(BAD_ARGUMENTS) or ``Unimplemented`` (UNIMPLEMENTED), never a silent success. ``to_response``
turns a reply's value back into the opcode's response record. The mapping of create flags
follows ZooKeeper 3.8's PrepRequestProcessor: the opcode decides a container (createContainer
makes one whatever its flags), TTL modes only through createTTL with a ttl in range.
"""

from __future__ import annotations

import struct
from typing import Any

from zabray.errors import CodecError
from zabray.tree import Check as TCheck
from zabray.tree import Create as TCreate
from zabray.tree import Delete as TDelete
from zabray.tree import SetData as TSetData
from zabray.tree import ZooKeeperError, zk_code
from zabray.tree.znode import ACL as TreeACL
from zabray.tree.znode import TTL_MAX, signed64
from zabray.tree.znode import Stat as TreeStat
from zabray.wire import zkproto as zp
from zabray.zk import messages as zm

OC = zp.OpCode
CREATES = frozenset({zp.OpCode.CREATE, zp.OpCode.CREATE2, zp.OpCode.CREATE_CONTAINER, zp.OpCode.CREATE_TTL})
_UNIMPLEMENTED: dict[int, str] = {zp.OpCode.DELETE_CONTAINER: "deleteContainer from a client"}


def acl_in(acl: tuple[zp.ACL, ...] | None) -> tuple[TreeACL, ...]:
    """A null scheme or id is the empty string: kazoo writes ``Id("auth", "")`` (the usual way
    to name the "auth" scheme) with a null id, as Java's jute reads it."""
    return tuple((a.perms, a.id.scheme or "", a.id.id or "") for a in acl or ())


def acl_out(acl: tuple[TreeACL, ...]) -> tuple[zp.ACL, ...]:
    return tuple(zp.ACL(perms, zp.Id(scheme, ident)) for perms, scheme, ident in acl)


# A whole reply frame that carries a Stat (setData, setACL, exists): length, ReplyHeader, Stat.
# The u64 fields pack as "Q": the same bytes as the Java long ``signed64`` gives.
_STAT_REPLY = struct.Struct(">iiqiQQqqiiiQiiQ")
_STAT_REPLY_LEN = _STAT_REPLY.size - 4


def stat_reply(xid: int, zxid: int, st: TreeStat) -> bytes | None:
    """The frame ``encode_reply(xid, zxid, OK, StatResponse(stat_out(st)))`` builds, packed at
    once (the reply to every setData); None when a field is out of range, for the general path
    to report."""
    try:
        return _STAT_REPLY.pack(_STAT_REPLY_LEN, xid, zxid, 0, st.czxid, st.mzxid, st.ctime, st.mtime, st.version,
                                st.cversion, st.aversion, st.ephemeral_owner, st.data_length, st.num_children,
                                st.pzxid)
    except struct.error:
        return None


def stat_out(st: TreeStat) -> zp.Stat:
    return zp.Stat(signed64(st.czxid), signed64(st.mzxid), st.ctime, st.mtime, st.version, st.cversion,
                   st.aversion, signed64(st.ephemeral_owner), st.data_length, st.num_children, signed64(st.pzxid))


def _create(op: int, rec: Any) -> TCreate:
    """A create of any of the four opcodes, its flags checked as ZooKeeper checks them."""
    try:
        mode = zp.CreateMode(rec.flags)
    except ValueError:
        raise ValueError(f"create flags {rec.flags} name no create mode") from None
    # EphemeralType.validateTTL first: a TTL mode needs a ttl in 1..TTL_MAX (createTTL's, or -1
    # for the other opcodes, so BAD_ARGUMENTS), createTTL with another mode is refused too.
    ttl = int(rec.ttl) if op == zp.OpCode.CREATE_TTL else -1
    if mode.ttl and not 0 < ttl <= TTL_MAX:
        raise ValueError(f"a TTL create mode needs a ttl in 1..{TTL_MAX} ms (createTTL), got {ttl}")
    if op == zp.OpCode.CREATE_TTL and not mode.ttl:
        raise ValueError(f"createTTL needs a TTL create mode, got flags {rec.flags}")
    # ZooKeeper logs the txn of the opcode, not of the flags: createContainer makes a container
    # whatever its flags say (sequential still names it), create/create2 with the container flag
    # a plain persistent znode.
    container = op == zp.OpCode.CREATE_CONTAINER
    ephemeral = mode.ephemeral and not container
    return TCreate(rec.path, rec.data, ephemeral, mode.sequential, acl_in(rec.acl), container,
                   ttl if mode.ttl else -1, op != zp.OpCode.CREATE)


def _sub_op(op: int, rec: Any) -> TCreate | TDelete | TSetData | TCheck:
    if op in CREATES:
        return _create(op, rec)
    if op == zp.OpCode.DELETE:
        return TDelete(rec.path, rec.version)
    if op == zp.OpCode.SET_DATA:
        return TSetData(rec.path, rec.data, rec.version)
    if op == zp.OpCode.CHECK:
        return TCheck(rec.path, rec.version)
    raise ValueError(f"op type {op} cannot be part of a multi")


def _paths(v: tuple[str, ...] | None) -> tuple[str, ...]:
    return tuple(v or ())


_SET_DATA_HEAD = struct.Struct(">iii")  # RequestHeader (xid, type), then the path's length
_I32 = struct.Struct(">i")


def fast_set_data(payload: bytes) -> tuple[int, zm.SetData] | None:
    """(xid, op) of a well-formed setData request frame's payload, as ``decode_request`` and
    ``to_op`` give them, read in place: the hottest request, without its three records. None
    for anything else, a null path or null data included: the general path decides those, and
    reports what is wrong with a malformed one."""
    n = len(payload)
    if n < 20:  # header, the path's and the data's lengths, the version
        return None
    xid, op, plen = _SET_DATA_HEAD.unpack_from(payload)
    dpos = 12 + plen
    if op != _SET_DATA or plen < 0 or dpos + 8 > n:
        return None
    (dlen,) = _I32.unpack_from(payload, dpos)
    if dlen < 0 or dpos + 8 + dlen != n:
        return None
    try:
        path = payload[12:dpos].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return xid, zm.SetData(path, payload[dpos + 4 : n - 4], _I32.unpack_from(payload, n - 4)[0])


_SET_DATA = int(zp.OpCode.SET_DATA)


def to_op(req: zp.Request) -> zm.ClientOp:
    """The service request ``req`` asks for. Raises ``CodecError`` for an opcode ZooKeeper does
    not have (the connection is closed: the stream cannot be trusted)."""
    op, b = req.op, req.body
    if op == OC.RECONFIG:  # ensembles are fixed at start (ZooKeeper's default, reconfigEnabled=false)
        return zm.Unimplemented("reconfig", "RECONFIG_DISABLED")
    if op in _UNIMPLEMENTED:
        return zm.Unimplemented(_UNIMPLEMENTED[op])
    if not req.known:
        raise CodecError(f"unknown opcode {req.op}")
    try:
        return _to_op(op, b)
    except ValueError as e:
        return zm.Malformed(str(e))


def _to_op(op: int, b: Any) -> zm.ClientOp:
    if op in CREATES:
        return _create(op, b)
    match op:
        case OC.PING:
            return zm.Ping()
        case OC.GET_DATA:
            return zm.GetData(b.path, b.watch)
        case OC.EXISTS:
            return zm.Exists(b.path, b.watch)
        case OC.GET_CHILDREN | OC.GET_CHILDREN2:
            return zm.GetChildren(b.path, b.watch, stat=op == OC.GET_CHILDREN2)
        case OC.SET_DATA:
            return zm.SetData(b.path, b.data, b.version)
        case OC.DELETE:
            return zm.Delete(b.path, b.version)
        case OC.CHECK:
            return zm.Check(b.path, b.version)
        case OC.GET_ACL:
            return zm.GetACL(b.path)
        case OC.SET_ACL:
            return zm.SetACL(b.path, acl_in(b.acl), b.version)
        case OC.GET_ALL_CHILDREN_NUMBER:
            return zm.GetAllChildrenNumber(b.path)
        case OC.GET_EPHEMERALS:
            return zm.GetEphemerals(b.path or "/")  # a null prefix (kazoo's "") means all, as blank does
        case OC.SYNC:
            return zm.Sync(b.path)
        case OC.MULTI:
            return zm.Multi(tuple(_sub_op(o, r) for o, r in b.ops))
        case OC.MULTI_READ:
            reads = []
            for o, r in b.ops:
                if o not in (OC.GET_DATA, OC.GET_CHILDREN):
                    raise ValueError(f"op type {o} cannot be part of a multiRead")
                reads.append(("get" if o == OC.GET_DATA else "children", r.path))
            return zm.MultiRead(tuple(reads))
        case OC.CLOSE_SESSION:
            return zm.CloseSession()
        case OC.WHO_AM_I:
            return zm.WhoAmI()
        case OC.AUTH:
            return zm.AddAuth(b.scheme, b.auth)
        case OC.SASL:
            return zm.Sasl(bytes(b.token or b""))
        case OC.SET_WATCHES:
            return zm.SetWatches(b.relativeZxid, zm.Watches(_paths(b.dataWatches), _paths(b.existWatches),
                                                            _paths(b.childWatches)))
        case OC.SET_WATCHES2:
            return zm.SetWatches(b.relativeZxid, zm.Watches(
                _paths(b.dataWatches), _paths(b.existWatches), _paths(b.childWatches),
                _paths(b.persistentWatches), _paths(b.persistentRecursiveWatches)))
        case OC.ADD_WATCH:
            if b.type not in (zp.AddWatchMode.PERSISTENT, zp.AddWatchMode.PERSISTENT_RECURSIVE):
                raise ValueError(f"addWatch mode must be 0 or 1, got {b.type}")
            return zm.AddWatch(b.path, b.type == zp.AddWatchMode.PERSISTENT_RECURSIVE)
        case OC.CHECK_WATCHES:
            return zm.CheckWatches(b.path, b.type)
        case OC.REMOVE_WATCHES:
            return zm.RemoveWatches(b.path, b.type)
    return zm.Unimplemented(f"opcode {op}")


def _multi_errors(n: int, err: zm.ErrorInfo) -> list[int]:
    """Per-op codes of a failed multi as ZooKeeper reports them: OK (rolled back) before the
    failing op, its code, RUNTIME_INCONSISTENCY after; its code for every op without an index."""
    code = zk_code(err.code)
    if err.index is None:
        return [code] * n
    return [zp.Err.OK if i < err.index else code if i == err.index else zp.Err.RUNTIME_INCONSISTENCY
            for i in range(n)]


def multi_failed(ops: tuple[int, ...], err: zm.ErrorInfo) -> zp.MultiResponse:
    return zp.MultiResponse(tuple((zp.OpCode.ERROR, c, zp.ErrorResponse(c)) for c in _multi_errors(len(ops), err)))


def _result(op: int, value: Any) -> zp.Record | None:
    if op == OC.CREATE:
        return zp.PathResponse(value if isinstance(value, str) else value[0])
    if op in CREATES:
        path, st = value
        return zp.Create2Response(path, stat_out(st))
    if op in (OC.SET_DATA, OC.SET_ACL):
        return zp.StatResponse(stat_out(value))
    return None


def to_response(op: int, value: Any, sub_ops: tuple[int, ...] = ()) -> zp.Record | None:
    """The response record for a successful request of opcode ``op`` answered ``value``.
    ``sub_ops``: a multi's (or multiRead's) op types, in order."""
    match op:
        case OC.EXISTS:
            return zp.StatResponse(stat_out(value))
        case OC.GET_DATA:
            data, st = value
            return zp.GetDataResponse(data, stat_out(st))
        case OC.GET_CHILDREN | OC.GET_EPHEMERALS:
            return zp.ChildrenResponse(tuple(value))
        case OC.GET_CHILDREN2:
            kids, st = value
            return zp.Children2Response(tuple(kids), stat_out(st))
        case OC.GET_ACL:
            acl, st = value
            return zp.GetACLResponse(acl_out(acl), stat_out(st))
        case OC.GET_ALL_CHILDREN_NUMBER:
            return zp.CountResponse(int(value))
        case OC.SYNC:
            return zp.PathResponse(str(value))
        case OC.ADD_WATCH:
            return zp.ErrorResponse(0)
        case OC.WHO_AM_I:
            return zp.WhoAmIResponse(tuple(zp.ClientInfo(s, u) for s, u in value))
        case OC.SASL:
            return zp.SetSASLResponse(value)
        case OC.MULTI:
            return zp.MultiResponse(tuple((o, 0, _result(o, v)) for o, v in zip(sub_ops, value, strict=True)))
        case OC.MULTI_READ:
            out: list[tuple[int, int, zp.Record | None]] = []
            for o, v in zip(sub_ops, value, strict=True):
                if isinstance(v, ZooKeeperError):
                    out.append((OC.ERROR, v.zk_err, zp.ErrorResponse(v.zk_err)))
                elif o == OC.GET_DATA:
                    out.append((o, 0, zp.GetDataResponse(v[0], stat_out(v[1]))))
                else:
                    out.append((o, 0, zp.ChildrenResponse(tuple(v))))
            return zp.MultiResponse(tuple(out))
    return _result(op, value)


__all__ = ["CREATES", "acl_in", "acl_out", "multi_failed", "stat_out", "to_op", "to_response"]
