"""What goes in and out of the ZooKeeper service core (``zabray.zk.service``).

Protocol-neutral: requests are ZooKeeper's operations as typed records (writes reuse the data
tree's ``Create``/``Delete``/``SetData``/``Check``/``Multi``/``Sync``/``CloseSession``),
replies carry ZooKeeper's error codes and plain values (``Stat``, paths, bytes). A wire
protocol (today the bespoke msgpack one in ``zabray.wire.bespoke``; later ZooKeeper's jute)
maps its frames onto these. A connection is an opaque int the host chose.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zabray.fastinit import fast_inits
from zabray.tree import AuthId, Check, CloseSession, Create, Delete, Multi, SetACL, SetData, Sync

# -- requests (a client's, on one connection) -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Watches:
    """Watches a moving session re-registers (ZooKeeper's SetWatches): paths per kind."""

    data: tuple[str, ...] = ()
    exist: tuple[str, ...] = ()
    child: tuple[str, ...] = ()
    persistent: tuple[str, ...] = ()
    recursive: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Connect:
    """Open (``session_id`` 0) or resume a session; ``last_zxid`` is the newest zxid it saw.
    ``auth``: the connection's own ids (ZooKeeper gives every connection ("ip", its address)).
    ``watches_since``: the zxid ``watches`` are re-registered from (ZooKeeper's SetWatches
    relativeZxid), when it differs from ``last_zxid``: a client has every notification of a
    change at or below the newest *reply* it got, but a notification at zxid Z may have come
    without the others Z fired before its connection broke. ``read_only``: the client accepts a
    read-only session (ZooKeeper's ConnectRequest readOnly flag, kazoo's ``read_only=True``,
    the Java client's ``canBeReadOnly``). The answer's value is (session id, negotiated
    timeout, whether the session is read-only)."""

    session_id: int
    timeout_ms: int
    last_zxid: int
    watches: Watches = Watches()
    auth: tuple[AuthId, ...] = ()
    watches_since: int | None = None
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class SetWatches:
    """ZooKeeper's SetWatches(2), sent by a client right after it resumed its session here."""

    last_zxid: int
    watches: Watches


@dataclass(frozen=True, slots=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True)
class GetData:
    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class Exists:
    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class GetChildren:
    """``stat``: getChildren2, the answer is (children, Stat) rather than the children alone."""

    path: str
    watch: bool = False
    stat: bool = False


@dataclass(frozen=True, slots=True)
class GetACL:
    path: str


@dataclass(frozen=True, slots=True)
class GetAllChildrenNumber:
    path: str


@dataclass(frozen=True, slots=True)
class GetEphemerals:
    """The session's own ephemerals whose path starts with ``prefix``."""

    prefix: str = "/"


@dataclass(frozen=True, slots=True)
class MultiRead:
    """("get", path) / ("children", path) ops; each answered with its value or its own error."""

    ops: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class AddAuth:
    """ZooKeeper's addAuth: more ids for this connection; a bad credential is AUTH_FAILED and
    the connection is closed."""

    scheme: str
    credential: bytes | None


@dataclass(frozen=True, slots=True)
class Sasl:
    """A SASL token from the client (ZooKeeper's opcode 102: DIGEST-MD5 here). ``nonce`` is the
    connection's own, fresh and unguessable, drawn by the shell: the service has no randomness.
    Answered with the server's token; a failure is AUTH_FAILED and the connection is closed."""

    token: bytes
    nonce: str = ""


@dataclass(frozen=True, slots=True)
class WhoAmI:
    pass


@dataclass(frozen=True, slots=True)
class AddWatch:
    path: str
    recursive: bool = False


@dataclass(frozen=True, slots=True)
class CheckWatches:
    """``kind``: a ``zabray.zk.watches.WatchKind`` value; NO_WATCHER if there is none."""

    path: str
    kind: int


@dataclass(frozen=True, slots=True)
class RemoveWatches:
    path: str
    kind: int


@dataclass(frozen=True, slots=True)
class Unimplemented:
    """An operation this service does not offer: answered ``code`` (UNIMPLEMENTED, or for reconfig
    RECONFIG_DISABLED, what ZooKeeper 3.8 answers with its default reconfigEnabled=false)."""

    what: str
    code: str = "UNIMPLEMENTED"


@dataclass(frozen=True, slots=True)
class Malformed:
    """A frame the wire protocol could not make a request of: answered BAD_ARGUMENTS in order."""

    message: str


Read = (GetData | Exists | GetChildren | GetACL | GetAllChildrenNumber | GetEphemerals | MultiRead | AddAuth
        | Sasl | WhoAmI | AddWatch | CheckWatches | RemoveWatches | SetWatches)
"""Answered from this replica's tree and tables, in order behind the connection's earlier requests."""
Write = Create | Delete | SetData | SetACL | Check | Multi | Sync | CloseSession
ClientOp = Connect | Ping | Read | Write | Malformed | Unimplemented


# -- events into the service ----------------------------------------------------------------------


class ServiceEvent:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ConnClosed(ServiceEvent):
    conn: int


@dataclass(frozen=True, slots=True)
class ClientRequest(ServiceEvent):
    conn: int
    xid: int
    op: ClientOp


@dataclass(frozen=True, slots=True)
class TxnDelivered(ServiceEvent):
    """The core delivered a txn (``result`` is the tree's ``Result``; None for a replay)."""

    result: Any


@dataclass(frozen=True, slots=True)
class TxnCommitted(ServiceEvent):
    """This replica's request ``rid`` committed as ``zxid`` (and was delivered here)."""

    rid: int
    zxid: int
    result: Any


@dataclass(frozen=True, slots=True)
class TxnFailed(ServiceEvent):
    """Request ``rid`` did not commit here; ``uncertain``: it may still commit elsewhere."""

    rid: int
    reason: str
    uncertain: bool


@dataclass(frozen=True, slots=True)
class SessionsAlive(ServiceEvent):
    """Leader only: these sessions were heard of (here or at a learner)."""

    sessions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ServiceTick(ServiceEvent):
    """Time passes: ``now_ms`` (never decreasing) is the only clock the service knows."""

    now_ms: int


@dataclass(frozen=True, slots=True)
class RoleChanged(ServiceEvent):
    """``serving``: the core is in broadcast (leading, following or observing); ``leading``:
    it is the established leader; ``looking``: it is in leader election (and holds its disk's
    state: not rejoining), the only time a replica may serve read-only sessions."""

    serving: bool
    leading: bool
    looking: bool = False


@dataclass(frozen=True, slots=True)
class StepEnd(ServiceEvent):
    """Every action of one core step was fed in: reads held behind it may run now."""


# -- actions out of the service -------------------------------------------------------------------


class ServiceAction:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    code: str
    message: str
    path: str | None = None
    index: int | None = None


@dataclass(frozen=True, slots=True)
class Reply(ServiceAction):
    """The answer to request ``xid`` on ``conn``; ``zxid``: this replica's tree when it was made
    (the txn's zxid for a write)."""

    conn: int
    xid: int
    zxid: int
    error: ErrorInfo | None
    value: Any = None


@dataclass(frozen=True, slots=True)
class WatchFired(ServiceAction):
    """``kind`` "data" (get/exists watches) or "child"; ``event`` an ``EventType`` value."""

    conn: int
    kind: str
    path: str
    event: str
    zxid: int


@dataclass(frozen=True, slots=True)
class SessionEnded(ServiceAction):
    """The session on ``conn`` expired (its close committed without the client asking)."""

    conn: int
    session_id: int
    zxid: int


@dataclass(frozen=True, slots=True)
class SubmitTxn(ServiceAction):
    """Hand ``request`` (tree request bytes) to the core as its request ``rid``."""

    rid: int
    request: bytes


@dataclass(frozen=True, slots=True)
class ReportTouches(ServiceAction):
    """Tell the core these sessions are alive (it forwards them to the leader)."""

    sessions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CloseConn(ServiceAction):
    conn: int


__all__ = [
    "Check", "CloseSession", "Create", "Delete", "Multi", "SetACL", "SetData", "Sync",
    "Watches", "Connect", "SetWatches", "Ping", "Malformed", "Unimplemented", "GetData", "Exists", "GetChildren",
    "GetACL", "GetAllChildrenNumber", "GetEphemerals", "MultiRead", "AddAuth", "Sasl", "WhoAmI", "AddWatch",
    "CheckWatches", "RemoveWatches", "Read", "Write", "ClientOp",
    "ServiceEvent", "ConnClosed", "ClientRequest", "TxnDelivered", "TxnCommitted", "TxnFailed",
    "SessionsAlive", "ServiceTick", "RoleChanged", "StepEnd",
    "ServiceAction", "ErrorInfo", "Reply", "WatchFired", "SessionEnded", "SubmitTxn", "ReportTouches",
    "CloseConn",
]


fast_inits(globals())  # built on every message or write: see zabray.fastinit
