"""The ZooKeeper service as a pure core: ``ZkService`` (one replica's sessions, watches,
ordering and session tracker) driven by the events in ``zabray.zk.messages``."""

from zabray.zk.service import MAX_TIMEOUT_MS, MIN_TIMEOUT_MS, ZkService

__all__ = ["MAX_TIMEOUT_MS", "MIN_TIMEOUT_MS", "ZkService"]
