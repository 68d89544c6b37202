"""A read-only view of one replica's disk: its epochs, snapshots and every logged txn.

``read_disk(path)`` takes a replica's data directory (``.../replica-N``, which holds ``store/``
and ``incarnation``) or a store directory itself. It only ever opens files for reading: it takes
no LOCK, reaps no temp file, cuts no torn tail and sets no damaged snapshot aside; what
``DiskStore`` would repair at open is reported instead. So it works on a stopped replica, and
leaves the directory byte for byte as it found it. On a running replica it reads files that may
change underneath it: a best-effort view (``Ensemble.inspect`` retries one that moved).

The directory is judged exactly as a replica judges it at open (``storage.recovery.analyze``):
when that replica would refuse to start, this raises the same ``CorruptionError`` (or
``FormatVersionError``), naming the file and offset.

What disk can tell about commitment: no commit is ever recorded. A snapshot holds the delivered
state and a replica delivers only committed txns, so every txn at or below the zxid of the
snapshot recovery starts from (``committed_through``) is known committed. A txn after it may be
committed (usually it is) or may be a proposal of a leader that died, which the next leader cuts
off with TRUNC: the disk alone cannot say, and ``LogEntry.committed`` is False for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from storage import epochs, recovery, snapshots
from storage.disk import CORRUPT_SUFFIX, LOCK_FILE
from storage.fsutil import TMP_SUFFIX, read_file
from storage.segments import SegmentInfo, parse_segment_name, read_segment, read_segment_header
from storage.txnlog import is_spare, spare_number
from zabray.errors import ConfigError, CorruptionError, StorageError
from zabray.protocol.zxid import Zxid, fmt
from zabray.trace.records import digest

STORE_DIR = "store"
INCARNATION_FILE = "incarnation"


@dataclass(frozen=True, slots=True)
class SnapshotView:
    """One snapshot file, ``size`` bytes. ``problem`` is None when its checksum verified (every
    snapshot is checked, not only the one recovery starts from); ``stale`` marks a file of an
    older generation, which recovery ignores (and ``DiskStore`` deletes at open)."""

    name: str
    generation: int
    zxid: Zxid
    size: int
    problem: str | None = None
    stale: bool = False


@dataclass(frozen=True, slots=True)
class SegmentView:
    """One log segment of the current generation: its header's ``prev`` zxid, how many records
    it holds and where its data ends (the rest is preallocated zeros). ``needed`` is False for a
    segment the snapshot recovery starts from no longer needs (only its header is trusted by a
    replica); ``problem`` is a damage found in such a segment, which a replica would not notice."""

    name: str
    seq: int
    prev: Zxid
    size: int
    records: int
    end: int
    needed: bool
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One logged txn. ``digest`` is ``zabray.trace.digest`` of its value (as in traces and
    ``Ensemble.histories``); ``committed`` is True only when the disk proves it (see the module
    docstring): False means "not known committed", not "uncommitted"."""

    zxid: Zxid
    size: int
    digest: str
    origin: int
    request_id: int
    segment: str
    offset: int
    committed: bool


