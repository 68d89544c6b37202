"""The bespoke msgpack client protocol (``zabray.wire.clientproto``'s ``ZK`` frames) mapped onto
the service's protocol-neutral requests and replies. A later wire protocol gets its own module."""

from __future__ import annotations

from typing import Any

from zabray.tree import Check, CloseSession, Create, Delete, Multi, SetData, Stat, Sync
from zabray.wire import clientproto as cp
from zabray.zk.messages import (
    ClientOp,
    Connect,
    ErrorInfo,
    Exists,
    GetChildren,
    GetData,
    Malformed,
    Ping,
    Reply,
    SessionEnded,
    Watches,
    WatchFired,
)


def wire_value(v: Any) -> Any:
    """A reply value as msgpack-able data (Stat -> list of 11 ints, tuples -> lists)."""
    if isinstance(v, Stat):
        return list(v.as_tuple())
    if isinstance(v, (tuple, list)):
        return [wire_value(x) for x in v]
    return v


def _data(v: Any) -> bytes | None:
    return None if v is None else bytes(v)  # (None: ZooKeeper's null)


def _sub_op(x: list[Any]) -> Create | Delete | SetData | Check:
    kind, a = x[0], x[1]
    if kind == "create":
        return Create(str(a[0]), _data(a[1]), bool(a[2]), bool(a[3]))
    if kind == "delete":
        return Delete(str(a[0]), int(a[1]))
    if kind == "set":
        return SetData(str(a[0]), _data(a[1]), int(a[2]))
    if kind == "check":
        return Check(str(a[0]), int(a[1]))
    raise ValueError(f"unknown multi op {kind!r:.20}")


def _watches(w: Any) -> Watches:
    if not isinstance(w, dict):
        return Watches()
    return Watches(tuple(str(p) for p in w.get("data", ())), tuple(str(p) for p in w.get("exist", ())),
                   tuple(str(p) for p in w.get("child", ())))


def request(req: cp.ZkReq) -> ClientOp:
    """The request a ``ZK`` frame asks for (``Malformed``, with a one-line reason, if none)."""
    op, a = req.op, req.args
    try:
        if op == "ping":
            return Ping()
        if op == "connect":
            return Connect(int(a[0]), int(a[1]), int(a[2]), _watches(a[3]),
                           watches_since=int(a[4]) if len(a) > 4 else None)
        if op in ("get", "exists", "children"):
            path, watch = str(a[0]), bool(a[1]) if len(a) > 1 else False
            if op == "get":
                return GetData(path, watch)
            return Exists(path, watch) if op == "exists" else GetChildren(path, watch, stat=True)
        if op == "create":
            return Create(str(a[0]), _data(a[1]), bool(a[2]), bool(a[3]))
        if op == "delete":
            return Delete(str(a[0]), int(a[1]))
        if op == "set":
            return SetData(str(a[0]), _data(a[1]), int(a[2]))
        if op == "check":
            return Check(str(a[0]), int(a[1]))
        if op == "sync":
            return Sync(str(a[0]) if a else "/")
        if op == "multi":
            return Multi(tuple(_sub_op(x) for x in a))
        if op == "close":
            return CloseSession()
    except (IndexError, TypeError, ValueError, KeyError) as x:
        return Malformed(f"bad {op} request: {x}")
    return Malformed(f"unknown op {op!r:.30}")


def _error(e: ErrorInfo | None) -> list[Any] | None:
    return None if e is None else [e.code, e.message, e.path, e.index]


def frame(action: Reply | WatchFired | SessionEnded) -> cp.ZkRep | cp.ZkEvent:
    """The frame that carries a service action to its connection."""
    if type(action) is Reply:
        return cp.ZkRep(action.xid, action.zxid, _error(action.error), wire_value(action.value))
    if type(action) is WatchFired:
        return cp.ZkEvent("watch", [action.kind, action.path, action.event, action.zxid])
    assert type(action) is SessionEnded
    return cp.ZkEvent("expired", [action.session_id, action.zxid])
