"""Durable storage for a replica: the store interface the core's persist actions need, an
in-memory implementation for the simulator, and the on-disk implementation."""

from storage.base import Store, apply_persists
from storage.disk import DiskStore
from storage.memory import MemoryStore
from zabray.protocol.durable import DurableState

__all__ = ["DurableState", "Store", "apply_persists", "MemoryStore", "DiskStore"]
