"""The ZooKeeper data tree: znodes, live sessions and their ephemerals, as a Zab state machine.

``apply`` is deterministic and never decides anything: the txn (made by ``prepare`` on the
leader) already names the resolved paths, new versions and the ephemerals a close deletes. A
txn that does not fit the tree (a create of an existing path, a version that does not follow)
means the replicas have diverged or the log is corrupt, so it raises ``CorruptionError``
rather than guessing; the tree must then be rebuilt from a snapshot. Txns at or below the last
applied zxid are skipped, so replaying a log over a snapshot is safe.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

import msgpack

from zabray.errors import CorruptionError
from zabray.protocol.messages import Txn
from zabray.tree.errors import BadArgumentsError, NoNodeError, ZooKeeperError, error_for_code
from zabray.tree.ops import (
    CheckTxn,
    CloseSessionTxn,
    CreateSessionTxn,
    CreateTxn,
    DeleteTxn,
    ErrorTxn,
    MultiTxn,
    OpCode,
    SetDataTxn,
    SyncTxn,
    TxnBody,
    decode_txn,
)
from zabray.tree.paths import ROOT, name_of, parent_of, validate_path
from zabray.tree.processor import RequestProcessor
from zabray.tree.znode import ROOT_STAT, Change, EventType, NodeView, Stat

DEFAULT_MAX_DATA_BYTES = 1 << 20
SNAPSHOT_MAGIC = "zabray.tree"
SNAPSHOT_VERSION = 1

_U64 = 1 << 64
_I64 = 1 << 63
_I32 = 1 << 31

_OP_OF: dict[type, OpCode] = {
    CreateTxn: OpCode.CREATE,
    DeleteTxn: OpCode.DELETE,
    SetDataTxn: OpCode.SET_DATA,
    CheckTxn: OpCode.CHECK,
    MultiTxn: OpCode.MULTI,
    CreateSessionTxn: OpCode.CREATE_SESSION,
    CloseSessionTxn: OpCode.CLOSE_SESSION,
    SyncTxn: OpCode.SYNC,
}


@dataclass(frozen=True, slots=True)
class Result:
    """What applying one txn did.

    ``value`` is what the client gets on success: create → the created path, set_data → the
    new Stat, delete/check → None, multi → a tuple of those per op, create_session → the
    timeout, close_session → the deleted ephemeral paths (sorted), sync → the path.
    ``changes`` lists, in order and without repeats, the (path, event) pairs watches fire on.
    ``error`` is set (and ``changes`` empty) for an error txn: the request failed on the leader.
    ``op`` is None only for a request that did not even decode.
    """

    zxid: int
    op: OpCode | None
    session_id: int
    time_ms: int
    value: Any
    changes: tuple[Change, ...]
    error: ZooKeeperError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def unwrap(self) -> Any:
        """The value, or raise the typed ``ZooKeeperError`` the request failed with."""
        e = self.error
        if e is not None:
            raise error_for_code(e.code, e.message, path=e.path, index=e.index)
        return self.value


class _Node:
    """A committed znode. ``children`` holds child names (not paths)."""

    __slots__ = ("data", "stat", "children")

    def __init__(self, data: bytes, stat: Stat) -> None:
        self.data = data
        self.stat = stat
        self.children: set[str] = set()


def _corrupt(zxid: int, msg: str) -> CorruptionError:
    return CorruptionError(f"txn 0x{zxid:x} does not fit the tree: {msg}")


class DataTree:
    """The tree and the leader's request processor; implements ``StateMachine``."""

    def __init__(self, *, max_data_bytes: int = DEFAULT_MAX_DATA_BYTES) -> None:
        if type(max_data_bytes) is not int or max_data_bytes < 0:
            raise BadArgumentsError(f"max_data_bytes must be a non-negative int, got {max_data_bytes!r}")
        self.max_data_bytes = max_data_bytes
        self._nodes: dict[str, _Node] = {ROOT: _Node(b"", ROOT_STAT)}
        self._sessions: dict[int, int] = {}  # live session id -> timeout_ms
        self._ephemerals: dict[int, set[str]] = {}  # live session id -> paths it owns
        self._last_zxid = 0
        self._processor = RequestProcessor(self)

    # -- reads (served locally, never through Zab) ---------------------------------------------

    @property
    def last_zxid(self) -> int:
        """The zxid of the last txn applied (or of the snapshot restored)."""
        return self._last_zxid

    def _node(self, path: str) -> _Node:
        node = self._nodes.get(validate_path(path))
        if node is None:
            raise NoNodeError(f"{path} does not exist", path=path)
        return node

    def get(self, path: str) -> tuple[bytes, Stat]:
        """Data and Stat of ``path``; raises NoNodeError / BadArgumentsError."""
        node = self._node(path)
        return node.data, node.stat

    def stat(self, path: str) -> Stat:
        return self._node(path).stat

    def exists(self, path: str) -> Stat | None:
        node = self._nodes.get(validate_path(path))
        return None if node is None else node.stat

    def children(self, path: str) -> list[str]:
        """Child names of ``path``, sorted."""
        return sorted(self._node(path).children)

    def sessions(self) -> dict[int, int]:
        """Live sessions and their timeouts (ms): what a new leader's session tracker starts from."""
        return dict(sorted(self._sessions.items()))

    def ephemerals(self, session_id: int) -> list[str]:
        """Paths of the znodes ``session_id`` owns, sorted (empty for an unknown session)."""
        return sorted(self._ephemerals.get(session_id, ()))

    def __len__(self) -> int:
        """Number of znodes, the root included."""
        return len(self._nodes)

    @property
    def pending(self) -> int:
        """Prepared ok txns not yet applied (leader only)."""
        return self._processor.outstanding

    # -- the processor's view of the committed state --------------------------------------------

    def node_view(self, path: str) -> NodeView | None:
        node = self._nodes.get(path)
        if node is None:
            return None
        st = node.stat
        return NodeView(st.version, st.cversion, st.ephemeral_owner, st.num_children)

    def session_timeout(self, session_id: int) -> int | None:
        return self._sessions.get(session_id)

    def session_ephemerals(self, session_id: int) -> frozenset[str]:
        return frozenset(self._ephemerals.get(session_id, ()))

    # -- StateMachine ---------------------------------------------------------------------------

    def prepare(self, request: bytes, zxid: int) -> bytes:
        return self._processor.prepare(request, zxid)

    def abandon_prepared(self) -> None:
        self._processor.abandon()

    def apply(self, txn: Txn) -> Result | None:
        """Apply a committed txn; None if ``txn.zxid`` is not above ``last_zxid`` (a replay)."""
        z = int(txn.zxid)
        if z <= self._last_zxid:
            return None
        rec = decode_txn(txn.value)
        body = rec.body
        if type(body) is ErrorTxn:
            op = OpCode(body.op) if body.op else None
            err = error_for_code(body.code, body.message, path=body.path, index=body.index)
            result = Result(z, op, rec.session_id, rec.time_ms, None, (), err)
        else:
            changes: list[Change] = []
            value = self._apply_body(body, z, rec.time_ms, rec.session_id, changes)
            result = Result(
                z, _OP_OF[type(body)], rec.session_id, rec.time_ms, value, tuple(dict.fromkeys(changes))
            )
        self._last_zxid = z
        self._processor.applied(z)
        return result

    def _apply_body(self, b: TxnBody, z: int, t: int, sid: int, changes: list[Change]) -> Any:
        if isinstance(b, CreateTxn):
            return self._apply_create(b, z, t, changes)
        if isinstance(b, DeleteTxn):
            self._apply_delete(b.path, z, changes)
            return None
        if isinstance(b, SetDataTxn):
            return self._apply_set_data(b, z, t, changes)
        if isinstance(b, CheckTxn):
            node = self._nodes.get(b.path)
            if node is None or b.version not in (-1, node.stat.version):
                raise _corrupt(z, f"check of {b.path} fails")
            return None
        if isinstance(b, MultiTxn):
            return tuple(self._apply_body(s, z, t, sid, changes) for s in b.txns)
        if isinstance(b, CreateSessionTxn):
            if sid == 0 or sid in self._sessions:
                raise _corrupt(z, f"session 0x{sid:x} cannot be created")
            self._sessions[sid] = b.timeout_ms
            self._ephemerals[sid] = set()
            return b.timeout_ms
        if isinstance(b, CloseSessionTxn):
            owned = self._ephemerals.get(sid)
            if owned is None or owned != set(b.paths):
                raise _corrupt(z, f"close of session 0x{sid:x} does not list exactly its ephemerals")
            for p in b.paths:
                self._apply_delete(p, z, changes)
            del self._sessions[sid]
            del self._ephemerals[sid]
            return b.paths
        if isinstance(b, SyncTxn):
            return b.path
        raise _corrupt(z, f"unexpected body {type(b).__name__}")

    def _apply_create(self, b: CreateTxn, z: int, t: int, changes: list[Change]) -> str:
        path = b.path
        ppath = parent_of(path)
        parent = self._nodes.get(ppath)
        if parent is None or path in self._nodes:
            raise _corrupt(z, f"create of {path}: parent missing or node exists")
        pst = parent.stat
        if pst.ephemeral_owner or b.parent_cversion != pst.cversion + 1:
            raise _corrupt(z, f"create of {path}: parent is ephemeral or cversion does not follow")
        owner = b.ephemeral_owner
        if owner:
            owned = self._ephemerals.get(owner)
            if owned is None:
                raise _corrupt(z, f"ephemeral {path} for session 0x{owner:x}, which is not live")
            owned.add(path)
        self._nodes[path] = _Node(b.data, Stat(z, z, t, t, 0, 0, 0, owner, len(b.data), 0, z))
        parent.children.add(name_of(path))
        parent.stat = replace(pst, cversion=b.parent_cversion, pzxid=z, num_children=pst.num_children + 1)
        changes.append(Change(path, EventType.CREATED))
        changes.append(Change(ppath, EventType.CHILD))
        return path

    def _apply_delete(self, path: str, z: int, changes: list[Change]) -> None:
        node = self._nodes.get(path)
        ppath = parent_of(path)
        parent = self._nodes.get(ppath)
        if node is None or parent is None or node.children:
            raise _corrupt(z, f"delete of {path}: missing or has children")
        del self._nodes[path]
        parent.children.discard(name_of(path))
        pst = parent.stat
        parent.stat = replace(pst, pzxid=z, num_children=pst.num_children - 1)
        owner = node.stat.ephemeral_owner
        if owner:
            owned = self._ephemerals.get(owner)
            if owned is not None:
                owned.discard(path)
        changes.append(Change(path, EventType.DELETED))
        changes.append(Change(ppath, EventType.CHILD))

    def _apply_set_data(self, b: SetDataTxn, z: int, t: int, changes: list[Change]) -> Stat:
        node = self._nodes.get(b.path)
        if node is None or b.version != node.stat.version + 1:
            raise _corrupt(z, f"set_data of {b.path}: missing or version does not follow")
        node.data = b.data
        node.stat = replace(node.stat, mzxid=z, mtime=t, version=b.version, data_length=len(b.data))
        changes.append(Change(b.path, EventType.CHANGED))
        return node.stat

    # -- snapshots ------------------------------------------------------------------------------

    def _content(self) -> tuple[list[list[Any]], list[list[int]]]:
        nodes = [[p, self._nodes[p].data, *self._nodes[p].stat.as_tuple()] for p in sorted(self._nodes)]
        sessions = [[s, self._sessions[s]] for s in sorted(self._sessions)]
        return nodes, sessions

    def snapshot(self) -> bytes:
        """Deterministic encoding of the committed tree, sessions and last zxid, checksummed.

        ``[MAGIC, VERSION, blake2b-128(body), body]`` with body = msgpack of
        ``[last_zxid, [[path, data, *stat] sorted by path], [[session_id, timeout_ms] sorted]]``.
        Pending prepared state is not part of it.
        """
        nodes, sessions = self._content()
        body = msgpack.packb([self._last_zxid, nodes, sessions], use_bin_type=True)
        check = hashlib.blake2b(body, digest_size=16).digest()
        return msgpack.packb([SNAPSHOT_MAGIC, SNAPSHOT_VERSION, check, body], use_bin_type=True)

    def restore(self, data: bytes) -> None:
        """Replace the whole state with a snapshot's (and drop pending prepared state).

        Raises ``CorruptionError`` (leaving the tree untouched) if the snapshot fails its
        checksum or does not describe a consistent tree.
        """
        last, nodes, sessions, ephemerals = _decode_snapshot(data)
        self._nodes, self._sessions, self._ephemerals = nodes, sessions, ephemerals
        self._last_zxid = last
        self._processor.abandon()

    def digest(self) -> str:
        """Stable hex digest of the content (znodes with data and stat, sessions with timeouts).

        The last zxid is not part of it: compare it separately.
        """
        h = hashlib.blake2b(digest_size=32)
        nodes, sessions = self._content()
        for n in nodes:
            h.update(msgpack.packb(n, use_bin_type=True))
        h.update(msgpack.packb("sessions"))
        for s in sessions:
            h.update(msgpack.packb(s))
        return h.hexdigest()


