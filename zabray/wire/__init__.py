"""Wire protocols, sans IO: ``jute`` (ZooKeeper's serialization) and ``zkproto`` (ZooKeeper's
client protocol: codes, records, frames). Neither imports sockets, asyncio or Ray."""
