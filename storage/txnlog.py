"""The transaction log: preallocated, append-only segment files of checksummed group commits.

The segment files' format, names and scanning are ``storage.segments``'s; the frames are
``storage.records``'s. Each ``sync`` writes one group: its records under one checksum.

Recycling: a segment purged after a snapshot becomes the file of a later segment, instead of a
new file being zero-filled (that writes as many bytes again as the log itself). Its old frames
stay past the new end, but the new segment's random seed makes them fail their checksums, and
every group commit into a recycled segment writes a zero frame header after its group, so the
end is found as in a zero-filled file. Nothing valid under the seed may follow the end.

Invariants (checked on open by ``storage.recovery``):

- Zxids strictly increase across the whole log of a generation (cut frames applied).
- ``prev`` of a segment is the log's tail when the segment was created: every record of earlier
  segments is <= prev < every record of this one, and for consecutive segments a, b:
  ``b.prev == tail(a)`` (a's last zxid, or a.prev if a has none). This makes a missing or
  shortened segment detectable, and tells which segments a snapshot needs.
- Everything after a segment's last frame is zero (or end of file), except in a recycled
  segment, where a zero frame header follows the last frame and nothing after it is a frame
  valid under the segment's seed. Preallocation writes real zeros; truncation and torn-tail
  repair cut with ``ftruncate`` (atomic) before re-zeroing.
- Durable frames are never rewritten. A truncation cuts with ``ftruncate`` at a frame boundary
  and, when it falls inside a group, appends a cut frame: every crash state is the old log, a
  prefix of it that still holds the records kept, or the truncated log.
- A segment file appears under its final name only complete with header and preallocation
  (temp file, fsync, rename, fsync directory).
- Only the newest segment can hold a torn frame: every sync writes into one segment and a sync
  that does not fit rolls over to a new segment first.
- Groups written into a preallocated segment never extend the file, so a group running past
  the end of such a file means the file was cut short (corruption), not a torn write. (A cut
  frame may extend a full one by its own 20 bytes.)
- Appends go to format-4 segments only: a segment of an older format found at open is read
  and may be truncated (record by record), but the next sync starts a new segment.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from array import array
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

from storage import fsutil
from storage.records import (
    GROUP_HEADER_SIZE,
    ZERO_FRAME,
    encode_txns,
    framed_size,
    group_frames,
    plan_cut,
)
from storage.records_v3 import first_after
from storage.segments import (
    SEG_HEADER_SIZE,
    SEG_VERSION,
    SegmentInfo,
    SegmentScan,
    encode_segment_header,
    new_seed,
    read_segment,
    segment_name,
)
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid, fmt

log = logging.getLogger(__name__)

_PAGE = 4096

# -- the writer -----------------------------------------------------------------------------------

# Zero-fill the next segment in a background thread while the current one fills up, so a rollover
# only writes a header and renames. Tests that count I/O calls turn it off for determinism.
BACKGROUND_PREALLOCATION = True
SPARE_PREFIX = "spare."
_SPARE = re.compile(r"^spare\.([0-9]+)\.tmp$")
# Purged segments kept for reuse: a snapshot may purge two segments at once, and each saves the
# zero-fill of a later one.
MAX_RECYCLED = 2


def is_spare(name: str) -> bool:
    return _SPARE.match(name) is not None


def spare_number(name: str) -> int:
    m = _SPARE.match(name)
    return int(m.group(1)) if m else -1


class _Spare:
    """A file for a later segment: a purged segment renamed (``recycled``; up to
    ``MAX_RECYCLED``, also the full-size spares found at open), or else one zero-filled file
    prepared by a daemon thread when the active segment is half full and none is at hand.

    It carries no identity until a rollover writes a header into it and renames it, and its
    name ends in ``.tmp``, so a crash at any point leaves nothing recovery must understand.
    A failure here is not a storage failure: the rollover just makes the segment itself.
    """

    def __init__(self, dirpath: str, slot: int, size: int, recycle: str | None = None) -> None:
        self.path = os.path.join(dirpath, f"{SPARE_PREFIX}{slot}{fsutil.TMP_SUFFIX}")
        self.size = size
        self.recycled = recycle is not None
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if recycle is not None:
            os.rename(recycle, self.path)
        else:
            self._thread = threading.Thread(target=self._fill, name="zabray-prealloc", daemon=True)
            self._thread.start()

    def _fill(self) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                step = 1 << 20
                for off in range(0, self.size, step):
                    if self._stop.is_set():
                        return
                    fsutil.zero_fill(fd, off, min(off + step, self.size))
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException as e:  # reported to the rollover, which then does the work itself
            self._error = e

    def take(self) -> str | None:
        """Wait for the file; its path when ready (the caller now owns it), else None."""
        if self._thread is not None:
            self._thread.join()
        if self._error is not None or self._stop.is_set():
            if self._error is not None:
                log.warning("background preallocation failed: %s", self._error)
            self._discard()
            return None
        return self.path

    def cancel(self, *, discard: bool = True) -> None:
        """Stop filling; delete the file unless ``discard`` is False (then the next open reaps it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if discard:
            self._discard()

    def _discard(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


@dataclass(slots=True)
class _Active:
    """The segment appends go to (mutable: the writer's own bookkeeping).

    ``cp_zxids``/``cp_offsets`` are checkpoints: record boundaries with the zxid of the record
    starting there (every record of a segment read at open; the first record of each group
    commit since), enough to find any record again for a truncation without an index entry per
    record on the hot path.
    """

    info: SegmentInfo
    fd: int
    end: int
    capacity: int
    tail: Zxid
    cp_zxids: array[int] = field(default_factory=lambda: array("Q"))
    cp_offsets: array[int] = field(default_factory=lambda: array("Q"))


class TxnLog:
    """Writer of one generation's log.

    ``append``/``truncate`` only touch memory; ``sync`` makes them durable with ONE write and
    ONE fdatasync of the segment (plus, when a truncation is pending, an fsync'ed cut first and,
    when the batch does not fit, a new segment created first). ``tail`` is the durable tail.
    Raises ``OSError`` on I/O failure; the owner must then stop using it.
    """

    def __init__(
        self,
        dirpath: str,
        generation: int,
        segments: list[SegmentInfo],
        last: SegmentScan | None,
        base: Zxid,
        *,
        floor: Zxid,
        segment_bytes: int,
        preallocate: bool,
        fsync: bool = True,
        spares: Sequence[str] = (),
    ) -> None:
        """``spares``: names of full-size spare files found at open (by ascending number)."""
        self.dir = dirpath
        self.fsync = fsync
        self.generation = generation
        self.segments = list(segments)
        self.segment_bytes = segment_bytes
        self.preallocate = preallocate
        self._active: _Active | None = None
        self._spares: list[_Spare] = []  # recycled ones first, then at most one being filled
        self._slots = 0  # spare files are named by a counter
        for name in spares:  # renamed to slots 1, 2, ...: never onto one not yet taken
            self._spares.append(
                _Spare(dirpath, self._next_slot(), segment_bytes, recycle=os.path.join(dirpath, name))
            )
        self.tail: Zxid = base if not segments else (last.tail if last else segments[-1].prev)
        if last is not None:
            self._active = self._open_active(last)
        # Pending (volatile) changes: one truncation of the durable log, then encoded records.
        self._pending_trunc: Zxid | None = None
        self._parts: list[bytes] = []  # two per buffered record: header, value
        self._zxids: list[int] = []
        self._size = 0  # bytes in _parts
        self._bound: int = max(self.tail, floor)

    # -- volatile operations --------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        return bool(self._parts) or self._pending_trunc is not None

    @property
    def pending_records(self) -> int:
        return len(self._zxids)

    def room(self) -> int:
        """Bytes the next ``sync`` can write into the active segment without a rollover or a
        truncation (0 if either is due): what makes that sync one write and one fdatasync."""
        act = self._active
        if act is None or self._pending_trunc is not None or act.info.version != SEG_VERSION:
            return 0
        return max(0, act.capacity - act.end - framed_size(self._size) - GROUP_HEADER_SIZE)

    def append(self, txns: Sequence[Txn]) -> None:
        self._size += encode_txns(txns, self._bound, self._parts, self._zxids)
        if self._zxids:
            self._bound = self._zxids[-1]

    def truncate(self, zxid: Zxid) -> None:
        """Drop every record after ``zxid``: buffered ones now, durable ones at the next sync."""
        if zxid >= self._bound:
            return
        k = bisect_right(self._zxids, zxid)
        del self._zxids[k:], self._parts[2 * k :]
        self._size = sum(map(len, self._parts))
        if self._zxids:
            self._bound = self._zxids[-1]
            return
        self._bound = zxid
        if zxid < self.tail and (self._pending_trunc is None or zxid < self._pending_trunc):
            self._pending_trunc = zxid

    def raise_floor(self, zxid: Zxid) -> None:
        """Appends must follow ``zxid`` from now on (a snapshot at ``zxid`` covers everything up to it)."""
        self._bound = max(self._bound, zxid)

    def discard_pending(self) -> None:
        self._parts, self._zxids, self._size = [], [], 0
        self._pending_trunc = None
        self._bound = self.tail

    # -- durable operations ---------------------------------------------------------------------

    def sync(self) -> None:
        """Make every pending change durable: group commit, one write + one fdatasync."""
        if self._pending_trunc is not None:
            self._cut(self._pending_trunc)
            self._pending_trunc = None
        if not self._parts:
            return
        act = self._active
        need = framed_size(self._size)
        if act is None or act.info.version != SEG_VERSION or act.end + need > act.capacity:
            act = self._roll(need)
        frames, starts = group_frames(self._parts, self._size, act.info.seed)
        size = sum(map(len, frames))
        if act.info.recycled and act.end + size + GROUP_HEADER_SIZE <= act.capacity:
            # Mark the end: past it lie the file's older frames (which fail under this seed).
            fsutil.write_parts(act.fd, [*frames, ZERO_FRAME], size + GROUP_HEADER_SIZE, act.end)
        else:
            fsutil.write_parts(act.fd, frames, size, act.end)
        if self.fsync:  # False only when the operator chose speed over durability
            os.fdatasync(act.fd)
        for rel, first in starts:  # where each group begins: what a truncation reads back
            act.cp_zxids.append(self._zxids[first])
            act.cp_offsets.append(act.end + rel)
        act.end += size
        act.tail = self.tail = Zxid(self._zxids[-1])
        self._parts, self._zxids, self._size = [], [], 0
        if not self._spares and self.preallocate and BACKGROUND_PREALLOCATION and 2 * act.end >= act.capacity:
            # No purged segment to recycle yet: zero-fill one for the next rollover. Not before
            # this one is half full, since a snapshot's purge would make the zero-fill (as many
            # bytes again as the log writes) wasted work; half a segment is ample time for it.
            self._spares.append(_Spare(self.dir, self._next_slot(), self.segment_bytes))

    def _cut(self, zxid: Zxid) -> None:
        """Durably drop records after ``zxid`` (which is below the durable tail).

        Later segments go first, newest first, each unlink made durable before the next, so a
        crash leaves a prefix of the old log (never a gap); then the segment holding ``zxid`` is
        cut with ftruncate + fsync (atomic) and re-zeroed.
        """
        while self.segments and self.segments[-1].prev >= zxid:
            seg = self.segments.pop()
            if self._active is not None and self._active.info.seq == seg.seq:
                os.close(self._active.fd)
                self._active = None
            os.unlink(os.path.join(self.dir, seg.name))
            fsutil.fsync_dir(self.dir)
            log.info("%s: removed by truncation to %s", seg.name, fmt(zxid))
        if not self.segments:
            self.tail = zxid
            return
        act = self._active
        if act is None:
            seg = self.segments[-1]
            act = self._active = self._open_active(
                read_segment(self.dir, seg, keep_after=1 << 64, may_be_torn=False)
            )
        if zxid < act.tail:
            # The records after zxid start inside the region of the last checkpoint <= zxid:
            # in format 4 one group and its cut frames, in older formats one record.
            k = bisect_right(act.cp_zxids, zxid)
            frame = None
            if k == 0:
                cut, tail = act.cp_offsets[0], act.info.prev
            else:
                start = act.cp_offsets[k - 1]
                stop = act.cp_offsets[k] if k < len(act.cp_offsets) else act.end
                region = os.pread(act.fd, stop - start, start)
                if act.info.version < 4:
                    rel, last = first_after(region, zxid, act.info.seed)
                else:
                    rel, frame, last = plan_cut(region, zxid, act.info.seed)
                cut, tail = start + rel, Zxid(last) if last is not None else act.info.prev
            os.ftruncate(act.fd, cut)
            os.fsync(act.fd)
            if act.info.preallocated:
                fsutil.zero_fill(act.fd, cut, act.capacity)
                os.fsync(act.fd)
            k = bisect_right(act.cp_offsets, cut - 1)  # keep checkpoints before the cut
            del act.cp_zxids[k:], act.cp_offsets[k:]
            act.end, act.tail = cut, tail
            if frame is not None:
                # The cut falls inside a group, which stays whole on disk; the cut frame after
                # it says how much of it is still the log. Until it is durable, a crash leaves
                # the whole group, the state before this truncation began.
                fsutil.pwrite_all(act.fd, frame, cut)
                os.fdatasync(act.fd)
                act.end = cut + len(frame)
                act.capacity = max(act.capacity, act.end)
            log.info("%s: truncated to %s at offset %d", act.info.name, fmt(zxid), cut)
        self.tail = act.tail

    def _open_active(self, scan: SegmentScan) -> _Active:
        """Open a scanned segment for appends, cutting a torn tail and restoring preallocation.

        The cut is an ftruncate made durable before the zeros are rewritten, so a crash in
        between leaves a shorter file whose data ends exactly at the cut.
        """
        info = scan.info
        fd = os.open(os.path.join(self.dir, info.name), os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if scan.torn is not None:
                log.warning(
                    "%s: torn last record at offset %d (crash mid-write); cutting it off",
                    info.name,
                    scan.torn,
                )
                os.ftruncate(fd, scan.torn)
                os.fsync(fd)
                size = scan.torn
            capacity = max(self.segment_bytes, size)
            if info.preallocated and size < capacity:
                fsutil.zero_fill(fd, scan.end, capacity)
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        return _Active(info, fd, scan.end, capacity, scan.tail, scan.cp_zxids, scan.cp_offsets)

    def _roll(self, nbytes: int) -> _Active:
        """Create the next segment (complete and durable before it is visible) and make it active."""
        seq = self.segments[-1].seq + 1 if self.segments else 0
        need = SEG_HEADER_SIZE + nbytes
        capacity = self.segment_bytes if need <= self.segment_bytes else (need + _PAGE - 1) // _PAGE * _PAGE
        ready = None
        recycled = False
        if self._spares and capacity == self.segment_bytes:  # an oversized one leaves them be
            spare = self._spares.pop(0)
            ready = spare.take()
            recycled = ready is not None and spare.recycled
        info = SegmentInfo(
            self.generation,
            seq,
            self.tail,
            segment_name(self.generation, seq),
            self.preallocate,
            new_seed(),
            recycled,
        )
        path = os.path.join(self.dir, info.name)
        if ready is not None:
            tmp = ready
            fd = os.open(tmp, os.O_RDWR)
        else:
            tmp = path + fsutil.TMP_SUFFIX
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            header = encode_segment_header(
                self.generation, seq, self.tail, self.preallocate, info.seed, recycled
            )
            # A recycled file's first frame slot holds an older frame: mark it as the end.
            fsutil.pwrite_all(fd, header + ZERO_FRAME if recycled else header, 0)
            if self.preallocate and ready is None:
                fsutil.zero_fill(fd, SEG_HEADER_SIZE, capacity)
            os.fsync(fd)
            os.replace(tmp, path)
            fsutil.fsync_dir(self.dir)
        except BaseException:
            os.close(fd)
            raise
        if self._active is not None:
            os.close(self._active.fd)
        self.segments.append(info)
        self._active = _Active(info, fd, SEG_HEADER_SIZE, capacity, self.tail)
        log.debug(
            "%s: new segment after %s (%d bytes%s)",
            info.name,
            fmt(self.tail),
            capacity,
            ", a recycled file" if recycled else ", zero-filled in the background" if ready else "",
        )
        return self._active

    def purge(self, keep_from: Zxid) -> list[str]:
        """Delete segments holding only records <= ``keep_from``; never the newest. Returns names.

        Segment i holds only records <= segments[i+1].prev. Deleting from the oldest keeps a
        suffix; the caller fsyncs the directory once (order does not matter: an undeleted old
        segment is merely unused, because recovery starts at the segment a snapshot needs).
        Up to ``MAX_RECYCLED`` full-size preallocated segments are renamed to spares for later
        rollovers instead, so the log does not zero-fill new files while it throws these away.
        """
        removed = []
        while len(self.segments) > 1 and self.segments[1].prev <= keep_from:
            seg = self.segments.pop(0)
            path = os.path.join(self.dir, seg.name)
            if self._recyclable(seg, path):
                for filling in [sp for sp in self._spares if not sp.recycled]:
                    filling.cancel()  # a zero-fill under way is no longer needed
                kept = [sp for sp in self._spares if sp.recycled]
                self._spares = [*kept, _Spare(self.dir, self._next_slot(), self.segment_bytes, recycle=path)]
            else:
                os.unlink(path)
            removed.append(seg.name)
        return removed

    def _recyclable(self, seg: SegmentInfo, path: str) -> bool:
        if not (self.preallocate and seg.preallocated):
            return False
        if sum(sp.recycled for sp in self._spares) >= MAX_RECYCLED:
            return False
        return os.stat(path).st_size == self.segment_bytes

    def _next_slot(self) -> int:
        self._slots += 1
        return self._slots

    def reset(self, generation: int, base: Zxid) -> list[SegmentInfo]:
        """Start an empty log of a new generation after ``base``; returns the old segments."""
        old = self.segments
        self._close_active()
        self.generation = generation
        self.segments = []
        self.tail = base
        self.discard_pending()
        return old

    def close(self) -> None:
        spares, self._spares = self._spares, []
        for spare in spares:
            spare.cancel(discard=False)  # closing does no I/O that could fail; open reaps them
        self._close_active()

    def _close_active(self) -> None:
        if self._active is not None:
            fd, self._active = self._active.fd, None
            os.close(fd)
