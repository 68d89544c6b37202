"""Durable storage on a replica's local disk: the transaction log, the epoch files and the
snapshots (``DiskStore``), and a read-only view of a replica's directory (``diskview``).

The store interface the core's persist actions need is ``zabray.protocol.store``; the
simulator's in-memory store is ``zabray.sim.memstore``."""

from storage.disk import DiskStore

__all__ = ["DiskStore"]
