"""The client-session actor: a Ray actor that owns one ZooKeeper session.

It holds the session's TCP connection to one replica (``zabray.client.session.Session`` does the
protocol: pings, moving between replicas, watches), so a session can live apart from the
process that uses it and die on its own: kill the actor and its connection drops with it, the
leader expires the session after its timeout, and its ephemerals vanish. Calls to the actor are
the control plane of one client; the session's own traffic to the replica is TCP, not Ray.
Watch notifications cannot call back across Ray, so the actor queues them for ``events()``.
"""

from __future__ import annotations

from typing import Any

from zabray.client.session import Session, WatchedEvent


class SessionActor:
    def __init__(self, ensemble: str, addresses: dict[int, tuple[str, int]], timeout: float) -> None:
        self.session = Session(ensemble, {int(k): (v[0], int(v[1])) for k, v in addresses.items()}, timeout=timeout)
        self._events: list[dict[str, Any]] = []

    def _watch(self, watch: bool) -> Any:
        if not watch:
            return None

        def queue(ev: WatchedEvent) -> None:
            self._events.append({"type": str(ev.type), "path": ev.path})

        return queue

    def session_id(self) -> int:
        return self.session.session_id

    def create(self, path: str, data: bytes | None = b"", ephemeral: bool = False, sequential: bool = False) -> str:
        return self.session.create(path, data, ephemeral=ephemeral, sequential=sequential)

    def get(self, path: str, watch: bool = False) -> tuple[bytes | None, Any]:
        return self.session.get(path, watch=self._watch(watch))

    def exists(self, path: str, watch: bool = False) -> Any:
        return self.session.exists(path, watch=self._watch(watch))

    def children(self, path: str, watch: bool = False) -> list[str]:
        return self.session.children(path, watch=self._watch(watch))

    def set(self, path: str, data: bytes, version: int = -1) -> Any:
        return self.session.set(path, data, version)

    def delete(self, path: str, version: int = -1) -> None:
        self.session.delete(path, version)

    def sync(self, path: str = "/") -> int:
        return self.session.sync(path)

    def events(self) -> list[dict[str, Any]]:
        """Watch notifications received so far (and forget them)."""
        out, self._events = self._events, []
        return out

    def close(self) -> None:
        self.session.close()
