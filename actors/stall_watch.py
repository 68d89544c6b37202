"""Why a replica went silent: a watch on its event loop and on Python's garbage collector.

A follower drops a leader it has not heard from for ``sync_limit`` ticks, and a leader steps
down when its quorum goes quiet that long. Whatever holds a replica's event loop for that long
costs an election: a long computation on the loop, a full collection of a large heap, or a
process that gets no CPU. Nothing in the trace says which, since a held loop writes nothing.
So a replica watches itself and says so in its log, where a user who saw an election looks:

- a beat re-armed on the loop every ``threshold / 2`` seconds; a beat that comes more than
  ``threshold`` late is a stall: logged with its length once the loop turns again, and counted
  in ``status()`` (``loop_stalls``, ``loop_stall_max_ms``);
- a daemon thread, waking every ``threshold``, that logs the loop thread's stack once per stall
  while the loop is held (it needs the GIL, so a stall inside C code that keeps it shows only
  when it ends);
- a ``gc.callbacks`` hook that logs every collection longer than ``threshold / 2`` and keeps
  the longest (``gc_max_ms``).

The threshold is a quarter of ``sync_limit``: long enough that a loaded replica on a busy
machine does not warn all the time, short enough to be seen well before an election.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
import time
import traceback
from typing import Any

log = logging.getLogger(__name__)

STATS = ("loop_stalls", "loop_stall_max_ms", "gc_max_ms", "gc_long")
"""The counters the watch keeps in the replica's ``stats`` (created at zero, so a reader that
copies the dict never sees it change size)."""


class StallWatch:
    """Start with ``start`` on the replica's loop; ``stop`` ends the thread and the GC hook."""

    def __init__(self, name: str, stats: dict[str, int], threshold_s: float) -> None:
        self.name = name
        self.stats = stats
        self.threshold = threshold_s
        self.period = threshold_s / 2  # a beat: ~0.5% of a core at the test configs' 75 ms threshold
        for k in STATS:
            stats.setdefault(k, 0)
        self._last = time.monotonic()
        self._reported = 0.0  # the _last of the stall whose stack was logged
        self._stop = threading.Event()
        self._handle: asyncio.TimerHandle | None = None
        self._gc_t0 = 0.0
        self._thread: threading.Thread | None = None
        self._loop_tid = 0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._loop_tid = threading.get_ident()
        self._last = time.monotonic()
        self._handle = loop.call_later(self.period, self._beat)
        gc.callbacks.append(self._gc)
        self._thread = threading.Thread(target=self._watch, name=f"stall-watch-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)

    def _beat(self) -> None:
        now = time.monotonic()
        late = now - self._last - self.period
        self._last = now
        if late > self.threshold:
            self.stats["loop_stalls"] += 1
            ms = int(late * 1000)
            if ms > self.stats["loop_stall_max_ms"]:
                self.stats["loop_stall_max_ms"] = ms
            log.warning("%s: event loop was held for %.2f s (peers drop a replica silent for sync_limit)",
                        self.name, late)
        self._handle = self._loop.call_later(self.period, self._beat)

    def _watch(self) -> None:
        while not self._stop.wait(self.threshold):  # a hold of twice that is always seen
            last = self._last
            held = time.monotonic() - last - self.period
            if held > self.threshold and self._reported != last:
                self._reported = last
                frame = sys._current_frames().get(self._loop_tid)
                where = "".join(traceback.format_stack(frame, limit=15)) if frame is not None else "(no frame)\n"
                log.warning("%s: event loop held for %.2f s so far, in:\n%s", self.name, held, where.rstrip())

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
            return
        took = time.perf_counter() - self._gc_t0
        ms = int(took * 1000)
        if ms > self.stats["gc_max_ms"]:
            self.stats["gc_max_ms"] = ms
        if took > self.threshold / 2:
            self.stats["gc_long"] += 1
            log.warning("%s: a generation-%s garbage collection took %.2f s (%s objects collected)", self.name,
                        info.get("generation"), took, info.get("collected"))