@dataclass(frozen=True, slots=True)
class DiskView:
    """What a replica's directory holds, as its next start would recover it.

    Invariants: ``log`` is in strictly increasing zxid order; ``last_zxid`` is the newest
    entry's zxid, or ``committed_through`` when the log holds nothing past it; every entry with
    ``committed`` True has zxid <= ``committed_through``.
    """

    path: str
    """The store directory read."""
    incarnation: int | None
    """The replica's last incarnation (None: no ``incarnation`` file beside the store)."""
    accepted_epoch: int
    accepted_leader: int
    current_epoch: int
    generation: int
    snapshots: tuple[SnapshotView, ...]
    segments: tuple[SegmentView, ...]
    log: tuple[LogEntry, ...]
    committed_through: Zxid
    """The zxid of the snapshot recovery starts from (0: the empty initial state)."""
    last_zxid: Zxid
    torn_at: tuple[str, int] | None
    """(segment, offset) of a torn last record that the replica will cut off at its next start."""
    leftovers: tuple[str, ...]
    """Files the replica ignores or removes at open: temp files, damaged snapshots set aside."""
    spares: tuple[str, ...] = ()
    """Files kept to become later log segments (purged segments, or one being zero-filled)."""
    rejoining: bool = False
    """Wiped by a fresh restart and not yet synced by a leader: it counts in no quorum."""

    def not_known_committed(self) -> tuple[LogEntry, ...]:
        """The log's tail past ``committed_through``: durable, but the disk cannot say whether committed."""
        return tuple(e for e in self.log if not e.committed)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data; zxids as ``epoch:counter`` strings beside their integers."""
        return {
            "path": self.path, "incarnation": self.incarnation, "accepted_epoch": self.accepted_epoch,
            "accepted_leader": self.accepted_leader, "current_epoch": self.current_epoch,
            "generation": self.generation, "committed_through": fmt(self.committed_through),
            "last_zxid": fmt(self.last_zxid), "torn_at": list(self.torn_at) if self.torn_at else None,
            "leftovers": list(self.leftovers), "spares": list(self.spares),
            "snapshots": [{"name": s.name, "generation": s.generation, "zxid": fmt(s.zxid), "zxid_int": int(s.zxid),
                           "size": s.size, "problem": s.problem, "stale": s.stale} for s in self.snapshots],
            "segments": [{"name": s.name, "seq": s.seq, "prev": fmt(s.prev), "size": s.size, "records": s.records,
                          "end": s.end, "needed": s.needed, "problem": s.problem} for s in self.segments],
            "log": [{"zxid": fmt(e.zxid), "zxid_int": int(e.zxid), "size": e.size, "digest": e.digest,
                     "origin": e.origin, "request_id": e.request_id, "segment": e.segment, "offset": e.offset,
                     "committed": e.committed} for e in self.log],
        }


def store_dir(path: str | os.PathLike[str]) -> tuple[str, str | None]:
    """(store directory, replica directory or None) for a replica's data dir or a store dir;
    ``ConfigError`` when ``path`` is neither."""
    p = os.path.abspath(os.fspath(path))
    if not os.path.isdir(p):
        raise ConfigError(f"no replica data directory at {p}")
    if os.path.isdir(os.path.join(p, STORE_DIR)):
        return os.path.join(p, STORE_DIR), p
    names = os.listdir(p)
    if any(n in (LOCK_FILE, epochs.ACCEPTED_EPOCH, epochs.CURRENT_EPOCH) or parse_segment_name(n)
           or snapshots.parse_name(n) for n in names):
        return p, None
    raise ConfigError(f"{p} is not a replica's data directory (no {STORE_DIR}/ in it) nor a store")


def read_disk(path: str | os.PathLike[str]) -> DiskView:
    """A read-only view of the replica data (or store) directory ``path``; never writes to it.

    Raises ``CorruptionError`` (``FormatVersionError``) when a replica would refuse this
    directory, ``ConfigError`` when ``path`` is not one, ``StorageError`` when a file cannot be
    read (or vanished: the replica is running and changed it).
    """
    store, replica = store_dir(path)
    try:
        return _read(store, replica)
    except StorageError:
        raise
    except OSError as e:
        raise StorageError(f"cannot read {store}: {e}") from e


def _read(store: str, replica: str | None) -> DiskView:
    rec = recovery.analyze(store)  # the replica's own judgement: raises what its start would
    state = rec.state
    committed = state.snapshot_zxid
    names = sorted(os.listdir(store))
    snaps = []
    for name in names:
        s = snapshots.parse_name(name)
        if s is None:
            continue
        problem = None
        try:  # every one, not just the one recovery starts from
            snapshots.read(store, s)
        except CorruptionError as e:
            problem = str(e)
        snaps.append(SnapshotView(name, s.generation, s.zxid, os.path.getsize(os.path.join(store, name)),
                                  problem, stale=name in rec.stale))
    needed_from = 0
    for i, seg in enumerate(rec.segments):
        if seg.prev <= committed:
            needed_from = i
    segments: list[SegmentView] = []
    entries: list[LogEntry] = []
    torn: tuple[str, int] | None = None
    for i, seg in enumerate(rec.segments):
        newest = i == len(rec.segments) - 1
        view, seg_entries, seg_torn = _segment(store, seg, committed, needed=i >= needed_from, newest=newest)
        segments.append(view)
        entries.extend(seg_entries)
        torn = seg_torn or torn
    entries.sort(key=lambda e: e.zxid)
    # last_zxid comes from these entries, not from analyze's earlier read: on a running replica
    # the log may have grown in between, and the view must agree with itself.
    # An old segment may repeat zxids a newer one holds only if the directory is damaged, and
    # then analyze has raised already; keep the invariant explicit anyway.
    for a, b in zip(entries, entries[1:], strict=False):
        if b.zxid <= a.zxid:
            raise CorruptionError(f"{b.segment}: zxid {fmt(b.zxid)} at offset {b.offset} repeats {a.segment}'s")
    # (Spare files are kept for later segments on purpose: not leftovers.)
    leftovers = tuple(n for n in names if (n.endswith(TMP_SUFFIX) and not is_spare(n)) or n.endswith(CORRUPT_SUFFIX)
                      or (n in rec.stale and parse_segment_name(n) is not None))
    return DiskView(
        path=store, incarnation=_incarnation(replica), accepted_epoch=state.accepted_epoch,
        accepted_leader=state.accepted_leader, current_epoch=state.current_epoch, generation=rec.generation,
        rejoining=state.rejoining,
        snapshots=tuple(snaps), segments=tuple(segments), log=tuple(entries), committed_through=committed,
        last_zxid=max(committed, entries[-1].zxid) if entries else committed, torn_at=torn, leftovers=leftovers,
        spares=tuple(sorted((n for n in names if is_spare(n)), key=spare_number)),
    )


def _segment(store: str, seg: SegmentInfo, committed: Zxid, *, needed: bool,
             newest: bool) -> tuple[SegmentView, list[LogEntry], tuple[str, int] | None]:
    """Scan one segment. A needed one was verified by ``analyze`` already; damage in one the
    replica no longer reads is reported on the segment rather than raised."""
    size = os.path.getsize(os.path.join(store, seg.name))
    try:
        scan = read_segment(store, seg, keep_after=-1, may_be_torn=newest)
    except CorruptionError as e:
        if needed:
            raise
        header = read_segment_header(store, seg.name, seg.generation, seg.seq)
        return SegmentView(seg.name, seg.seq, header.prev, size, 0, 0, False, str(e)), [], None
    entries = [LogEntry(t.zxid, len(t.value), digest(t.value), t.origin, t.request_id, seg.name, int(off),
                        t.zxid <= committed)
               for t, off in zip(scan.txns, scan.offsets, strict=True)]
    view = SegmentView(seg.name, seg.seq, seg.prev, size, len(entries), scan.end, needed)
    return view, entries, (seg.name, scan.torn) if scan.torn is not None else None


def _incarnation(replica: str | None) -> int | None:
    if replica is None:
        return None
    try:
        return int(read_file(os.path.join(replica, INCARNATION_FILE)).decode().strip())
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise CorruptionError(f"{INCARNATION_FILE}: not a number at offset 0: {e}") from None


__all__ = ["DiskView", "LogEntry", "SegmentView", "SnapshotView", "read_disk", "store_dir"]
