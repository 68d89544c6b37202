"""The replica's group commit: the persist actions of its core, made durable with one fdatasync.

The replica's effects queue every persist action a step emits; ``flush`` hands the whole queue
to the IO thread (or, for a lone small append, syncs it on the loop), and ``_flushed`` tells the
core ``Persisted(upto)`` when the fdatasync that covers them has returned. That is the only way an
ACK, a COMMIT or a client reply that depends on a write is released: never before its fsync.
At most one group commit is in flight; what is queued meanwhile goes in the next one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from actors.faultpoints import PERSIST_KIND_OF, ReplicaFaults
from actors.metrics import ReplicaMetrics
from storage.disk import DiskStore
from zabray.errors import StorageError
from zabray.net.batching import Outbox
from zabray.protocol.actions import AppendTxns, Persist, PersistAction
from zabray.protocol.events import Event, Persisted
from zabray.protocol.role import Phase
from zabray.protocol.store import apply_persists

_INLINE_BYTES = 64 * 1024
"""The most a group synced on the loop may hold; larger groups overlap with the loop's work."""
_INLINE_SLOW_S = 0.02
"""An fdatasync this slow means the disk is busy: on this machine they take 0.1-0.3 ms idle and
took 0.3 s while another replica wrote a snapshot, holding the loop all that time."""
_INLINE_BACKOFF_S = 2.0
_RECORD_OVERHEAD = 64
"""At least a log record's header (28 bytes) plus its share of a group frame's, so a group that
fits by this count fits on disk."""


class CommitHost(Protocol):
    """What a group commit needs of its replica: where to report, and how to stop."""

    loop: asyncio.AbstractEventLoop
    stats: dict[str, int]
    metrics: ReplicaMetrics
    outbox: Outbox
    faults: ReplicaFaults
    fatal: str | None
    stopped: bool

    def step(self, event: Event) -> None: ...
    def crash(self, point: str) -> None: ...
    def die(self, why: str) -> None: ...
    def phase(self) -> Phase | None: ...


class GroupCommit:
    """One replica's group commit over its ``store``; at most one fdatasync in flight."""

    def __init__(self, host: CommitHost, store: DiskStore, io: ThreadPoolExecutor) -> None:
        self.host = host
        self.store = store
        self._io = io
        self._queue: list[PersistAction] = []
        self._flushing = False
        self._scheduled = False
        self._t0 = 0.0
        self._inline_after = 0.0  # monotonic time before which every group commit uses the IO thread

    def queue(self, action: PersistAction) -> None:
        self._queue.append(action)

    def schedule(self) -> None:
        """After a step: start a group commit at the loop's next turn if one is due. Called once
        the step's sends are queued, so a leader's PROPOSAL leaves before its own log write starts
        (the two proceed in parallel; its own ACK still waits for the sync)."""
        if self._queue and not self._flushing and not self._scheduled:
            self._scheduled = True
            self.host.loop.call_soon(self.flush)

    def sync_now(self) -> None:
        """The loop turn's frames are written: a scheduled group commit may start at once."""
        if self._scheduled:
            self.flush()

    def _io_apply(self, batch: list[PersistAction]) -> int:
        """Runs on the IO thread: the group commit, with any injected disk fault."""
        faults = self.host.faults
        if faults.sync_delay_s:
            time.sleep(faults.sync_delay_s)
        if faults.fail_next_sync:
            faults.fail_next_sync = False
            raise StorageError("injected fault: fdatasync failed (EIO)")
        return apply_persists(self.store, batch)

    def flush(self) -> None:
        """Group commit: everything persisted since the last flush, one fdatasync."""
        self._scheduled = False
        host = self.host
        if self._flushing or not self._queue or host.fatal is not None or host.stopped:
            return
        batch, self._queue = self._queue, []
        self._crash_points("persist-before", batch)
        self._flushing = True
        self._t0 = time.monotonic()
        if len(batch) == 1 and self._inline(batch[0]):
            # A lone small append (light load): sync it here. Handing it to the IO thread and
            # back costs more than a fast disk's fdatasync, and there is nothing to overlap it with.
            fut: concurrent.futures.Future[int] = concurrent.futures.Future()
            try:
                fut.set_result(self._io_apply(batch))
            except BaseException as e:
                fut.set_exception(e)
            self._flushed(fut, batch)
            return
        # Straight back to the loop from the IO thread (run_in_executor would chain an asyncio
        # future and take one more loop turn before the ACKs go out).
        fut = self._io.submit(self._io_apply, batch)
        fut.add_done_callback(lambda f: self._call_threadsafe(self._flushed, f, batch))

    def _crash_points(self, when: str, batch: list[PersistAction]) -> None:
        faults = self.host.faults
        if faults.crash is None:
            return
        for kind in {PERSIST_KIND_OF[type(a).__name__] for a in batch}:
            if faults.hit(f"{when}:{kind}", self.host.phase() or ""):
                self.host.crash(f"{when}:{kind}")

    def _inline(self, action: Persist) -> bool:
        """Whether ``action`` costs no more than one small write and one fdatasync: only then may
        it hold the loop. A snapshot (a whole tree), an epoch file, a truncation or a segment
        rollover (which creates and fsyncs a 64 MiB file when no spare is ready) would hold it
        for as long as peers take to drop a silent replica, on every replica at once. So would a
        disk that has become slow: after a group commit took over ``_INLINE_SLOW_S``, every one
        goes to the IO thread for ``_INLINE_BACKOFF_S``, and the loop keeps serving meanwhile."""
        if type(action) is not AppendTxns or self.host.faults.sync_delay_s or self._t0 < self._inline_after:
            return False
        size = 0
        for t in action.txns:
            size += len(t.value) + _RECORD_OVERHEAD
        return size <= _INLINE_BYTES and size <= self.store.room()

    def _call_threadsafe(self, fn: Any, *args: Any) -> None:
        try:
            self.host.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: the replica stopped
            pass

    def _flushed(self, fut: concurrent.futures.Future[int], batch: list[PersistAction]) -> None:
        self._flushing = False
        host = self.host
        if host.stopped:
            return  # the IO thread is shut down, the trace closed: nothing more to release
        n = len(batch)
        try:
            upto = fut.result()
        except (StorageError, OSError) as e:
            host.die(f"storage failed, nothing more is acknowledged: {e}")
            return
        self._crash_points("persist-after", batch)
        host.stats["syncs"] += 1
        host.stats["synced_actions"] += n
        now = time.monotonic()
        host.metrics.fsync(now - self._t0)
        if now - self._t0 > _INLINE_SLOW_S:  # the disk is busy: a snapshot, another process
            self._inline_after = now + _INLINE_BACKOFF_S
        host.step(Persisted(upto))
        if self._queue:
            self.flush()
        host.outbox.flush()  # the ACKs (or a leader's COMMITs and replies) this sync released
