"""The leader's request processor: requests become concrete txns, checked against the future state.

The future state is the committed tree overlaid with the changes of every txn prepared but
not yet applied (ZooKeeper's outstanding changes). For each znode path and session the
overlay keeps only the newest view and the zxid that wrote it; when the tree applies zxid z,
every overlay entry written at or below z is already reflected in the committed tree, so it is
dropped unless a later prepare has overwritten it. ``abandon`` drops the whole overlay.

Invariant: preparing requests against the future state gives exactly the txns that preparing
each one right after applying all earlier ones would give (the property tests check this).
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Protocol

from zabray.tree.errors import (
    BadArgumentsError,
    BadVersionError,
    DataTooLargeError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExistsError,
    SessionExpiredError,
    ZooKeeperError,
)
from zabray.tree.ops import (
    Check,
    CheckTxn,
    CloseSession,
    CloseSessionTxn,
    Create,
    CreateSession,
    CreateSessionTxn,
    CreateTxn,
    Delete,
    DeleteTxn,
    ErrorTxn,
    Multi,
    MultiTxn,
    Op,
    OpCode,
    Request,
    SetData,
    SetDataTxn,
    SubOp,
    Sync,
    SyncTxn,
    TxnBody,
    TxnRecord,
    decode_request,
    encode_txn,
)
from zabray.tree.paths import ROOT, parent_of, validate_path
from zabray.tree.znode import NodeView

_OPCODES: dict[type, OpCode] = {
    Create: OpCode.CREATE,
    Delete: OpCode.DELETE,
    SetData: OpCode.SET_DATA,
    Check: OpCode.CHECK,
    Multi: OpCode.MULTI,
    CreateSession: OpCode.CREATE_SESSION,
    CloseSession: OpCode.CLOSE_SESSION,
    Sync: OpCode.SYNC,
}


class CommittedState(Protocol):
    """What the processor reads from the committed tree."""

    max_data_bytes: int

    def node_view(self, path: str) -> NodeView | None: ...

    def session_timeout(self, session_id: int) -> int | None: ...

    def session_ephemerals(self, session_id: int) -> frozenset[str]: ...


class _Scratch:
    """One prepare's tentative changes over the future state; merged into it only on success,
    so a failed multi leaves no trace."""

    __slots__ = ("proc", "nodes", "sessions")

    def __init__(self, proc: RequestProcessor) -> None:
        self.proc = proc
        self.nodes: dict[str, NodeView | None] = {}
        self.sessions: dict[int, int | None] = {}

    def node(self, path: str) -> NodeView | None:
        if path in self.nodes:
            return self.nodes[path]
        return self.proc.future_node(path)

    def session(self, session_id: int) -> int | None:
        if session_id in self.sessions:
            return self.sessions[session_id]
        return self.proc.future_session(session_id)


def _check_version(node: NodeView, expected: int, path: str) -> None:
    if expected != -1 and node.version != expected:
        raise BadVersionError(
            f"{path}: expected version {expected}, znode has version {node.version}", path=path
        )


class RequestProcessor:
    """Prepares txns for a leader; see the module docstring for the future-state rules."""

    __slots__ = ("_tree", "_nodes", "_sessions", "_outstanding")

    def __init__(self, tree: CommittedState) -> None:
        self._tree = tree
        self._nodes: dict[str, tuple[int, NodeView | None]] = {}
        self._sessions: dict[int, tuple[int, int | None]] = {}
        # (zxid, paths written, sessions written) per prepared ok txn, in zxid order.
        self._outstanding: deque[tuple[int, tuple[str, ...], tuple[int, ...]]] = deque()

    # -- future-state reads ------------------------------------------------------------------------

    def future_node(self, path: str) -> NodeView | None:
        e = self._nodes.get(path)
        return e[1] if e is not None else self._tree.node_view(path)

    def future_session(self, session_id: int) -> int | None:
        """The session's timeout if it is live in the future state."""
        e = self._sessions.get(session_id)
        return e[1] if e is not None else self._tree.session_timeout(session_id)

    def future_ephemerals(self, session_id: int, scratch: _Scratch) -> list[str]:
        """Every znode the session owns in the future state, sorted.

        The committed set, minus pending deletes, plus pending ephemeral creates (found by
        scanning the overlay, which holds at most the outstanding window's paths).
        """
        found: set[str] = set()
        candidates = set(self._tree.session_ephemerals(session_id))
        candidates.update(p for p, (_, v) in self._nodes.items() if v is not None and v.ephemeral_owner)
        candidates.update(p for p, v in scratch.nodes.items() if v is not None and v.ephemeral_owner)
        for p in candidates:
            v = scratch.node(p)
            if v is not None and v.ephemeral_owner == session_id:
                found.add(p)
        return sorted(found)

    @property
    def outstanding(self) -> int:
        """How many prepared ok txns are not yet applied."""
        return len(self._outstanding)

    # -- lifecycle ---------------------------------------------------------------------------------

    def applied(self, zxid: int) -> None:
        """The tree applied every txn up to ``zxid``: their overlay entries are now committed."""
        out = self._outstanding
        while out and out[0][0] <= zxid:
            z, paths, sessions = out.popleft()
            for p in paths:
                if self._nodes[p][0] == z:
                    del self._nodes[p]
            for s in sessions:
                if self._sessions[s][0] == z:
                    del self._sessions[s]

    def abandon(self) -> None:
        self._nodes.clear()
        self._sessions.clear()
        self._outstanding.clear()

    # -- prepare -----------------------------------------------------------------------------------

    def prepare(self, request: bytes, zxid: int) -> bytes:
        """The encoded txn for ``request`` as ``zxid``; a failed condition gives an error txn.

        Never raises for a bad request: an undecodable one becomes a BAD_ARGUMENTS error txn.
        """
        try:
            req = decode_request(request)
        except BadArgumentsError as e:
            return encode_txn(TxnRecord(0, 0, ErrorTxn(0, e.code, e.message, e.path, e.index)))
        scratch = _Scratch(self)
        try:
            body = self._prepare(req, scratch)
        except ZooKeeperError as e:
            body = ErrorTxn(int(_OPCODES[type(req.op)]), e.code, e.message, e.path, e.index)
        else:
            if scratch.nodes or scratch.sessions:
                for p, v in scratch.nodes.items():
                    self._nodes[p] = (zxid, v)
                for s, t in scratch.sessions.items():
                    self._sessions[s] = (zxid, t)
                self._outstanding.append((zxid, tuple(scratch.nodes), tuple(scratch.sessions)))
        return encode_txn(TxnRecord(req.time_ms, req.session_id, body))

    def _prepare(self, req: Request, s: _Scratch) -> TxnBody:
        op: Op = req.op
        sid = req.session_id
        t = type(op)
        if t is CreateSession:
            return self._create_session(op, sid, s)  # type: ignore[arg-type]
        if t is CloseSession:
            return self._close_session(sid, s)
        if sid != 0 and s.session(sid) is None:
            raise SessionExpiredError(f"session 0x{sid:x} is not live")
        if t is Multi:
            subs = []
            for i, sub in enumerate(op.ops):  # type: ignore[union-attr]
                try:
                    subs.append(self._sub(sub, sid, s))
                except ZooKeeperError as e:
                    e.index = i
                    e.message = f"multi op {i}: {e.message}"
                    raise
            return MultiTxn(tuple(subs))
        if t is Sync:
            return SyncTxn(validate_path(op.path))  # type: ignore[union-attr]
        return self._sub(op, sid, s)  # type: ignore[arg-type]

    def _sub(self, op: SubOp, sid: int, s: _Scratch) -> CreateTxn | DeleteTxn | SetDataTxn | CheckTxn:
        t = type(op)
        if t is Create:
            return self._create(op, sid, s)  # type: ignore[arg-type]
        if t is Delete:
            return self._delete(op, s)  # type: ignore[arg-type]
        if t is SetData:
            return self._set_data(op, s)  # type: ignore[arg-type]
        return self._check(op, s)  # type: ignore[arg-type]

    def _data(self, data: bytes, path: str) -> bytes:
        limit = self._tree.max_data_bytes
        if len(data) > limit:
            raise DataTooLargeError(f"{path}: {len(data)} bytes of data, the limit is {limit}", path=path)
        return data

    def _create(self, op: Create, sid: int, s: _Scratch) -> CreateTxn:
        path = validate_path(op.path, sequential=op.sequential)
        if path == ROOT and not op.sequential:
            raise BadArgumentsError("cannot create the root", path=path)
        self._data(op.data, path)
        if op.ephemeral and sid == 0:
            raise BadArgumentsError(f"{path}: an ephemeral znode needs a session", path=path)
        ppath = parent_of(path)
        parent = s.node(ppath)
        if parent is None:
            raise NoNodeError(f"{path}: parent {ppath} does not exist", path=ppath)
        if op.sequential:
            path = f"{path}{parent.cversion:010d}"
        if s.node(path) is not None:
            raise NodeExistsError(f"{path} already exists", path=path)
        if parent.ephemeral_owner != 0:
            raise NoChildrenForEphemeralsError(f"{path}: parent {ppath} is ephemeral", path=ppath)
        owner = sid if op.ephemeral else 0
        cversion = parent.cversion + 1
        s.nodes[ppath] = replace(parent, cversion=cversion, num_children=parent.num_children + 1)
        s.nodes[path] = NodeView(0, 0, owner, 0)
        return CreateTxn(path, op.data, owner, cversion)

    def _delete(self, op: Delete, s: _Scratch) -> DeleteTxn:
        path = validate_path(op.path)
        if path == ROOT:
            raise BadArgumentsError("cannot delete the root", path=path)
        node = s.node(path)
        if node is None:
            raise NoNodeError(f"{path} does not exist", path=path)
        _check_version(node, op.version, path)
        if node.num_children:
            raise NotEmptyError(f"{path} has {node.num_children} children", path=path)
        self._remove(path, s)
        return DeleteTxn(path)

    def _remove(self, path: str, s: _Scratch) -> None:
        ppath = parent_of(path)
        parent = s.node(ppath)
        assert parent is not None, f"future state lost the parent of {path}"
        s.nodes[ppath] = replace(parent, num_children=parent.num_children - 1)
        s.nodes[path] = None

    def _set_data(self, op: SetData, s: _Scratch) -> SetDataTxn:
        path = validate_path(op.path)
        self._data(op.data, path)
        node = s.node(path)
        if node is None:
            raise NoNodeError(f"{path} does not exist", path=path)
        _check_version(node, op.version, path)
        version = node.version + 1
        s.nodes[path] = replace(node, version=version)
        return SetDataTxn(path, op.data, version)

    def _check(self, op: Check, s: _Scratch) -> CheckTxn:
        path = validate_path(op.path)
        node = s.node(path)
        if node is None:
            raise NoNodeError(f"{path} does not exist", path=path)
        _check_version(node, op.version, path)
        return CheckTxn(path, op.version)

    def _create_session(self, op: CreateSession, sid: int, s: _Scratch) -> CreateSessionTxn:
        if sid == 0:
            raise BadArgumentsError("session id 0 is reserved")
        if s.session(sid) is not None:
            raise SessionExistsError(f"session 0x{sid:x} already exists")
        s.sessions[sid] = op.timeout_ms
        return CreateSessionTxn(op.timeout_ms)

    def _close_session(self, sid: int, s: _Scratch) -> CloseSessionTxn:
        if sid == 0:
            raise BadArgumentsError("session id 0 is reserved")
        if s.session(sid) is None:
            raise SessionExpiredError(f"session 0x{sid:x} is not live")
        paths = self.future_ephemerals(sid, s)
        for p in paths:
            self._remove(p, s)
        s.sessions[sid] = None
        return CloseSessionTxn(tuple(paths))
