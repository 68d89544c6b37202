"""Read-only mode, pure: when a replica cut off from its quorum serves read-only sessions, and
the sessions local to it meanwhile (ZooKeeper 3.8's ReadOnlyZooKeeperServer, which kazoo's
``read_only=True`` and the Java client's ``canBeReadOnly`` use).

ZooKeeper starts its read-only server once a peer has been LOOKING for max(2 s, tickTime), and
shuts it down (closing every connection) when the peer stops looking. Meanwhile a client that
asked for read-only gets a session local to the server (nothing is committed: there is no
quorum), or resumes a global one it already had; reads are served from the peer's tree, which
holds only committed txns; every write is NOT_READONLY. ``ZkService`` does the serving; this
class decides when, and keeps the local sessions' timeouts and deadlines (a local session
expires here if it goes silent, and may close itself).
"""

from __future__ import annotations


class ReadOnlyMode:
    """``after_ms``: how long the core must have been looking before read-only sessions are
    served (None: read-only mode is off). ``serving`` says whether it is on now."""

    __slots__ = ("after_ms", "looking_since", "serving", "local")

    def __init__(self, after_ms: int | None) -> None:
        self.after_ms = after_ms
        self.looking_since: int | None = None  # when the core began looking
        self.serving = False
        self.local: dict[int, list[int]] = {}  # local session id -> [timeout, deadline] (ms)

    def role(self, serving: bool, looking: bool, now_ms: int) -> bool:
        """The core's role changed; True if read-only mode ends now (every connection must close)."""
        stop = self.serving and (serving or not looking)
        if stop:
            self.serving = False
            self.local.clear()
        if serving or not looking:
            self.looking_since = None
        elif self.looking_since is None:
            self.looking_since = now_ms
        return stop

    def tick(self, now_ms: int) -> tuple[bool, list[int]]:
        """Time passed: (read-only mode began just now, the local sessions that expired)."""
        if self.after_ms is None:
            return False, []
        if not self.serving:
            since = self.looking_since
            self.serving = since is not None and now_ms - since >= self.after_ms
            return self.serving, []
        expired = sorted(s for s, (_, deadline) in self.local.items() if deadline < now_ms)
        for s in expired:
            del self.local[s]
        return False, expired

    def open(self, session_id: int, timeout_ms: int, now_ms: int) -> None:
        self.local[session_id] = [timeout_ms, now_ms + timeout_ms]

    def touch(self, session_id: int, now_ms: int) -> None:
        entry = self.local.get(session_id)
        if entry is not None:
            entry[1] = now_ms + entry[0]

    def timeout(self, session_id: int) -> int | None:
        entry = self.local.get(session_id)
        return None if entry is None else entry[0]

    def close(self, session_id: int) -> bool:
        """Forget a local session that closed itself; False if it is not a local session."""
        return self.local.pop(session_id, None) is not None


__all__ = ["ReadOnlyMode"]
