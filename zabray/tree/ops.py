"""Requests (what clients submit) and txns (what the leader proposes), as records and bytes.

Both are versioned msgpack arrays whose op bodies start with an ``OpCode``:

    request = [REQUEST_VERSION, session_id, time_ms, op, [[scheme, id], ...]]
      op    = [CREATE, path, data, ephemeral, sequential, acl, container, ttl, stat]
            | [DELETE, path, version] | [SET_DATA, path, data, version] | [CHECK, path, version]
            | [SET_ACL, path, acl, version] | [MULTI, [op, ...]] | [CREATE_SESSION, timeout_ms]
            | [CLOSE_SESSION] | [SYNC, path] | [DELETE_CONTAINER, path]
      acl   = [[perms, scheme, id], ...]
    txn     = [TXN_VERSION, time_ms, session_id, body]
      body  = [CREATE, path, data, owner, parent_cversion, acl, stat] | [DELETE, path]
            | [SET_DATA, path, data, new_version] | [CHECK, path, version]
            | [SET_ACL, path, acl, new_aversion] | [MULTI, [body, ...]]
            | [CREATE_SESSION, timeout_ms] | [CLOSE_SESSION, [path, ...]] | [SYNC, path]
            | [DELETE_CONTAINER, path] | [ERROR, op, code, message, path | nil, index | nil]

A request names the session it acts for (0: none, e.g. an administrative write); for
CREATE_SESSION/CLOSE_SESSION that is the session created/closed. It also carries the
requester's authenticated ids, against which the leader checks the ACLs. A txn's ``owner`` is
the stored owner: a session id, or the container / TTL marker (see ``znode``). A txn is
concrete: sequential names resolved, new version numbers and the ephemerals a close deletes
spelled out, so applying it needs no decision. The records themselves live in
``zabray.tree.records`` and are re-exported here. Decoding checks every field's type and range: a bad request raises
``BadArgumentsError`` (the client's fault, it becomes an error txn); a bad txn raises
``CorruptionError`` (a log or a leader produced bytes no tree could have).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, assert_never

import msgpack

from zabray.errors import FormatVersionError
from zabray.tree.errors import ERRORS, BadArgumentsError
from zabray.tree.fields import I32 as _I32
from zabray.tree.fields import I64 as _I64
from zabray.tree.fields import REQ as _REQ
from zabray.tree.fields import SET_DATA as _SET_DATA
from zabray.tree.fields import TXN as _TXN
from zabray.tree.fields import U64 as _U64
from zabray.tree.fields import Fields as _Fields
from zabray.tree.fields import unpack as _unpack
from zabray.tree.paths import validate_path
from zabray.tree.records import (
    Check,
    CheckTxn,
    CloseSession,
    CloseSessionTxn,
    Create,
    CreateSession,
    CreateSessionTxn,
    CreateTxn,
    Delete,
    DeleteContainer,
    DeleteContainerTxn,
    DeleteTxn,
    ErrorTxn,
    Multi,
    MultiTxn,
    Op,
    OpCode,
    Request,
    SetACL,
    SetACLTxn,
    SetData,
    SetDataTxn,
    SubOp,
    Sync,
    SyncTxn,
    TxnBody,
    TxnRecord,
    create_op,
)
from zabray.tree.znode import ACL, OPEN_ACL, AuthId, valid_owner

# Version 2 added ACLs, auth ids, containers and TTL znodes; version-1 txns are refused by name.
REQUEST_VERSION = 2
TXN_VERSION = 2


# -- request encoding --------------------------------------------------------------------------------


def _op_fields(op: Op, f: _Fields, *, nested: bool) -> list[Any]:
    """The wire body of ``op``, checking its fields (shared by encode and decode)."""
    if type(op) is Create:
        if type(op.acl) is not tuple:
            f.fail("acl must be a tuple")
        return [
            OpCode.CREATE,
            f.str_(op.path, "path"),
            f.data(op.data),
            f.bool_(op.ephemeral, "ephemeral"),
            f.bool_(op.sequential, "sequential"),
            _acl_fields(op.acl, f),
            f.bool_(op.container, "container"),
            f.int_(op.ttl, "ttl", -_I64, _I64),
            f.bool_(op.stat, "stat"),
        ]
    if type(op) is Delete:
        return [OpCode.DELETE, f.str_(op.path, "path"), f.version(op.version)]
    if type(op) is SetData:
        return [OpCode.SET_DATA, f.str_(op.path, "path"), f.data(op.data), f.version(op.version)]
    if type(op) is Check:
        return [OpCode.CHECK, f.str_(op.path, "path"), f.version(op.version)]
    if nested:
        f.fail(f"{type(op).__name__} cannot be part of a multi")
    if type(op) is SetACL:
        if type(op.acl) is not tuple:
            f.fail("acl must be a tuple")
        return [OpCode.SET_ACL, f.str_(op.path, "path"), _acl_fields(op.acl, f), f.version(op.version)]
    if type(op) is DeleteContainer:
        return [OpCode.DELETE_CONTAINER, f.str_(op.path, "path")]
    if type(op) is Multi:
        if type(op.ops) is not tuple:
            f.fail("multi ops must be a tuple")
        return [OpCode.MULTI, [_op_fields(o, f, nested=True) for o in op.ops]]
    if type(op) is CreateSession:
        return [OpCode.CREATE_SESSION, f.timeout(op.timeout_ms)]
    if type(op) is CloseSession:
        return [OpCode.CLOSE_SESSION]
    if type(op) is Sync:
        return [OpCode.SYNC, f.str_(op.path, "path")]
    f.fail(f"not an op: {op!r:.60}")


def _acl_fields(acl: tuple[ACL, ...], f: _Fields) -> list[list[Any]]:
    out = []
    for e in acl:
        if type(e) is not tuple or len(e) != 3:
            f.fail(f"an acl entry must be a (perms, scheme, id) tuple, got {e!r:.60}")
        out.append([f.int_(e[0], "perms", -_I32, _I32), f.str_(e[1], "scheme"), f.str_(e[2], "id")])
    return out


def encode_request(req: Request) -> bytes:
    """Encode ``req``; raises ``BadArgumentsError`` on a field of the wrong type or range."""
    f = _REQ
    if type(req) is not Request:
        f.fail(f"not a Request: {req!r:.60}")
    if type(req.auth) is not tuple:
        f.fail("auth must be a tuple of (scheme, id)")
    auth = []
    for a in req.auth:
        if type(a) is not tuple or len(a) != 2:
            f.fail(f"an auth id must be a (scheme, id) tuple, got {a!r:.60}")
        auth.append([f.str_(a[0], "scheme"), f.str_(a[1], "id")])
    body = [
        REQUEST_VERSION,
        f.session(req.session_id),
        f.time(req.time_ms),
        _op_fields(req.op, f, nested=False),
        auth,
    ]
    out: bytes = msgpack.packb(body, use_bin_type=True)
    return out


_REQ_ARITY = {
    OpCode.CREATE: 9,
    OpCode.SET_ACL: 4,
    OpCode.DELETE_CONTAINER: 2,
    OpCode.DELETE: 3,
    OpCode.SET_DATA: 4,
    OpCode.CHECK: 3,
    OpCode.MULTI: 2,
    OpCode.CREATE_SESSION: 2,
    OpCode.CLOSE_SESSION: 1,
    OpCode.SYNC: 2,
}


def _decode_op(v: Any, f: _Fields, *, nested: bool) -> Op:
    if type(v) is not list or not v:
        f.fail("op must be a non-empty list")
    code = f.code(v[0])
    if code not in _REQ_ARITY:
        f.fail(f"{code.name} is not a request op")
    f.list_(v, code.name.lower(), _REQ_ARITY[code])
    if code is OpCode.CREATE:
        return Create(
            f.str_(v[1], "path"),
            f.data(v[2]),
            f.bool_(v[3], "ephemeral"),
            f.bool_(v[4], "sequential"),
            f.acl(v[5]),
            f.bool_(v[6], "container"),
            f.int_(v[7], "ttl", -_I64, _I64),
            f.bool_(v[8], "stat"),
        )
    if code is OpCode.DELETE:
        return Delete(f.str_(v[1], "path"), f.version(v[2]))
    if code is OpCode.SET_DATA:
        return SetData(f.str_(v[1], "path"), f.data(v[2]), f.version(v[3]))
    if code is OpCode.CHECK:
        return Check(f.str_(v[1], "path"), f.version(v[2]))
    if nested:
        f.fail(f"{code.name} cannot be part of a multi")
    if code is OpCode.SET_ACL:
        return SetACL(f.str_(v[1], "path"), f.acl(v[2]), f.version(v[3]))
    if code is OpCode.DELETE_CONTAINER:
        return DeleteContainer(f.str_(v[1], "path"))
    if code is OpCode.MULTI:
        subs = tuple(_decode_op(o, f, nested=True) for o in f.list_(v[1], "multi ops"))
        return Multi(subs)  # type: ignore[arg-type]
    if code is OpCode.CREATE_SESSION:
        return CreateSession(f.timeout(v[1]))
    if code is OpCode.CLOSE_SESSION:
        return CloseSession()
    return Sync(f.str_(v[1], "path"))


def decode_request(data: bytes) -> Request:
    """Decode and type-check a request; raises ``BadArgumentsError``. Paths are checked later,
    by the processor, so a bad path inside a multi is reported with its index."""
    f = _REQ
    v = _unpack(data, f)
    if type(v) is list and len(v) == 5 and v[0] == REQUEST_VERSION and type(v[0]) is int:
        # A setData, the hottest request: the checks below, inline.
        session, t, op, auth = v[1], v[2], v[3], v[4]
        if (type(op) is list and len(op) == 4 and op[0] == _SET_DATA and type(op[0]) is int
                and type(session) is int and 0 <= session < _U64 and type(t) is int and 0 <= t < _I64):
            path, value, version = op[1], op[2], op[3]
            if type(path) is str and type(value) is bytes and type(version) is int and -_I32 <= version < _I32:
                # Every check before the auth ids passed, so a bad one fails as the long way would.
                return Request(session, t, SetData(path, value, version), _REQ.auth(auth))
    f.list_(v, "request")
    if not v or v[0] != REQUEST_VERSION or type(v[0]) is not int:
        f.fail(f"unsupported request version {(v[0] if v else None)!r:.20}")
    f.list_(v, "request", 5)
    return Request(f.session(v[1]), f.time(v[2]), _decode_op(v[3], f, nested=False), f.auth(v[4]))


# -- txn encoding ------------------------------------------------------------------------------------


def _body_fields(b: TxnBody, *, nested: bool = False) -> list[Any]:
    match b:
        case CreateTxn():
            return [OpCode.CREATE, b.path, b.data, b.ephemeral_owner, b.parent_cversion, [list(e) for e in b.acl],
                    b.stat]
        case DeleteTxn():
            return [OpCode.DELETE, b.path]
        case SetDataTxn():
            return [OpCode.SET_DATA, b.path, b.data, b.version]
        case CheckTxn():
            return [OpCode.CHECK, b.path, b.version]
    if nested:
        raise TypeError(f"{type(b).__name__} cannot be part of a multi txn")
    match b:
        case SetACLTxn():
            return [OpCode.SET_ACL, b.path, [list(e) for e in b.acl], b.aversion]
        case DeleteContainerTxn():
            return [OpCode.DELETE_CONTAINER, b.path]
        case MultiTxn():
            return [OpCode.MULTI, [_body_fields(s, nested=True) for s in b.txns]]
        case CreateSessionTxn():
            return [OpCode.CREATE_SESSION, b.timeout_ms]
        case CloseSessionTxn():
            return [OpCode.CLOSE_SESSION, list(b.paths)]
        case SyncTxn():
            return [OpCode.SYNC, b.path]
        case ErrorTxn():
            return [OpCode.ERROR, b.op, b.code, b.message, b.path, b.index]
        case _:
            assert_never(b)


def encode_txn(rec: TxnRecord) -> bytes:
    """Encode a txn. Only the processor builds txns, so its fields are trusted here."""
    out: bytes = msgpack.packb(
        [TXN_VERSION, rec.time_ms, rec.session_id, _body_fields(rec.body)], use_bin_type=True
    )
    return out


def _txn_path(v: Any, f: _Fields) -> str:
    p = f.str_(v, "path")
    try:
        validate_path(p)
    except BadArgumentsError as e:
        f.fail(str(e))
    if p == "/":
        f.fail("a txn cannot create or delete the root")
    return p


def _decode_body(v: Any, f: _Fields, *, nested: bool) -> TxnBody:
    if type(v) is not list or not v:
        f.fail("txn body must be a non-empty list")
    if len(v) == 4 and v[0] == _SET_DATA and type(v[0]) is int:  # the hottest txn, checked inline
        p, data, version = v[1], v[2], v[3]
        if type(p) is str and type(data) is bytes and type(version) is int and 1 <= version < _I64:
            try:
                validate_path(p)
            except BadArgumentsError as e:
                f.fail(str(e))
            return SetDataTxn(p, data, version)
    code = f.code(v[0])
    if code is OpCode.CREATE:
        f.list_(v, "create", 7)
        owner = f.session(v[3])
        if not valid_owner(owner):
            f.fail(f"invalid owner 0x{owner:x}")
        return CreateTxn(
            _txn_path(v[1], f),
            f.data(v[2]),
            owner,
            f.int_(v[4], "parent_cversion", 1, _I64),
            f.acl(v[5]),
            f.bool_(v[6], "stat"),
        )
    if code is OpCode.DELETE:
        f.list_(v, "delete", 2)
        return DeleteTxn(_txn_path(v[1], f))
    if code is OpCode.SET_DATA:
        f.list_(v, "set_data", 4)
        p = f.str_(v[1], "path")
        try:
            validate_path(p)
        except BadArgumentsError as e:
            f.fail(str(e))
        return SetDataTxn(p, f.data(v[2]), f.int_(v[3], "version", 1, _I64))
    if code is OpCode.CHECK:
        f.list_(v, "check", 3)
        return CheckTxn(f.str_(v[1], "path"), f.version(v[2]))
    if nested:
        f.fail(f"{code.name} cannot be part of a multi txn")
    if code is OpCode.SET_ACL:
        f.list_(v, "set_acl", 4)
        p = f.str_(v[1], "path")
        try:
            validate_path(p)
        except BadArgumentsError as e:
            f.fail(str(e))
        return SetACLTxn(p, f.acl(v[2]), f.int_(v[3], "aversion", -_I32, _I32))
    if code is OpCode.DELETE_CONTAINER:
        f.list_(v, "delete_container", 2)
        return DeleteContainerTxn(_txn_path(v[1], f))
    if code is OpCode.MULTI:
        f.list_(v, "multi", 2)
        subs = tuple(_decode_body(s, f, nested=True) for s in f.list_(v[1], "multi txns"))
        return MultiTxn(subs)  # type: ignore[arg-type]
    if code is OpCode.CREATE_SESSION:
        f.list_(v, "create_session", 2)
        return CreateSessionTxn(f.timeout(v[1]))
    if code is OpCode.CLOSE_SESSION:
        f.list_(v, "close_session", 2)
        return CloseSessionTxn(tuple(_txn_path(p, f) for p in f.list_(v[1], "paths")))
    if code is OpCode.SYNC:
        f.list_(v, "sync", 2)
        return SyncTxn(f.str_(v[1], "path"))
    if code is not OpCode.ERROR:
        f.fail(f"{code.name} is not a txn op")
    f.list_(v, "error", 6)
    op = f.int_(v[1], "op", 0, len(OpCode))
    err = f.str_(v[2], "error code")
    if err not in ERRORS:
        f.fail(f"unknown error code {err!r:.40}")
    path = None if v[4] is None else f.str_(v[4], "path")
    index = None if v[5] is None else f.int_(v[5], "index", 0, _I32)
    return ErrorTxn(op, err, f.str_(v[3], "message"), path, index)


def decode_txn(data: bytes) -> TxnRecord:
    """Decode and check a txn; raises ``zabray.errors.CorruptionError``."""
    f = _TXN
    v = _unpack(data, f)
    if type(v) is list and len(v) == 4 and v[0] == TXN_VERSION and type(v[0]) is int:  # the checks below, inline
        t, session = v[1], v[2]
        if type(t) is int and 0 <= t < _I64 and type(session) is int and 0 <= session < _U64:
            return TxnRecord(t, session, _decode_body(v[3], f, nested=False))
    f.list_(v, "txn", 4)
    if v[0] == 1 and type(v[0]) is int:
        raise FormatVersionError(
            "tree txn written in format 1 by an older zabray (no ACLs, containers or TTL znodes); "
            "this one reads format 2 only. Move the data directory aside (or recreate the ensemble)."
        )
    if v[0] != TXN_VERSION or type(v[0]) is not int:
        f.fail(f"unsupported txn version {v[0]!r:.20}")
    return TxnRecord(f.time(v[1]), f.session(v[2]), _decode_body(v[3], f, nested=False))


# -- request builders --------------------------------------------------------------------------------


def _req(op: Op, session_id: int, time_ms: int, auth: Iterable[AuthId] = ()) -> bytes:
    return encode_request(Request(session_id, time_ms, op, tuple(auth)))


def create(
    path: str,
    data: bytes | None = b"",
    *,
    ephemeral: bool = False,
    sequential: bool = False,
    session_id: int = 0,
    time_ms: int,
    acl: Iterable[ACL] = OPEN_ACL,
    container: bool = False,
    ttl: int = -1,
    stat: bool = False,
    auth: Iterable[AuthId] = (),
) -> bytes:
    """Request bytes: create a znode (ephemeral ones are owned by ``session_id``)."""
    op = Create(path, data, ephemeral, sequential, tuple(acl), container, ttl, stat)
    return _req(op, session_id, time_ms, auth)


def delete(
    path: str, version: int = -1, *, session_id: int = 0, time_ms: int, auth: Iterable[AuthId] = ()
) -> bytes:
    return _req(Delete(path, version), session_id, time_ms, auth)


def set_data(
    path: str,
    data: bytes | None,
    version: int = -1,
    *,
    session_id: int = 0,
    time_ms: int,
    auth: Iterable[AuthId] = (),
) -> bytes:
    return _req(SetData(path, data, version), session_id, time_ms, auth)


def check(
    path: str, version: int = -1, *, session_id: int = 0, time_ms: int, auth: Iterable[AuthId] = ()
) -> bytes:
    return _req(Check(path, version), session_id, time_ms, auth)


def set_acl(
    path: str,
    acl: Iterable[ACL],
    version: int = -1,
    *,
    session_id: int = 0,
    time_ms: int,
    auth: Iterable[AuthId] = (),
) -> bytes:
    """Request bytes: replace the ACL of ``path`` (version checks the aversion)."""
    return _req(SetACL(path, tuple(acl), version), session_id, time_ms, auth)


def delete_container(path: str, *, time_ms: int) -> bytes:
    """Request bytes: the leader's removal of an empty container or expired TTL znode."""
    return _req(DeleteContainer(path), 0, time_ms)


