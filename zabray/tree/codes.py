"""ZooKeeper's client protocol numbers (3.8): opcodes, special xids, error codes, event types,
keeper states, create modes, permissions and watch modes.

The values are those of ZooKeeper's ``ZooDefs``, ``KeeperException.Code`` and
``Watcher.Event``; ``zabray.wire.zkproto`` re-exports them next to the records that carry them.
"""

from __future__ import annotations

import enum


class OpCode(enum.IntEnum):
    NOTIFICATION = 0
    CREATE = 1
    DELETE = 2
    EXISTS = 3
    GET_DATA = 4
    SET_DATA = 5
    GET_ACL = 6
    SET_ACL = 7
    GET_CHILDREN = 8
    SYNC = 9
    PING = 11
    GET_CHILDREN2 = 12
    CHECK = 13
    MULTI = 14
    CREATE2 = 15
    RECONFIG = 16
    CHECK_WATCHES = 17
    REMOVE_WATCHES = 18
    CREATE_CONTAINER = 19
    DELETE_CONTAINER = 20
    CREATE_TTL = 21
    MULTI_READ = 22
    AUTH = 100
    SET_WATCHES = 101
    SASL = 102
    GET_EPHEMERALS = 103
    GET_ALL_CHILDREN_NUMBER = 104
    SET_WATCHES2 = 105
    ADD_WATCH = 106
    WHO_AM_I = 107
    CREATE_SESSION = -10
    CLOSE_SESSION = -11
    ERROR = -1


class Xid(enum.IntEnum):
    """Reserved xids: a reply with one of these is not the answer to a numbered request."""

    NOTIFICATION = -1
    PING = -2
    AUTH = -4
    SET_WATCHES = -8


class Err(enum.IntEnum):
    """``KeeperException.Code`` values, as they travel in ``ReplyHeader.err``."""

    OK = 0
    SYSTEM_ERROR = -1
    RUNTIME_INCONSISTENCY = -2
    DATA_INCONSISTENCY = -3
    CONNECTION_LOSS = -4
    MARSHALLING_ERROR = -5
    UNIMPLEMENTED = -6
    OPERATION_TIMEOUT = -7
    BAD_ARGUMENTS = -8
    UNKNOWN_SESSION = -12
    NEW_CONFIG_NO_QUORUM = -13
    RECONFIG_IN_PROGRESS = -14
    API_ERROR = -100
    NO_NODE = -101
    NO_AUTH = -102
    BAD_VERSION = -103
    NO_CHILDREN_FOR_EPHEMERALS = -108
    NODE_EXISTS = -110
    NOT_EMPTY = -111
    SESSION_EXPIRED = -112
    INVALID_CALLBACK = -113
    INVALID_ACL = -114
    AUTH_FAILED = -115
    SESSION_MOVED = -118
    NOT_READ_ONLY = -119
    EPHEMERAL_ON_LOCAL_SESSION = -120
    NO_WATCHER = -121
    REQUEST_TIMEOUT = -122
    RECONFIG_DISABLED = -123
    SESSION_CLOSED_REQUIRE_SASL_AUTH = -124
    QUOTA_EXCEEDED = -125
    THROTTLED_OP = -127


class EventType(enum.IntEnum):
    NONE = -1
    NODE_CREATED = 1
    NODE_DELETED = 2
    NODE_DATA_CHANGED = 3
    NODE_CHILDREN_CHANGED = 4
    DATA_WATCH_REMOVED = 5
    CHILD_WATCH_REMOVED = 6
    PERSISTENT_WATCH_REMOVED = 7


class KeeperState(enum.IntEnum):
    DISCONNECTED = 0
    SYNC_CONNECTED = 3
    AUTH_FAILED = 4
    CONNECTED_READ_ONLY = 5
    SASL_AUTHENTICATED = 6
    EXPIRED = -112
    CLOSED = 7


class CreateMode(enum.IntEnum):
    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3
    CONTAINER = 4
    PERSISTENT_WITH_TTL = 5
    PERSISTENT_SEQUENTIAL_WITH_TTL = 6

    @property
    def ephemeral(self) -> bool:
        return self in (CreateMode.EPHEMERAL, CreateMode.EPHEMERAL_SEQUENTIAL)

    @property
    def sequential(self) -> bool:
        return self in (
            CreateMode.PERSISTENT_SEQUENTIAL,
            CreateMode.EPHEMERAL_SEQUENTIAL,
            CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL,
        )

    @property
    def ttl(self) -> bool:
        return self in (CreateMode.PERSISTENT_WITH_TTL, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL)


class Perm(enum.IntFlag):
    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


class AddWatchMode(enum.IntEnum):
    PERSISTENT = 0
    PERSISTENT_RECURSIVE = 1


class WatcherType(enum.IntEnum):
    """The ``type`` of checkWatches/removeWatches."""

    CHILDREN = 1
    DATA = 2
    ANY = 3
    PERSISTENT = 4
    PERSISTENT_RECURSIVE = 5
