"""Reading a store directory back: which files count, and what state they hold.

Rules (``analyze`` is read-only; ``DiskStore`` applies the repairs it reports):

- The current generation G is the highest generation of any snapshot or segment file. Files of
  older generations are leftovers of an interrupted ``install_snapshot`` (whose commit point is
  the rename of the generation-G snapshot) and are ignored, then deleted.
- G > 0 needs at least one snapshot of generation G (the installed one). In generation 0 an
  implicit empty snapshot at zxid 0 stands before the real ones.
- The newest snapshot of G (by zxid) is used when it verifies. A damaged one is skipped for the
  next older valid one only if the log covers the gap: some segment starts at or before the older
  snapshot's zxid, the segments from there chain without a hole, and the log reaches the damaged
  snapshot's zxid. Otherwise ``CorruptionError``. Damaged snapshots are reported for quarantine.
- Segments are verified from the one the chosen snapshot needs (the last with prev <= its zxid)
  to the newest; older ones are only header-checked, so opening does not re-read history that
  no kept snapshot needs. Only the newest segment may end in a torn record.
- A ``REJOINING`` file (``DiskStore.mark_rejoining``) with currentEpoch still 0 makes the state
  ``rejoining``: the directory was wiped and no leader has synced it since.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from storage import configfile, epochs, snapshots
from storage.segments import (
    SegmentInfo,
    SegmentScan,
    parse_segment_name,
    read_segment,
    read_segment_header,
)
from storage.snapshots import SnapshotFile
from zabray.errors import CorruptionError, FormatVersionError
from zabray.protocol.durable import DurableState
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import ZERO, Zxid, fmt

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Recovered:
    """The durable state plus what the writer and the repair step need to know."""

    state: DurableState
    generation: int
    snapshots: tuple[SnapshotFile, ...]  # valid-looking snapshots of G, by zxid ascending
    damaged_snapshots: tuple[str, ...]  # to quarantine (renamed, never deleted)
    segments: tuple[SegmentInfo, ...]  # of G, by seq ascending
    last_scan: SegmentScan | None  # the newest segment, scanned
    stale: tuple[str, ...]  # files of older generations


def _list(dirpath: str) -> tuple[list[SnapshotFile], list[tuple[int, int, str]], int]:
    snaps: list[SnapshotFile] = []
    segs: list[tuple[int, int, str]] = []
    for name in os.listdir(dirpath):
        s = snapshots.parse_name(name)
        if s is not None:
            snaps.append(s)
            continue
        p = parse_segment_name(name)
        if p is not None:
            segs.append((p[0], p[1], name))
    gen = max([s.generation for s in snaps] + [g for g, _, _ in segs] + [0])
    return snaps, segs, gen


REJOINING_FILE = "REJOINING"


def analyze(dirpath: str) -> Recovered:
    """Work out the durable state of ``dirpath``; ``CorruptionError`` when it cannot be trusted."""
    accepted = epochs.read(dirpath, epochs.ACCEPTED_EPOCH)
    current = epochs.read(dirpath, epochs.CURRENT_EPOCH)
    config, left = configfile.read(dirpath)
    all_snaps, all_segs, gen = _list(dirpath)
    stale = tuple(
        sorted([s.name for s in all_snaps if s.generation < gen] + [n for g, _, n in all_segs if g < gen])
    )
    snaps = sorted(s for s in all_snaps if s.generation == gen)
    seg_names = sorted((seq, name) for g, seq, name in all_segs if g == gen)
    if gen > 0 and not snaps:
        raise CorruptionError(
            f"generation {gen} has log segments but no snapshot (its installed snapshot is missing)"
        )

    segments: list[SegmentInfo] = []
    for seq, name in seg_names:
        info = read_segment_header(dirpath, name, gen, seq)
        if segments and info.prev < segments[-1].prev:
            raise CorruptionError(
                f"{name}: header prev {fmt(info.prev)} at offset 24 goes back from {fmt(segments[-1].prev)}"
            )
        segments.append(info)

    # Choose the snapshot: newest valid one, the implicit empty one last in generation 0.
    candidates: list[SnapshotFile | None] = list(reversed(snaps))
    if gen == 0:
        candidates.append(None)
    damaged: list[tuple[SnapshotFile, CorruptionError]] = []
    chosen: SnapshotFile | None = None
    state: bytes | None = None
    for cand in candidates:
        if cand is None:
            chosen, state = None, None
            break
        try:
            state = snapshots.read(dirpath, cand)
        except FormatVersionError:
            raise  # not damage: an older snapshot would not be read either, and nothing is set aside
        except CorruptionError as e:
            log.warning("%s", e)
            damaged.append((cand, e))
            continue
        chosen = cand
        break
    else:
        raise CorruptionError("no usable snapshot: " + "; ".join(str(e) for _, e in damaged))
    snap_zxid: Zxid = chosen.zxid if chosen is not None else ZERO
    chosen_name = chosen.name if chosen is not None else "the empty initial state"

    # Replay the log from the segment the chosen snapshot needs.
    txns: list[Txn] = []
    last_scan: SegmentScan | None = None
    tail: Zxid = snap_zxid
    if segments:
        start = None
        for i, seg in enumerate(segments):
            if seg.prev <= snap_zxid:
                start = i
        if start is None:
            what = f"{damaged[0][0].name} is damaged and " if damaged else ""
            raise CorruptionError(
                f"{what}the log starts after {fmt(segments[0].prev)} ({segments[0].name}, offset 24), "
                f"past {chosen_name} at {fmt(snap_zxid)}: segments are missing"
            )
        prev_tail: Zxid | None = None
        for i in range(start, len(segments)):
            seg = segments[i]
            if prev_tail is not None and seg.prev != prev_tail:
                raise CorruptionError(
                    f"{seg.name}: header says the log continues from {fmt(seg.prev)} (offset 24) but the "
                    f"previous segment ends at {fmt(prev_tail)}: a segment is missing or was cut short"
                )
            scan = read_segment(dirpath, seg, keep_after=snap_zxid, may_be_torn=i == len(segments) - 1)
            txns.extend(scan.txns)
            prev_tail = scan.tail
            last_scan = scan
        assert prev_tail is not None
        tail = prev_tail
    if damaged:
        newest = damaged[0][0]
        if tail < newest.zxid:
            raise CorruptionError(
                f"{newest.name} is damaged and the log (up to {fmt(tail)}) does not reach its zxid "
                f"{fmt(newest.zxid)}, so {chosen_name} cannot stand in for it: {damaged[0][1]}"
            )
        log.warning(
            "recovered from %s plus the log instead of damaged %s",
            chosen_name,
            ", ".join(s.name for s, _ in damaged),
        )
    rejoining = current.epoch == 0 and os.path.exists(os.path.join(dirpath, REJOINING_FILE))
    durable = DurableState(accepted.epoch, accepted.leader, current.epoch, snap_zxid, state, tuple(txns), rejoining,
                           config, left)
    bad = {s.name for s, _ in damaged}
    return Recovered(
        durable,
        gen,
        tuple(s for s in snaps if s.name not in bad),
        tuple(sorted(bad)),
        tuple(segments),
        last_scan,
        stale,
    )
