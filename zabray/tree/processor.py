"""The leader's request processor: requests become concrete txns, checked against the future state.

The future state is the committed tree overlaid with the changes of every txn prepared but
not yet applied (ZooKeeper's outstanding changes). For each znode path and session the
overlay keeps only the newest view and the zxid that wrote it; when the tree applies zxid z,
every overlay entry written at or below z is already reflected in the committed tree, so it is
dropped unless a later prepare has overwritten it. ``abandon`` drops the whole overlay.

Checks run in ZooKeeper 3.8's order (PrepRequestProcessor), so the first failure is the one
ZooKeeper reports: the ACLs are checked against the auth ids the request carries (CREATE or
DELETE on the parent, WRITE for set_data, READ for check, ADMIN for set_acl), and ACLs given
to create/set_acl are validated and their ``auth`` entries expanded here, on the leader, so
the txn holds the concrete ACL.

Invariant: preparing requests against the future state gives exactly the txns that preparing
each one right after applying all earlier ones would give (the property tests check this).
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Protocol, assert_never

from zabray.tree import acl as acls
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
    decode_request,
    encode_txn,
)
from zabray.tree.paths import ROOT, SPECIAL_PATHS, parent_of, validate_path
from zabray.tree.znode import (
    CONTAINER_OWNER,
    PERM_ADMIN,
    PERM_CREATE,
    PERM_DELETE,
    PERM_READ,
    PERM_WRITE,
    SESSION_ID_LIMIT,
    TTL_MAX,
    TTL_OWNER,
    AuthId,
    Kind,
    NodeView,
    kind_of,
    ttl_of,
)

_OPCODES: dict[type, OpCode] = {
    Create: OpCode.CREATE,
    Delete: OpCode.DELETE,
    SetData: OpCode.SET_DATA,
    Check: OpCode.CHECK,
    Multi: OpCode.MULTI,
    CreateSession: OpCode.CREATE_SESSION,
    CloseSession: OpCode.CLOSE_SESSION,
    Sync: OpCode.SYNC,
    SetACL: OpCode.SET_ACL,
    DeleteContainer: OpCode.DELETE_CONTAINER,
}


class CommittedState(Protocol):
    """What the processor reads from the committed tree."""

    max_data_bytes: int
    sasl_acls: bool

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


_MAX_RECORDS = 1 << 16


class RequestProcessor:
    """Prepares txns for a leader; see the module docstring for the future-state rules."""

    __slots__ = ("_tree", "_nodes", "_sessions", "_outstanding", "_records", "time_ms")

    def __init__(self, tree: CommittedState) -> None:
        self._tree = tree
        self.time_ms = 0  # the time of the request being prepared
        self._nodes: dict[str, tuple[int, NodeView | None]] = {}
        self._sessions: dict[int, tuple[int, int | None]] = {}
        # (zxid, paths written, sessions written) per prepared ok txn, in zxid order.
        self._outstanding: deque[tuple[int, tuple[str, ...], tuple[int, ...]]] = deque()
        # zxid -> (encoded txn, the record it encodes) of each prepared txn not yet applied: the
        # leader applies its own txns without decoding them again (``take_record``).
        self._records: dict[int, tuple[bytes, TxnRecord]] = {}

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
        self._records.clear()

    def take_record(self, zxid: int, data: bytes) -> TxnRecord | None:
        """The record ``prepare`` encoded as ``data`` for ``zxid`` (None if it did not, or if
        ``data`` is not that very encoding): what ``decode_txn(data)`` would give, for free."""
        e = self._records.pop(zxid, None)
        return e[1] if e is not None and e[0] is data else None

    # -- prepare -----------------------------------------------------------------------------------

    def prepare(self, request: bytes, zxid: int) -> bytes:
        """The encoded txn for ``request`` as ``zxid``; a failed condition gives an error txn.

        Never raises for a bad request: an undecodable one becomes a BAD_ARGUMENTS error txn.
        """
        try:
            req = decode_request(request)
        except BadArgumentsError as e:
            return self._encoded(zxid, TxnRecord(0, 0, ErrorTxn(0, e.code, e.message, e.path, e.index)))
        scratch = _Scratch(self)
        self.time_ms = req.time_ms
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
        return self._encoded(zxid, TxnRecord(req.time_ms, req.session_id, body))

    def _encoded(self, zxid: int, rec: TxnRecord) -> bytes:
        data = encode_txn(rec)
        records = self._records
        if len(records) >= _MAX_RECORDS:  # never applied (a leader that stalls): keep memory bounded
            records.clear()
        records[zxid] = (data, rec)
        return data

    def _prepare(self, req: Request, s: _Scratch) -> TxnBody:
        op: Op = req.op
        sid = req.session_id
        match op:
            case DeleteContainer():
                return self._delete_container(op, req.time_ms, s)
            case CreateSession():
                return self._create_session(op, sid, s)
            case CloseSession():
                return self._close_session(sid, s)
        if sid != 0 and s.session(sid) is None:
            raise SessionExpiredError(f"session 0x{sid:x} is not live")
        match op:
            case Multi():
                subs = []
                for i, sub in enumerate(op.ops):
                    try:
                        subs.append(self._sub(sub, sid, req.auth, s))
                    except ZooKeeperError as e:
                        e.index = i
                        e.message = f"multi op {i}: {e.message}"
                        raise
                return MultiTxn(tuple(subs))
            case Sync():
                return SyncTxn(op.path)  # (echoed, never judged, as by ZooKeeper)
            case SetACL():
                return self._set_acl(op, req.auth, s)
            case Create() | Delete() | SetData() | Check():
                return self._sub(op, sid, req.auth, s)
            case _:
                assert_never(op)

    def _sub(
        self, op: SubOp, sid: int, auth: tuple[AuthId, ...], s: _Scratch
    ) -> CreateTxn | DeleteTxn | SetDataTxn | CheckTxn:
        match op:
            case Create():
                return self._create(op, sid, auth, s)
            case Delete():
                return self._delete(op, auth, s)
            case SetData():
                return self._set_data(op, auth, s)
            case Check():
                return self._check(op, auth, s)
            case _:
                assert_never(op)

    def _data(self, data: bytes | None, path: str) -> None:
        limit = self._tree.max_data_bytes
        if data is not None and len(data) > limit:
            raise DataTooLargeError(f"{path}: {len(data)} bytes of data, the limit is {limit}", path=path)

    def _owner(self, op: Create, sid: int, path: str) -> int:
        """The stored owner of the znode ``op`` creates (ZooKeeper's mode and TTL checks)."""
        if op.container:
            if op.ephemeral or op.ttl != -1:
                raise BadArgumentsError(f"{path}: a container cannot be ephemeral or have a ttl", path=path)
            return CONTAINER_OWNER
        if op.ttl != -1:
            if op.ephemeral or not 0 < op.ttl <= TTL_MAX:
                raise BadArgumentsError(f"{path}: a ttl must be in 1..{TTL_MAX} on a persistent znode", path=path)
            return TTL_OWNER | op.ttl
        if op.ephemeral:
            if sid == 0:
                raise BadArgumentsError(f"{path}: an ephemeral znode needs a session", path=path)
            return sid
        return 0

    def _create(self, op: Create, sid: int, auth: tuple[AuthId, ...], s: _Scratch) -> CreateTxn:
        # The order of the checks is ZooKeeper's (pRequest2TxnCreate): mode, a path with no "/"
        # or a NUL, ACL, parent, CREATE permission, then the whole path (sequential suffix
        # included), existence, ephemeral parent. So "/d/./a" is NO_NODE (no parent "/d/.").
        path = op.path
        owner = self._owner(op, sid, path)
        if type(path) is not str or "/" not in path or "\0" in path:
            validate_path(path)  # raises BadArgumentsError naming what is wrong
            raise BadArgumentsError(f"invalid path {path!r}", path=path)
        if path == ROOT and not op.sequential:
            raise NodeExistsError("/ already exists", path=path)
        self._data(op.data, path)
        acl = acls.fixup_acl(op.acl, auth, path, sasl=self._tree.sasl_acls)
        ppath = parent_of(path)
        parent = s.node(ppath)
        if parent is None:
            raise NoNodeError(f"{path}: parent {ppath} does not exist", path=ppath)
        acls.check(parent.acl, PERM_CREATE, auth, ppath)
        if op.sequential:
            path = f"{path}{parent.cversion:010d}"
        validate_path(path)
        if s.node(path) is not None:
            raise NodeExistsError(f"{path} already exists", path=path)
        if kind_of(parent.ephemeral_owner) is Kind.EPHEMERAL:
            raise NoChildrenForEphemeralsError(f"{path}: parent {ppath} is ephemeral", path=ppath)
        cversion = parent.cversion + 1
        s.nodes[ppath] = NodeView(parent.version, cversion, parent.ephemeral_owner, parent.num_children + 1,
                                  parent.aversion, parent.acl, parent.mtime)
        s.nodes[path] = NodeView(0, 0, owner, 0, 0, acl, self.time_ms)
        return CreateTxn(path, op.data, owner, cversion, acl, op.stat)

    def _delete(self, op: Delete, auth: tuple[AuthId, ...], s: _Scratch) -> DeleteTxn:
        # ZooKeeper judges a delete's path only as far as its parent needs: one with no "/" or a
        # NUL is BAD_ARGUMENTS; any other malformed path names no znode, so it is NO_NODE.
        path = op.path
        if "/" not in path or "\0" in path:
            raise BadArgumentsError(f"cannot delete {path!r}: not a path", path=path)
        if path in SPECIAL_PATHS:
            raise BadArgumentsError(f"cannot delete {path}", path=path)
        ppath = path[: path.rfind("/")] or ROOT
        parent = s.node(ppath)
        if parent is None:
            raise NoNodeError(f"{path}: parent {ppath} does not exist", path=ppath)
        acls.check(parent.acl, PERM_DELETE, auth, ppath)
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

    def _set_data(self, op: SetData, auth: tuple[AuthId, ...], s: _Scratch) -> SetDataTxn:
        path = validate_path(op.path)
        self._data(op.data, path)
        node = s.node(path)
        if node is None:
            raise NoNodeError(f"{path} does not exist", path=path)
        acls.check(node.acl, PERM_WRITE, auth, path)
        _check_version(node, op.version, path)
        version = node.version + 1
        # (The hottest write: built field by field, as ``replace`` costs twice as much.)
        s.nodes[path] = NodeView(version, node.cversion, node.ephemeral_owner, node.num_children, node.aversion,
                                 node.acl, self.time_ms)
        return SetDataTxn(path, op.data, version)

    def _check(self, op: Check, auth: tuple[AuthId, ...], s: _Scratch) -> CheckTxn:
        path = validate_path(op.path)
        node = s.node(path)
        if node is None:
            raise NoNodeError(f"{path} does not exist", path=path)
        acls.check(node.acl, PERM_READ, auth, path)
        _check_version(node, op.version, path)
        return CheckTxn(path, op.version)

    def _set_acl(self, op: SetACL, auth: tuple[AuthId, ...], s: _Scratch) -> SetACLTxn:
        path = validate_path(op.path)
        acl = acls.fixup_acl(op.acl, auth, path, sasl=self._tree.sasl_acls)
        node = s.node(path)
        if node is None:
            raise NoNodeError(f"{path} does not exist", path=path)
        acls.check(node.acl, PERM_ADMIN, auth, path)
        if op.version != -1 and node.aversion != op.version:
            raise BadVersionError(
                f"{path}: expected ACL version {op.version}, znode has ACL version {node.aversion}", path=path
            )
        aversion = node.aversion + 1
        s.nodes[path] = replace(node, aversion=aversion, acl=acl)
        return SetACLTxn(path, acl, aversion)

    def _delete_container(self, op: DeleteContainer, now: int, s: _Scratch) -> DeleteContainerTxn:
        """Still eligible at ``now``? An empty container, or an empty TTL znode whose TTL has
        elapsed since its last modification (ZooKeeper's ContainerManager rules)."""
        path = validate_path(op.path)
        if path in SPECIAL_PATHS:
            raise BadArgumentsError(f"cannot delete {path}", path=path)
        node = s.node(path)
        if node is None:
            raise NoNodeError(f"{path} does not exist", path=path)
        if node.num_children:
            raise NotEmptyError(f"{path} has {node.num_children} children", path=path)
        kind = kind_of(node.ephemeral_owner)
        if kind is Kind.TTL:
            if now - node.mtime <= ttl_of(node.ephemeral_owner):
                raise BadVersionError(f"{path}: its ttl has not elapsed", path=path)
        elif kind is not Kind.CONTAINER:
            raise BadVersionError(f"{path} is neither a container nor a TTL znode", path=path)
        self._remove(path, s)
        return DeleteContainerTxn(path)

    def _create_session(self, op: CreateSession, sid: int, s: _Scratch) -> CreateSessionTxn:
        if sid == 0:
            raise BadArgumentsError("session id 0 is reserved")
        if sid >= SESSION_ID_LIMIT:
            raise BadArgumentsError(f"session id 0x{sid:x} must be below 2^63 (ZooKeeper's ids are Java longs)")
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
