"""ZooKeeper recipes built only on the public ``Session`` API, as in the ZooKeeper paper.

Lock without herd effect, read/write lock, leader election, double barrier, group membership.
Every sequential znode name carries a per-instance GUID, so a create that fails with a
connection loss (it may have been applied) is resolved by looking for our GUID among the
children instead of creating a second node. That look cannot always settle it (a partition can
keep the old leader alive, and the lost create may commit after it), so a lock also deletes any
other node of its GUID it finds: its own lost create must never block it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from zabray.client.session import (
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
    NotReadyError,
    Session,
    WatchedEvent,
)

T = TypeVar("T")

__all__ = ["Lock", "ReadWriteLock", "Election", "DoubleBarrier", "Group", "ensure_path"]


def _retry(s: Session, fn: Callable[..., T], *args: Any, deadline: float | None = None) -> T:
    """Call ``fn`` again after a connection loss, until ``deadline`` (default: 3 session timeouts)."""
    end = deadline if deadline is not None else time.monotonic() + 3 * s.timeout + 10
    while True:
        try:
            return fn(*args)
        except (ConnectionLossError, NotReadyError):
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def ensure_path(s: Session, path: str) -> None:
    """Create ``path`` and its missing ancestors (persistent, empty)."""
    parts = [p for p in path.split("/") if p]
    cur = ""
    for p in parts:
        cur += "/" + p
        try:
            _retry(s, s.create, cur)
        except NodeExistsError:
            pass


def _seq(name: str) -> int:
    return int(name[-10:])


def _create_seq(s: Session, parent: str, guid: str, label: str, data: bytes = b"") -> str:
    """An ephemeral sequential ``parent/guid-label-N``; safe against connection loss."""
    prefix = f"{guid}-{label}-"
    while True:
        try:
            return s.create(f"{parent}/{prefix}", data, ephemeral=True, sequential=True)
        except (ConnectionLossError, NotReadyError):
            mine = [c for c in _retry(s, s.children, parent) if c.startswith(prefix)]
            if mine:
                return f"{parent}/{mine[0]}"


def _wait_gone(s: Session, path: str, timeout: float | None) -> bool:
    """Block until ``path`` does not exist (True) or ``timeout`` passes (False)."""
    ev = threading.Event()

    def cb(_: WatchedEvent) -> None:
        ev.set()

    try:
        if s.exists(path, watch=cb) is None:
            return True
    except (ConnectionLossError, NotReadyError):
        return False  # the caller re-examines the children
    return ev.wait(timeout if timeout is not None else max(1.0, s.timeout))


class Lock:
    """Exclusive lock without herd effect: each waiter watches only its predecessor."""

    label = "lock"

    def __init__(self, session: Session, path: str, identifier: bytes = b"") -> None:
        self.s = session
        self.path = path.rstrip("/")
        self.identifier = identifier
        self.guid = uuid.uuid4().hex
        self.node: str | None = None

    def _blockers(self, mine: str, kids: list[str]) -> list[str]:
        return [k for k in kids if _seq(k) < _seq(mine)]

    def acquire(self, timeout: float | None = None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        ensure_path(self.s, self.path)
        if self.node is None:
            self.node = _create_seq(self.s, self.path, self.guid, self.label, self.identifier)
        name = self.node.rsplit("/", 1)[1]
        while True:
            kids = _retry(self.s, self.s.children, self.path)
            if name not in kids:  # our session expired or someone deleted it: start over
                self.node = _create_seq(self.s, self.path, self.guid, self.label, self.identifier)
                name = self.node.rsplit("/", 1)[1]
                continue
            mine = f"{self.guid}-"
            for k in kids:
                if k != name and k.startswith(mine):
                    # Ours too: a create whose reply was lost and that took effect after we
                    # looked for it (possible when a partition kept the old leader alive).
                    # Left there it would block us, and everyone behind us, for good.
                    try:
                        _retry(self.s, self.s.delete, f"{self.path}/{k}")
                    except NoNodeError:
                        pass
            blockers = sorted(self._blockers(name, [k for k in kids if not k.startswith(mine)]), key=_seq)
            if not blockers:
                return True
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                self.release()
                return False
            _wait_gone(self.s, f"{self.path}/{blockers[-1]}", left if left is None else min(left, self.s.timeout))

    def release(self) -> None:
        node, self.node = self.node, None
        if node is not None:
            try:
                _retry(self.s, self.s.delete, node)
            except NoNodeError:
                pass

    def __enter__(self) -> Lock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class _ReadLock(Lock):
    label = "read"

    def _blockers(self, mine: str, kids: list[str]) -> list[str]:
        # A reader waits only for writers ahead of it.
        return [k for k in kids if _seq(k) < _seq(mine) and "-write-" in k]


class _WriteLock(Lock):
    label = "write"


class ReadWriteLock:
    """``rw.read`` and ``rw.write`` are locks over the same znode: many readers or one writer."""

    def __init__(self, session: Session, path: str) -> None:
        self.read = _ReadLock(session, path)
        self.write = _WriteLock(session, path)


class Election:
    """Leader election: the candidate with the lowest sequence number leads; each candidate
    watches only its predecessor, so a leader's death wakes exactly one successor."""

    def __init__(self, session: Session, path: str, identifier: bytes = b"") -> None:
        self._lock = Lock(session, path, identifier)
        self._lock.label = "n"
        self.s = session
        self.path = path.rstrip("/")

    def run(self, timeout: float | None = None) -> bool:
        """Volunteer and block until this candidate leads (or ``timeout``)."""
        return self._lock.acquire(timeout)

    def resign(self) -> None:
        self._lock.release()

    def leader(self) -> bytes | None:
        """The current leader's identifier (None if nobody volunteers)."""
        while True:
            kids = sorted(_retry(self.s, self.s.children, self.path), key=_seq)
            if not kids:
                return None
            try:
                return _retry(self.s, self.s.get, f"{self.path}/{kids[0]}")[0]
            except NoNodeError:
                continue


