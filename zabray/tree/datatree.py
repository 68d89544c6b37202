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
from zabray.fastinit import fast_inits
from zabray.protocol.messages import Txn
from zabray.tree import acl as acls
from zabray.tree import quotas
from zabray.tree.errors import (
    BadArgumentsError,
    NoNodeError,
    RuntimeInconsistencyError,
    ZooKeeperError,
    error_for_code,
)
from zabray.tree.image import TreeImage
from zabray.tree.ops import (
    CheckTxn,
    CloseSessionTxn,
    CreateSessionTxn,
    CreateTxn,
    DeleteContainerTxn,
    DeleteTxn,
    ErrorTxn,
    MultiTxn,
    OpCode,
    SetACLTxn,
    SetDataTxn,
    SyncTxn,
    TxnBody,
    decode_txn,
)
from zabray.tree.paths import CONFIG, QUOTA, ROOT, SPECIAL_PATHS, ZOOKEEPER, name_of, parent_of, validate_path
from zabray.tree.processor import RequestProcessor
from zabray.tree.restore import Restored, TreeRestore
from zabray.tree.snapshot import (
    Node,
    encode_snapshot,
    node_row,
)
from zabray.tree.znode import (
    ACL,
    OPEN_ACL,
    PERM_ADMIN,
    PERM_READ,
    READ_ACL,
    AuthId,
    Change,
    EventType,
    Kind,
    NodeView,
    Stat,
    client_stat,
    kind_of,
    ttl_of,
)

DEFAULT_MAX_DATA_BYTES = 1 << 20

_OP_OF: dict[type, OpCode] = {
    CreateTxn: OpCode.CREATE,
    DeleteTxn: OpCode.DELETE,
    SetDataTxn: OpCode.SET_DATA,
    CheckTxn: OpCode.CHECK,
    MultiTxn: OpCode.MULTI,
    CreateSessionTxn: OpCode.CREATE_SESSION,
    CloseSessionTxn: OpCode.CLOSE_SESSION,
    SyncTxn: OpCode.SYNC,
    SetACLTxn: OpCode.SET_ACL,
    DeleteContainerTxn: OpCode.DELETE_CONTAINER,
}


