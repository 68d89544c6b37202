"""ZooKeeper 3.8 requests kazoo 2.11 has no method for (createContainer, createTTL, addWatch,
whoAmI, getEphemerals, getAllChildrenNumber, ...), sent through kazoo's own connection
(``client._call``) with records of zabray's codec, and a recorder of every watch event the
connection reads (kazoo drops events no one-shot watcher of its own waits for, such as a
persistent watch's)."""

from __future__ import annotations

import threading
from typing import Any

from kazoo.client import KazooClient

from zabray.wire import zkproto as zp
from zabray.wire.jute import Reader


class RawRequest:
    """What kazoo's connection needs of a request: ``type``, ``serialize()``, ``deserialize()``."""

    def __init__(self, op: int, body: zp.Record | None) -> None:
        self.type = int(op)
        self.body = body
        self.path = getattr(body, "path", None)

    def serialize(self) -> bytes:
        return self.body.encode() if self.body is not None else b""

    def deserialize(self, buffer: bytes, offset: int) -> Any:
        cls = zp.RESPONSES.get(self.type)
        return None if cls is None else cls.read(Reader(bytes(buffer), offset))

    def __repr__(self) -> str:
        return f"RawRequest({self.type}, {self.body!r:.80})"


def call(client: KazooClient, op: int, body: zp.Record | None = None, timeout: float = 30) -> Any:
    """Send one request on ``client``'s session; its response record, or kazoo's exception for
    the error code ZooKeeper answered."""
    result = client.handler.async_result()
    client._call(RawRequest(op, body), result)
    return result.get(timeout=timeout)


OPEN = (zp.ACL(int(zp.Perm.ALL), zp.Id("world", "anyone")),)


def create(client: KazooClient, path: str, mode: zp.CreateMode, data: bytes = b"", ttl: int = 0) -> zp.Record:
    if mode.ttl:
        return call(client, zp.OpCode.CREATE_TTL, zp.CreateTTLRequest(path, data, OPEN, int(mode), ttl))
    op = zp.OpCode.CREATE_CONTAINER if mode == zp.CreateMode.CONTAINER else zp.OpCode.CREATE2
    return call(client, op, zp.CreateRequest(path, data, OPEN, int(mode)))


class EventLog:
    """Every watch event ``client``'s connection reads, as (type name, path), in order."""

    def __init__(self, client: KazooClient) -> None:
        self.events: list[tuple[str, str]] = []
        self.cond = threading.Condition()
        conn = client._connection
        original = conn._read_watch_event
        names = {int(t): t.name for t in zp.EventType}

        def read_watch_event(buffer: bytes, offset: int) -> Any:
            ev = zp.WatcherEvent.read(Reader(bytes(buffer), offset))
            with self.cond:
                self.events.append((names.get(ev.type, str(ev.type)), ev.path))
                self.cond.notify_all()
            return original(buffer, offset)

        conn._read_watch_event = read_watch_event

    def wait_for(self, n: int, timeout: float = 30) -> list[tuple[str, str]]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.events) >= n, timeout=timeout):
                raise AssertionError(f"timed out waiting for {n} watch events, got {self.events}")
            return list(self.events)