def multi(
    ops: Iterable[SubOp], *, session_id: int = 0, time_ms: int, auth: Iterable[AuthId] = ()
) -> bytes:
    """Request bytes: ``ops`` (Create/Delete/SetData/Check records) as one atomic txn."""
    return _req(Multi(tuple(ops)), session_id, time_ms, auth)


def create_session(session_id: int, timeout_ms: int, *, time_ms: int) -> bytes:
    return _req(CreateSession(timeout_ms), session_id, time_ms)


def close_session(session_id: int, *, time_ms: int) -> bytes:
    return _req(CloseSession(), session_id, time_ms)


def sync(path: str = "/", *, session_id: int = 0, time_ms: int, auth: Iterable[AuthId] = ()) -> bytes:
    return _req(Sync(path), session_id, time_ms, auth)


__all__ = [
    "Check",
    "CheckTxn",
    "CloseSession",
    "CloseSessionTxn",
    "Create",
    "CreateSession",
    "CreateSessionTxn",
    "CreateTxn",
    "Delete",
    "DeleteContainer",
    "DeleteContainerTxn",
    "DeleteTxn",
    "ErrorTxn",
    "Multi",
    "MultiTxn",
    "Op",
    "OpCode",
    "REQUEST_VERSION",
    "Request",
    "SetACL",
    "SetACLTxn",
    "SetData",
    "SetDataTxn",
    "SubOp",
    "Sync",
    "SyncTxn",
    "TXN_VERSION",
    "TxnBody",
    "TxnRecord",
    "check",
    "close_session",
    "create",
    "create_op",
    "create_session",
    "decode_request",
    "decode_txn",
    "delete",
    "delete_container",
    "encode_request",
    "encode_txn",
    "multi",
    "set_acl",
    "set_data",
    "sync",
]
