"""zabray: Zab, the atomic broadcast protocol of Apache ZooKeeper, as a durable system on Ray.

The public API is small: ``Ensemble`` (start, connect, write, break and observe an ensemble),
``Zxid``, and the typed errors in ``zabray.errors``.
"""

from zabray.ensemble import Ensemble, ReplicaStatus
from zabray.errors import (
    ConfigError,
    CorruptionError,
    NoQuorumError,
    NotRunningError,
    RequestTimeoutError,
    StorageError,
    UncertainOutcomeError,
    ZabError,
)
from zabray.protocol.zxid import Zxid

__all__ = [
    "Ensemble",
    "ReplicaStatus",
    "Zxid",
    "ZabError",
    "ConfigError",
    "CorruptionError",
    "NoQuorumError",
    "NotRunningError",
    "RequestTimeoutError",
    "StorageError",
    "UncertainOutcomeError",
]
