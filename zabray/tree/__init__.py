"""ZooKeeper's data tree and request processor, pure: no IO, no clocks, no randomness.

``DataTree`` is a ``StateMachine`` for the Zab core. Clients' writes are built with the
request builders here (bytes, submitted through Zab); the leader's ``prepare`` turns them into
concrete txns against its future state; every replica's ``apply`` returns a ``Result``.
Reads (``get``, ``exists``, ``children``, ``stat``) go straight to a replica's tree.
"""

from zabray.tree.datatree import DEFAULT_MAX_DATA_BYTES, DataTree, Result
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
    SessionMovedError,
    ZooKeeperError,
    error_for_code,
)
from zabray.tree.ops import (
    Check,
    CloseSession,
    Create,
    CreateSession,
    Delete,
    Multi,
    OpCode,
    Request,
    SetData,
    Sync,
    TxnRecord,
    check,
    close_session,
    create,
    create_session,
    decode_request,
    decode_txn,
    delete,
    encode_request,
    multi,
    set_data,
    sync,
)
from zabray.tree.paths import validate_path
from zabray.tree.znode import Change, EventType, Stat

__all__ = [
    "DEFAULT_MAX_DATA_BYTES",
    "BadArgumentsError",
    "BadVersionError",
    "Change",
    "Check",
    "CloseSession",
    "Create",
    "CreateSession",
    "DataTooLargeError",
    "DataTree",
    "Delete",
    "EventType",
    "Multi",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "OpCode",
    "Request",
    "Result",
    "SessionExistsError",
    "SessionExpiredError",
    "SessionMovedError",
    "SetData",
    "Stat",
    "Sync",
    "TxnRecord",
    "ZooKeeperError",
    "check",
    "close_session",
    "create",
    "create_session",
    "decode_request",
    "decode_txn",
    "delete",
    "encode_request",
    "error_for_code",
    "multi",
    "set_data",
    "sync",
    "validate_path",
]