@dataclass(frozen=True, slots=True)
class Result:
    """What applying one txn did.

    ``value`` is what the client gets on success: create → the created path (or (path, Stat)
    when the request asked for the stat), set_data and set_acl → the new Stat,
    delete/delete_container/check → None, multi → a tuple of those per op, create_session →
    the timeout, close_session → the deleted ephemeral paths (sorted), sync → the path.
    ``changes`` lists, in order, the (path, event) pairs watches fire on: one per change,
    repeats kept (a multi's two creates under one parent are two CHILD firings, and ZooKeeper
    tells a persistent watch of each).
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

    def op_errors(self, n_ops: int) -> tuple[str, ...]:
        """The per-op codes of a multi of ``n_ops`` ops, as ZooKeeper reports a failed multi:
        OK before the failing op (rolled back), its code, then RUNTIME_INCONSISTENCY; all OK on
        success. A multi that failed as a whole (no index) reports its code for every op."""
        e = self.error
        if e is None:
            return ("OK",) * n_ops
        if e.index is None:
            return (e.code,) * n_ops
        return tuple(
            "OK" if i < e.index else e.code if i == e.index else RuntimeInconsistencyError.code
            for i in range(n_ops)
        )



def _corrupt(zxid: int, msg: str) -> CorruptionError:
    return CorruptionError(f"txn 0x{zxid:x} does not fit the tree: {msg}")


class DataTree:
    """The tree and the leader's request processor; implements ``StateMachine``."""

    def __init__(self, *, max_data_bytes: int = DEFAULT_MAX_DATA_BYTES, sasl_acls: bool = False) -> None:
        """``sasl_acls``: ACLs may name the ``sasl`` scheme (the ensemble authenticates with
        SASL); every replica of an ensemble must agree, as its config does."""
        if type(max_data_bytes) is not int or max_data_bytes < 0:
            raise BadArgumentsError(f"max_data_bytes must be a non-negative int, got {max_data_bytes!r}")
        self.max_data_bytes = max_data_bytes
        self.sasl_acls = sasl_acls
        self._nodes: dict[str, Node] = _initial_nodes()
        self._sessions: dict[int, int] = {}  # live session id -> timeout_ms
        self._ephemerals: dict[int, set[str]] = {}  # live session id -> paths it owns
        self._containers: set[str] = set()
        self._ttls: set[str] = set()
        self._quotas: set[str] = set()  # paths with a quota (a limit znode): see zabray.tree.quotas
        self._last_zxid = 0
        self._processor = RequestProcessor(self)
        self._image: TreeImage | None = None  # a snapshot being encoded: told of each change
        self._data_bytes = _bytes_of(self._nodes)

    # -- reads (served locally, never through Zab) ---------------------------------------------

    @property
    def last_zxid(self) -> int:
        """The zxid of the last txn applied (or of the snapshot restored)."""
        return self._last_zxid

    @property
    def data_bytes(self) -> int:
        """Every znode's path and data length, summed (ZooKeeper's approximateDataSize, kept
        up to date as txns apply, as ZooKeeper keeps it, so ``mntr`` never walks the tree)."""
        return self._data_bytes

    def _node(self, path: str, auth: tuple[AuthId, ...] | None = None, perm: int = PERM_READ) -> Node:
        node = self._nodes.get(validate_path(path))
        if node is None:
            raise NoNodeError(f"{path} does not exist", path=path)
        if auth is not None:
            acls.check(node.acl, perm, auth, path)
        return node

    # Reads take the reader's auth ids: None skips the ACL check (the service's own reads),
    # a tuple checks READ as ZooKeeper's FinalRequestProcessor does (NoAuthError).

    def get(self, path: str, auth: tuple[AuthId, ...] | None = None) -> tuple[bytes | None, Stat]:
        """Data (None: created or set with ZooKeeper's null) and Stat of ``path``; raises
        NoNodeError / BadArgumentsError / NoAuthError."""
        node = self._node(path, auth)
        return node.data, client_stat(node.stat)

    def stat(self, path: str) -> Stat:
        return client_stat(self._node(path).stat)

    def exists(self, path: str) -> Stat | None:
        """The Stat, or None; exists needs no permission in ZooKeeper."""
        node = self._nodes.get(validate_path(path))
        return None if node is None else client_stat(node.stat)

    def children(self, path: str, auth: tuple[AuthId, ...] | None = None) -> list[str]:
        """Child names of ``path``, sorted."""
        return sorted(self._node(path, auth).children)

    def children2(self, path: str, auth: tuple[AuthId, ...] | None = None) -> tuple[list[str], Stat]:
        """getChildren2: the sorted child names and the Stat of ``path``."""
        node = self._node(path, auth)
        return sorted(node.children), client_stat(node.stat)

    def get_acl(self, path: str, auth: tuple[AuthId, ...] | None = None) -> tuple[tuple[ACL, ...], Stat]:
        """getACL: the ACL and Stat. A reader needs READ or ADMIN; without ADMIN it sees digest
        ids as ``user:x`` (ZooKeeper 3.8)."""
        node = self._node(path, auth, PERM_READ | PERM_ADMIN)
        shown = node.acl
        if auth is not None and not acls.allowed(node.acl, PERM_ADMIN, auth):
            shown = acls.redacted(shown)
        return shown, client_stat(node.stat)

    def all_children_number(self, path: str, auth: tuple[AuthId, ...] | None = None) -> int:
        """getAllChildrenNumber: how many znodes are below ``path`` (READ on ``path``)."""
        self._node(path, auth)
        if path == ROOT:
            return len(self._nodes) - 1
        prefix = path + "/"
        return sum(1 for p in self._nodes if p.startswith(prefix))

    def get_ephemerals(self, session_id: int, prefix: str = "/") -> list[str]:
        """getEphemerals: the session's ephemeral paths starting with ``prefix`` (a string
        prefix, as ZooKeeper matches it; blank or "/" means all), sorted."""
        owned = self._ephemerals.get(session_id, set())
        if prefix.strip() in ("", "/"):
            return sorted(owned)
        return sorted(p for p in owned if p.startswith(prefix))

    def multi_read(
        self, ops: list[tuple[str, str]], auth: tuple[AuthId, ...] | None = None
    ) -> list[tuple[bytes | None, Stat] | list[str] | ZooKeeperError]:
        """multiRead: ``ops`` are ("get", path) or ("children", path); each yields its result
        or its own error (ZooKeeper answers every op; one failing does not fail the others)."""
        out: list[tuple[bytes | None, Stat] | list[str] | ZooKeeperError] = []
        for kind, path in ops:
            try:
                if kind == "get":
                    out.append(self.get(path, auth))
                elif kind == "children":
                    out.append(self.children(path, auth))
                else:
                    raise BadArgumentsError(f"multi_read op must be 'get' or 'children', got {kind!r}")
            except ZooKeeperError as e:
                out.append(e)
        return out

    def expired(self, now_ms: int, *, max_never_used_ms: int = 0) -> list[str]:
        """Paths the leader should delete with ``delete_container`` at ``now_ms`` (ZooKeeper's
        ContainerManager): empty containers that had a child (or, if ``max_never_used_ms`` > 0,
        never had one for longer than that since their last change), and empty TTL znodes
        unchanged for longer than their TTL. Sorted; time comes from the caller."""
        out = []
        for p in self._containers:
            node = self._nodes[p]
            if node.children:
                continue
            if node.stat.cversion > 0 or (0 < max_never_used_ms < now_ms - node.stat.mtime):
                out.append(p)
        for p in self._ttls:
            node = self._nodes[p]
            if not node.children and now_ms - node.stat.mtime > ttl_of(node.stat.ephemeral_owner):
                out.append(p)
        return sorted(out)

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
        return NodeView(
            st.version, st.cversion, st.ephemeral_owner, st.num_children, st.aversion, node.acl, st.mtime
        )

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
        value = txn.value
        rec = self._processor.take_record(z, value) or decode_txn(value)
        body = rec.body
        if type(body) is ErrorTxn:
            op = OpCode(body.op) if body.op else None
            err = error_for_code(body.code, body.message, path=body.path, index=body.index)
            result = Result(z, op, rec.session_id, rec.time_ms, None, (), err)
        else:
            changes: list[Change] = []
            out = self._apply_body(body, z, rec.time_ms, rec.session_id, changes)
            result = Result(
                z, _OP_OF[type(body)], rec.session_id, rec.time_ms, out, tuple(changes)
            )
        self._last_zxid = z
        self._processor.applied(z)
        return result

    def _apply_body(self, b: TxnBody, z: int, t: int, sid: int, changes: list[Change]) -> Any:
        if type(b) is SetDataTxn:  # the hottest write first
            return self._apply_set_data(b, z, t, changes)
        if isinstance(b, CreateTxn):
            return self._apply_create(b, z, t, changes)
        if isinstance(b, DeleteTxn | DeleteContainerTxn):
            self._apply_delete(b.path, z, changes)
            return None
        if isinstance(b, SetDataTxn):
            return self._apply_set_data(b, z, t, changes)
        if isinstance(b, SetACLTxn):
            node = self._nodes.get(b.path)
            if node is None or b.aversion != node.stat.aversion + 1:
                raise _corrupt(z, f"set_acl of {b.path}: missing or aversion does not follow")
            if self._image is not None:
                self._image.keep(b.path, node)
            node.acl = b.acl
            node.stat = replace(node.stat, aversion=b.aversion)
            return client_stat(node.stat)
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

    def _apply_create(self, b: CreateTxn, z: int, t: int, changes: list[Change]) -> str | tuple[str, Stat]:
        path = b.path
        ppath = parent_of(path)
        parent = self._nodes.get(ppath)
        if parent is None or path in self._nodes:
            raise _corrupt(z, f"create of {path}: parent missing or node exists")
        pst = parent.stat
        if kind_of(pst.ephemeral_owner) is Kind.EPHEMERAL or b.parent_cversion != pst.cversion + 1:
            raise _corrupt(z, f"create of {path}: parent is ephemeral or cversion does not follow")
        owner = b.ephemeral_owner
        kind = kind_of(owner)
        if kind is Kind.EPHEMERAL:
            owned = self._ephemerals.get(owner)
            if owned is None:
                raise _corrupt(z, f"ephemeral {path} for session 0x{owner:x}, which is not live")
            owned.add(path)
        elif kind is Kind.CONTAINER:
            self._containers.add(path)
        elif kind is Kind.TTL:
            self._ttls.add(path)
        size = 0 if b.data is None else len(b.data)
        node = Node(b.data, Stat(z, z, t, t, 0, 0, 0, owner, size, 0, z), b.acl)
        if self._image is not None:
            self._image.keep(ppath, parent)
        self._nodes[path] = node
        self._data_bytes += len(path) + size
        parent.add_child(name_of(path))
        parent.stat = Stat(pst.czxid, pst.mzxid, pst.ctime, pst.mtime, pst.version, b.parent_cversion,
                           pst.aversion, pst.ephemeral_owner, pst.data_length, pst.num_children + 1, z)
        if ppath.startswith(QUOTA):
            self._quota_node_created(path)
        if self._quotas:
            self._count_in_quota(path, 1, size)
        changes.append(Change(path, EventType.CREATED, node.acl))
        changes.append(Change(ppath, EventType.CHILD, parent.acl))
        return (path, client_stat(node.stat)) if b.stat else path

    def _apply_delete(self, path: str, z: int, changes: list[Change]) -> None:
        node = self._nodes.get(path)
        ppath = parent_of(path)
        parent = self._nodes.get(ppath)
        if node is None or parent is None or node.children or path in SPECIAL_PATHS:
            raise _corrupt(z, f"delete of {path}: missing, special or has children")
        if self._image is not None:
            self._image.keep(path, node)
            self._image.keep(ppath, parent)
        del self._nodes[path]
        self._data_bytes -= len(path) + node.stat.data_length
        parent.remove_child(name_of(path))
        pst = parent.stat
        parent.stat = Stat(pst.czxid, pst.mzxid, pst.ctime, pst.mtime, pst.version, pst.cversion,
                           pst.aversion, pst.ephemeral_owner, pst.data_length, pst.num_children - 1, z)
        owner = node.stat.ephemeral_owner
        if owner:
            owned = self._ephemerals.get(owner)
            if owned is not None:
                owned.discard(path)
            self._containers.discard(path)
            self._ttls.discard(path)
        if self._quotas:
            self._quotas.discard(quotas.quota_of_limit_node(path) or "")
            self._count_in_quota(path, -1, -node.stat.data_length)
        changes.append(Change(path, EventType.DELETED, node.acl))
        changes.append(Change(ppath, EventType.CHILD, parent.acl))

    def _apply_set_data(self, b: SetDataTxn, z: int, t: int, changes: list[Change]) -> Stat:
        node = self._nodes.get(b.path)
        if node is None or b.version != node.stat.version + 1:
            raise _corrupt(z, f"set_data of {b.path}: missing or version does not follow")
        if self._image is not None:
            self._image.keep(b.path, node)
        data = b.data
        size = 0 if data is None else len(data)
        if self._quotas:
            self._count_in_quota(b.path, 0, size - node.stat.data_length)
        self._data_bytes += size - node.stat.data_length
        node.data = data
        st = node.stat  # (the hottest write: built field by field, twice as fast as ``replace``)
        node.stat = Stat(st.czxid, z, st.ctime, t, b.version, st.cversion, st.aversion, st.ephemeral_owner,
                         size, st.num_children, st.pzxid)
        changes.append(Change(b.path, EventType.CHANGED, node.acl))
        return client_stat(node.stat)

    # -- quotas (zabray.tree.quotas) -------------------------------------------------------------

    def _quota_node_created(self, path: str) -> None:
        """A limit znode puts a quota on its path; a stats znode starts from the subtree's size."""
        quota = quotas.quota_of_limit_node(path)
        if quota is not None:
            self._quotas.add(quota)
            return
        quota = quotas.quota_of_stat_node(path)
        if quota is not None:
            prefix = quota + "/"
            count = nbytes = 0
            for p, n in self._nodes.items():
                if p == quota or p.startswith(prefix):
                    count += 1
                    nbytes += n.stat.data_length
            self._set_stats(path, quotas.render({"count": count, "bytes": nbytes}))

    def _count_in_quota(self, path: str, count: int, nbytes: int) -> None:
        """Add to the stats of the deepest quota'd prefix of ``path`` (none for the root)."""
        p = path
        while p != ROOT:
            if p in self._quotas:
                stats = self._nodes.get(quotas.stat_path(p))
                if stats is not None:
                    self._set_stats(quotas.stat_path(p), quotas.adjusted(stats.data or b"", count, nbytes))
                return
            p = parent_of(p)

    def _set_stats(self, path: str, data: bytes) -> None:
        node = self._nodes[path]
        if self._image is not None:
            self._image.keep(path, node)
        node.data = data
        node.stat = replace(node.stat, data_length=len(data))  # no version, no mzxid: as ZooKeeper

    # -- snapshots ------------------------------------------------------------------------------

    def _content(self) -> tuple[list[list[Any]], list[list[int]]]:
        nodes = [node_row(p, self._nodes[p]) for p in sorted(self._nodes)]
        sessions = [[s, self._sessions[s]] for s in sorted(self._sessions)]
        return nodes, sessions

    def snapshot(self) -> bytes:
        """Deterministic, checksummed encoding of the committed tree (ACLs and the stored
        owners included), sessions and last zxid; see ``zabray.tree.snapshot``. Pending
        prepared state is not part of it."""
        nodes, sessions = self._content()
        return encode_snapshot(self._last_zxid, nodes, sessions)

    def image(self) -> TreeImage:
        """The committed tree as of now, to encode in slices while the tree moves on (see
        ``zabray.tree.image``); its bytes are what ``snapshot`` returns now. One at a time: a
        newer image makes the older one stale."""
        if self._image is not None:
            self._image.stale = True
        self._image = TreeImage(self._last_zxid, self._nodes, self._sessions, self._image_done)
        return self._image

    def _image_done(self, image: TreeImage) -> None:
        if self._image is image:
            self._image = None

    def restore(self, data: bytes) -> None:
        """Replace the whole state with a snapshot's (and drop pending prepared state), in one go.

        Raises ``CorruptionError`` (leaving the tree untouched) if the snapshot fails its
        checksum or does not describe a consistent tree; ``FormatVersionError`` for a snapshot
        of the older format 1.
        """
        r = self.restoring(data)
        r.decode_all()
        r.install()

    def restoring(self, data: bytes) -> TreeRestore:
        """A restore of ``data`` to decode in slices (``zabray.tree.restore``); the tree changes
        only at its ``install``. Raises ``CorruptionError`` at once for a malformed wrapper."""
        return TreeRestore(data, self._install)

    def _install(self, r: Restored) -> None:
        if self._image is not None:  # it reads the tree being replaced
            self._image.stale = True
            self._image = None
        self._nodes, self._sessions, self._ephemerals = r.nodes, r.sessions, r.ephemerals
        self._containers, self._ttls, self._quotas = r.containers, r.ttls, r.quotas
        self._last_zxid = r.last
        self._data_bytes = _bytes_of(self._nodes)
        self._processor.abandon()

    def digest(self) -> str:
        """Stable hex digest of the content (znodes with data, stat and ACL, sessions with
        timeouts). The last zxid is not part of it: compare it separately.
        """
        h = hashlib.blake2b(digest_size=32)
        nodes, sessions = self._content()
        for n in nodes:
            h.update(msgpack.packb(n, use_bin_type=True))
        h.update(msgpack.packb("sessions"))
        for s in sessions:
            h.update(msgpack.packb(s))
        return h.hexdigest()


def _bytes_of(nodes: dict[str, Node]) -> int:
    return sum(len(p) + n.stat.data_length for p, n in nodes.items())


def _initial_nodes() -> dict[str, Node]:
    """``/`` and ZooKeeper's own ``/zookeeper``, ``/zookeeper/quota`` and ``/zookeeper/config``
    (read-only, aversion -1), with the stats a fresh ZooKeeper 3.8 shows."""
    zero = Stat(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    root = Node(b"", replace(zero, num_children=1), OPEN_ACL)
    root.add_child("zookeeper")
    zk = Node(b"", replace(zero, num_children=2), OPEN_ACL)
    zk.add_child("quota")
    zk.add_child("config")
    return {
        ROOT: root,
        ZOOKEEPER: zk,
        QUOTA: Node(b"", zero, OPEN_ACL),
        CONFIG: Node(b"", replace(zero, aversion=-1), READ_ACL),
    }


fast_inits(globals())  # built on every message or write: see zabray.fastinit