class DoubleBarrier:
    """Enter once ``n`` participants have; leave once all have left (the ZooKeeper paper)."""

    def __init__(self, session: Session, path: str, n: int, name: str | None = None) -> None:
        self.s = session
        self.path = path.rstrip("/")
        self.n = n
        self.name = name or uuid.uuid4().hex
        self.node = f"{self.path}/{self.name}"

    def _members(self) -> list[str]:
        return sorted(k for k in _retry(self.s, self.s.children, self.path) if k != "ready")

    def enter(self, timeout: float | None = None) -> bool:
        ensure_path(self.s, self.path)
        ready = threading.Event()
        if _retry(self.s, self.s.exists, f"{self.path}/ready", lambda e: ready.set()) is not None:
            ready.set()
        try:
            _retry(self.s, self.s.create, self.node, b"", True)
        except NodeExistsError:
            pass
        if len(self._members()) >= self.n:
            try:
                _retry(self.s, self.s.create, f"{self.path}/ready")
            except NodeExistsError:
                pass
            return True
        return ready.wait(timeout)

    def leave(self, timeout: float | None = None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            kids = self._members()
            if not kids or kids == [self.name]:
                try:
                    _retry(self.s, self.s.delete, self.node)
                except NoNodeError:
                    pass
                return True
            if end is not None and time.monotonic() > end:
                return False
            if self.name not in kids:
                # We are out; wait for the lowest remaining to leave.
                _wait_gone(self.s, f"{self.path}/{kids[0]}", 1.0)
                continue
            if kids[0] == self.name:
                _wait_gone(self.s, f"{self.path}/{kids[-1]}", 1.0)
            else:
                try:
                    _retry(self.s, self.s.delete, self.node)
                except NoNodeError:
                    pass
                _wait_gone(self.s, f"{self.path}/{kids[0]}", 1.0)


class Group:
    """Group membership: each member is an ephemeral child; it leaves when its session ends."""

    def __init__(self, session: Session, path: str) -> None:
        self.s = session
        self.path = path.rstrip("/")

    def join(self, member: str, data: bytes = b"") -> str:
        ensure_path(self.s, self.path)
        return _retry(self.s, self.s.create, f"{self.path}/{member}", data, True)

    def leave(self, member: str) -> None:
        try:
            _retry(self.s, self.s.delete, f"{self.path}/{member}")
        except NoNodeError:
            pass

    def members(self, watch: Callable[[WatchedEvent], Any] | None = None) -> list[str]:
        return _retry(self.s, self.s.children, self.path, watch)