def _decode_snapshot(data: bytes) -> tuple[int, dict[str, _Node], dict[int, int], dict[int, set[str]]]:
    def bad(msg: str) -> CorruptionError:
        return CorruptionError(f"bad tree snapshot: {msg}")

    def int_(v: Any, lo: int, hi: int, what: str) -> int:
        if type(v) is not int or not lo <= v < hi:
            raise bad(f"{what} out of range: {v!r:.40}")
        return v

    if type(data) is not bytes:
        raise bad(f"expected bytes, got {type(data).__name__}")
    try:
        outer = msgpack.unpackb(data, raw=False)
        if type(outer) is not list or len(outer) != 4:
            raise bad("not a [magic, version, checksum, body] list")
        magic, version, check, body = outer
        if magic != SNAPSHOT_MAGIC:
            raise bad(f"wrong magic {magic!r:.40}")
        if version != SNAPSHOT_VERSION or type(version) is not int:
            raise bad(f"unsupported version {version!r:.20}")
        if type(body) is not bytes or type(check) is not bytes:
            raise bad("checksum and body must be bytes")
        if hashlib.blake2b(body, digest_size=16).digest() != check:
            raise bad("checksum mismatch")
        content = msgpack.unpackb(body, raw=False)
    except CorruptionError:
        raise
    except Exception as e:  # msgpack raises several unrelated types on garbage
        raise bad(f"undecodable ({type(e).__name__}: {e})") from None
    if type(content) is not list or len(content) != 3:
        raise bad("body is not [last_zxid, nodes, sessions]")
    last_raw, node_rows, session_rows = content
    last = int_(last_raw, 0, _U64, "last zxid")
    if type(node_rows) is not list or type(session_rows) is not list:
        raise bad("nodes and sessions must be lists")

    sessions: dict[int, int] = {}
    prev = 0
    for row in session_rows:
        if type(row) is not list or len(row) != 2:
            raise bad("session row is not [id, timeout]")
        sid = int_(row[0], 1, _U64, "session id")
        if sid <= prev:
            raise bad("sessions not sorted or repeated")
        prev = sid
        sessions[sid] = int_(row[1], 1, _I32, "session timeout")
    ephemerals: dict[int, set[str]] = {sid: set() for sid in sessions}

    nodes: dict[str, _Node] = {}
    prev_path = ""
    for row in node_rows:
        if type(row) is not list or len(row) != 13:
            raise bad("node row is not [path, data, *stat]")
        path, ndata = row[0], row[1]
        if type(path) is not str or type(ndata) is not bytes:
            raise bad("node path/data of the wrong type")
        try:
            validate_path(path)
        except BadArgumentsError as e:
            raise bad(str(e)) from None
        if path <= prev_path:
            raise bad("nodes not sorted by path or repeated")
        prev_path = path
        stat = Stat(*(int_(v, -_I64, _I64, "stat field") for v in row[2:]))
        if stat.data_length != len(ndata):
            raise bad(f"{path}: data_length {stat.data_length} != {len(ndata)}")
        node = _Node(ndata, stat)
        if path == ROOT:
            if stat.ephemeral_owner:
                raise bad("the root cannot be ephemeral")
        else:
            parent = nodes.get(parent_of(path))  # sorting puts every parent before its children
            if parent is None:
                raise bad(f"{path}: parent missing")
            if parent.stat.ephemeral_owner:
                raise bad(f"{path}: parent is ephemeral")
            parent.children.add(name_of(path))
        owner = stat.ephemeral_owner
        if owner:
            owned = ephemerals.get(owner)
            if owned is None:
                raise bad(f"{path}: owner session 0x{owner:x} is not live")
            owned.add(path)
        nodes[path] = node
    if ROOT not in nodes:
        raise bad("no root")
    for path, node in nodes.items():
        if node.stat.num_children != len(node.children):
            raise bad(f"{path}: num_children {node.stat.num_children} != {len(node.children)}")
    return last, nodes, sessions, ephemerals
