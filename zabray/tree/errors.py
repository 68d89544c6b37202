"""ZooKeeper's client-visible failures, each with a stable ``code`` string.

These are the outcomes of a *well-formed* request against the tree (bad version, no node...):
the leader records them in an error txn, every replica applies that txn as a no-op, and the
replica that owns the request raises the typed exception to its client. The ``code`` is what
travels in txns, so codes are never renamed or reused.
"""

from __future__ import annotations

from zabray.errors import ZabError
from zabray.tree.codes import Err


class ZooKeeperError(ZabError):
    """Base of every ZooKeeper-level failure.

    ``path`` names the znode the failure is about (when there is one); ``index`` is the
    position of the failing op inside a multi (``None`` outside a multi).
    """

    code: str = "ZOOKEEPER_ERROR"

    def __init__(self, message: str, *, path: str | None = None, index: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.index = index

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only attributes survive pickling (results may cross process boundaries).
        return (_rebuild, (self.code, self.message, self.path, self.index))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ZooKeeperError):
            return NotImplemented
        return (self.code, self.message, self.path, self.index) == (
            other.code,
            other.message,
            other.path,
            other.index,
        )

    def __hash__(self) -> int:
        return hash((self.code, self.message, self.path, self.index))

    @property
    def zk_err(self) -> int:
        """ZooKeeper's numeric code for this failure (``KeeperException.Code``)."""
        return zk_code(self.code)


class NoNodeError(ZooKeeperError):
    """The znode (or, for create, its parent) does not exist."""

    code = "NO_NODE"


class NodeExistsError(ZooKeeperError):
    """Create of a path that already exists (sequential names can collide with manual ones)."""

    code = "NODE_EXISTS"


class BadVersionError(ZooKeeperError):
    """The expected version (not -1) differs from the znode's version."""

    code = "BAD_VERSION"


class NotEmptyError(ZooKeeperError):
    """Delete of a znode that has children (committed or pending)."""

    code = "NOT_EMPTY"


class NoChildrenForEphemeralsError(ZooKeeperError):
    """Create under an ephemeral znode: ephemerals cannot have children."""

    code = "NO_CHILDREN_FOR_EPHEMERALS"


class BadArgumentsError(ZooKeeperError):
    """The request itself is invalid: a malformed path, a bad field, an undecodable request."""

    code = "BAD_ARGUMENTS"


class DataTooLargeError(ZooKeeperError):
    """The znode data exceeds the tree's limit (1 MiB by default)."""

    code = "DATA_TOO_LARGE"


class SessionExpiredError(ZooKeeperError):
    """The session is not (or no longer) live in the tree: closed, expired or never created."""

    code = "SESSION_EXPIRED"


class SessionExistsError(ZooKeeperError):
    """create_session for a session id that is already live."""

    code = "SESSION_EXISTS"


class NoAuthError(ZooKeeperError):
    """The requester's auth ids grant none of the permissions the operation needs on the znode's ACL."""

    code = "NO_AUTH"


class InvalidACLError(ZooKeeperError):
    """An ACL that is empty, names an unknown scheme or a malformed id, or uses ``auth`` without
    any authenticated (digest) identity."""

    code = "INVALID_ACL"


class AuthFailedError(ZooKeeperError):
    """Authentication with an unknown scheme or bad credentials (the service closes the connection)."""

    code = "AUTH_FAILED"


class RuntimeInconsistencyError(ZooKeeperError):
    """An op of a failed multi after the failing one (ZooKeeper's per-op RUNTIME_INCONSISTENCY)."""

    code = "RUNTIME_INCONSISTENCY"


class UnimplementedError(ZooKeeperError):
    """An operation or mode the tree does not implement."""

    code = "UNIMPLEMENTED"


class SessionMovedError(ZooKeeperError):
    """The session is owned by another replica (raised by the session layer, not the tree)."""

    code = "SESSION_MOVED"


class NoWatcherError(ZooKeeperError):
    """checkWatches/removeWatches named a watch the session does not hold (raised by the service)."""

    code = "NO_WATCHER"


ERRORS: dict[str, type[ZooKeeperError]] = {
    cls.code: cls
    for cls in (
        ZooKeeperError,
        NoNodeError,
        NodeExistsError,
        BadVersionError,
        NotEmptyError,
        NoChildrenForEphemeralsError,
        BadArgumentsError,
        DataTooLargeError,
        SessionExpiredError,
        SessionExistsError,
        SessionMovedError,
        NoAuthError,
        InvalidACLError,
        AuthFailedError,
        RuntimeInconsistencyError,
        UnimplementedError,
        NoWatcherError,
    )
}

#: ZooKeeper's numeric error code (``KeeperException.Code``) for each code string.
#: Every ``Err`` name maps to itself; DATA_TOO_LARGE (ZooKeeper refuses such data as a bad
#: request) and the tree-internal codes map to the nearest ZooKeeper code.
ZK_CODES: dict[str, Err] = {
    **Err.__members__,
    "ZOOKEEPER_ERROR": Err.SYSTEM_ERROR,
    "DATA_TOO_LARGE": Err.BAD_ARGUMENTS,
    "SESSION_EXISTS": Err.SYSTEM_ERROR,
}


def zk_code(code: str) -> int:
    """ZooKeeper's numeric error code for a tree error code (SYSTEM_ERROR for one it lacks)."""
    return int(ZK_CODES.get(code, Err.SYSTEM_ERROR))


def error_for_code(
    code: str, message: str, *, path: str | None = None, index: int | None = None
) -> ZooKeeperError:
    """The typed exception for ``code``; an unknown code gives a plain ``ZooKeeperError``."""
    cls = ERRORS.get(code)
    if cls is None:
        err = ZooKeeperError(message, path=path, index=index)
        err.code = code
        return err
    return cls(message, path=path, index=index)


def _rebuild(code: str, message: str, path: str | None, index: int | None) -> ZooKeeperError:
    return error_for_code(code, message, path=path, index=index)
