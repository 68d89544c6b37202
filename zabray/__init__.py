"""zabray: Zab, the atomic broadcast protocol of Apache ZooKeeper, as a durable system on Ray.

The public API is small: ``Ensemble`` (start, connect, write, break and observe an ensemble),
``Zxid``, and the typed errors in ``zabray.errors``.
"""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from zabray.driver.ensemble import Ensemble, ReplicaStatus


def __getattr__(name: str) -> Any:
    # Lazy: the ensemble pulls in the actors' IO modules, which import zabray.errors themselves.
    if name in ("Ensemble", "ReplicaStatus"):
        from zabray.driver import ensemble

        return getattr(ensemble, name)
    raise AttributeError(f"module 'zabray' has no attribute {name!r}")

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
