"""Requests (what clients submit) and txns (what the leader proposes) as typed records.

Their encodings are in ``zabray.tree.ops`` (which re-exports everything here).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from zabray.fastinit import fast_inits
from zabray.tree import codes as zkcodes
from zabray.tree.errors import BadArgumentsError
from zabray.tree.znode import ACL, OPEN_ACL, TTL_MAX, AuthId


class OpCode(enum.IntEnum):
    ERROR = 0
    CREATE = 1
    DELETE = 2
    SET_DATA = 3
    CHECK = 4
    MULTI = 5
    CREATE_SESSION = 6
    CLOSE_SESSION = 7
    SYNC = 8
    SET_ACL = 9
    DELETE_CONTAINER = 10


# -- requests --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Create:
    """Create ``path`` (for sequential: the prefix; the 10-digit counter is appended).

    An ephemeral znode is owned by the request's session. ``acl`` is validated (and ``auth``
    entries expanded) by the leader. ``container``: removed by the leader once it had children
    and has none. ``ttl`` (ms, 1..2^40-1; -1: none): a persistent znode removed once it has no
    children and was not modified for longer than that. ``stat``: the result is (path, Stat),
    as for ZooKeeper's create2/createContainer/createTTL, instead of the path alone.
    ``data`` None is ZooKeeper's null (a Java client's ``null``): read back as None, 0 bytes long.
    """

    path: str
    data: bytes | None = b""
    ephemeral: bool = False
    sequential: bool = False
    acl: tuple[ACL, ...] = OPEN_ACL
    container: bool = False
    ttl: int = -1
    stat: bool = False


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes | None
    version: int = -1


@dataclass(frozen=True, slots=True)
class Check:
    """Fail unless ``path`` exists with ``version`` (-1: only that it exists). Mostly for multi."""

    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class SetACL:
    """Replace the ACL of ``path`` if its aversion is ``version`` (-1: any); the result is the Stat."""

    path: str
    acl: tuple[ACL, ...]
    version: int = -1


@dataclass(frozen=True, slots=True)
class DeleteContainer:
    """Delete an empty container or expired TTL znode (what the leader's container sweep
    submits); fails harmlessly (NO_NODE, NOT_EMPTY, BAD_VERSION) if it is no longer eligible
    at the request's time."""

    path: str


@dataclass(frozen=True, slots=True)
class Multi:
    """Create/Delete/SetData/Check ops applied atomically, in order: all succeed or none."""

    ops: tuple[Create | Delete | SetData | Check, ...]


@dataclass(frozen=True, slots=True)
class CreateSession:
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class CloseSession:
    pass


@dataclass(frozen=True, slots=True)
class Sync:
    """A no-op write: once a replica applies it, it has seen every write committed before it."""

    path: str = "/"


SubOp = Create | Delete | SetData | Check
Op = Create | Delete | SetData | Check | SetACL | Multi | CreateSession | CloseSession | Sync | DeleteContainer


@dataclass(frozen=True, slots=True)
class Request:
    """``op`` on behalf of ``session_id`` (0: no session), stamped ``time_ms`` by its submitter,
    by a requester holding the authenticated ids ``auth`` ((scheme, id) pairs)."""

    session_id: int
    time_ms: int
    op: Op
    auth: tuple[AuthId, ...] = ()


def create_op(
    opcode: int, path: str, data: bytes | None, acl: tuple[ACL, ...], flags: int, ttl: int = -1
) -> Create:
    """The Create for a ZooKeeper create/create2/createContainer/createTTL with CreateMode
    ``flags``, checked as ZooKeeper 3.8 checks mode and TTL (BadArgumentsError otherwise).

    createContainer makes a container whatever the ephemeral flag (sequential is kept);
    a CONTAINER mode through plain create/create2 makes a persistent znode, as in ZooKeeper.
    """
    try:
        mode = zkcodes.CreateMode(flags)
    except ValueError:
        raise BadArgumentsError(f"{path}: unknown create mode {flags}", path=path) from None
    if mode.ttl:
        if not 0 < ttl <= TTL_MAX:
            raise BadArgumentsError(f"{path}: ttl must be in 1..{TTL_MAX}, got {ttl}", path=path)
    elif ttl >= 0:
        raise BadArgumentsError(f"{path}: a ttl is not valid for mode {mode.name}", path=path)
    stat = opcode != zkcodes.OpCode.CREATE
    if opcode == zkcodes.OpCode.CREATE_CONTAINER:
        return Create(path, data, False, mode.sequential, acl, container=True, stat=True)
    if opcode == zkcodes.OpCode.CREATE_TTL:
        return Create(path, data, False, mode.sequential, acl, ttl=ttl, stat=True)
    if opcode not in (zkcodes.OpCode.CREATE, zkcodes.OpCode.CREATE2):
        raise BadArgumentsError(f"opcode {opcode} is not a create")
    return Create(path, data, mode.ephemeral, mode.sequential, acl, stat=stat)


# -- txns --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateTxn:
    """Create ``path`` (already resolved); the parent's cversion (creations) becomes
    ``parent_cversion``. ``ephemeral_owner`` is the stored owner (session, container or TTL
    marker); ``acl`` the validated ACL; ``stat``: the result is (path, Stat)."""

    path: str
    data: bytes | None
    ephemeral_owner: int
    parent_cversion: int
    acl: tuple[ACL, ...] = OPEN_ACL
    stat: bool = False


@dataclass(frozen=True, slots=True)
class DeleteTxn:
    path: str


@dataclass(frozen=True, slots=True)
class SetDataTxn:
    """Set the data; the znode's version becomes ``version``."""

    path: str
    data: bytes | None
    version: int


@dataclass(frozen=True, slots=True)
class CheckTxn:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class SetACLTxn:
    """Set the ACL; the znode's aversion becomes ``aversion``."""

    path: str
    acl: tuple[ACL, ...]
    aversion: int


@dataclass(frozen=True, slots=True)
class DeleteContainerTxn:
    path: str


@dataclass(frozen=True, slots=True)
class MultiTxn:
    txns: tuple[CreateTxn | DeleteTxn | SetDataTxn | CheckTxn, ...]


@dataclass(frozen=True, slots=True)
class CreateSessionTxn:
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class CloseSessionTxn:
    """Close the session, deleting ``paths``: exactly its ephemerals, sorted."""

    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SyncTxn:
    path: str


@dataclass(frozen=True, slots=True)
class ErrorTxn:
    """The request failed with ``code``; ``op`` is its OpCode (0 if it did not decode) and
    ``index`` the failing op of a multi."""

    op: int
    code: str
    message: str
    path: str | None = None
    index: int | None = None


TxnBody = (
    CreateTxn
    | DeleteTxn
    | SetDataTxn
    | CheckTxn
    | SetACLTxn
    | DeleteContainerTxn
    | MultiTxn
    | CreateSessionTxn
    | CloseSessionTxn
    | SyncTxn
    | ErrorTxn
)


@dataclass(frozen=True, slots=True)
class TxnRecord:
    time_ms: int
    session_id: int
    body: TxnBody


fast_inits(globals())  # built on every message or write: see zabray.fastinit
