"""Durable-append throughput of DiskStore next to the raw write + fdatasync rate of the same disk.

    python benchmarks/storage.py [--dir D] [--seconds S] [--segment-mb M]

For each group size N (1, 10, 100, 1000 records of 1 KiB per fsync):

- raw:       one ``os.pwrite`` of N KiB + one ``os.fdatasync`` into a zero-filled file, so the
             disk overwrites allocated blocks, which is what DiskStore's preallocated segments
             get; raw records/s = fsyncs/s x N.
- grow:      the same, appending to a file that grows (no preallocation), for reference.
- DiskStore: ``append`` N txns then ``sync``; only those two calls are timed (building the Txn
             objects is the caller's work). Segment rollovers fall inside the timed syncs.
             After each segment's worth of writes the store saves a snapshot (untimed, as a
             replica's snapshots are its own work), which purges the log: steady state, where
             purged segments are recycled as new ones instead of new files being zero-filled.
             Timing starts after three segments' worth of untimed warm-up writes.

A shared disk's fsync rate can swing several-fold within seconds, so raw and DiskStore are
measured in alternation, one group commit each in turn, until each side has had S seconds of
timed work: both see the same disk conditions and the ratio DiskStore records/s / raw records/s
is fair. (The growing file is timed afterwards, on its own, for reference only.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from storage import DiskStore  # noqa: E402
from zabray.experiments.machine import machine_line  # noqa: E402
from zabray.protocol.messages import Txn  # noqa: E402
from zabray.protocol.zxid import Zxid  # noqa: E402

RECORD = 1024
GROUPS = (1, 10, 100, 1000)
RAW_FILE_MB = 256


class RawFile:
    """pwrite + fdatasync of fixed-size writes into one file, zero-prefilled or growing."""

    def __init__(self, path: str, write_bytes: int, *, prefill: bool) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.data = os.urandom(write_bytes)
        self.prefill = prefill
        self.off = 0
        if prefill:
            zeros = bytes(1 << 20)
            for off in range(0, RAW_FILE_MB << 20, len(zeros)):
                os.pwrite(self.fd, zeros, off)
            os.fsync(self.fd)

    def one(self) -> None:
        """One group commit: one write, one fdatasync."""
        os.pwrite(self.fd, self.data, self.off)
        os.fdatasync(self.fd)
        self.off += len(self.data)
        if self.prefill and self.off + len(self.data) > RAW_FILE_MB << 20:
            self.off = 0

    def rate(self, seconds: float) -> float:
        """fsyncs per second over about ``seconds``."""
        n = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            self.one()
            n += 1
        return n / (time.perf_counter() - start)

    def close(self) -> None:
        os.close(self.fd)
        os.unlink(self.path)


class StoreRun:
    """append(N txns) + sync through one DiskStore; only those calls are timed."""

    def __init__(self, path: str, group: int, segment_bytes: int) -> None:
        self.store = DiskStore(path, segment_bytes=segment_bytes, keep_snapshots=1)
        self.segment_bytes = segment_bytes
        self.group = group
        self.value = os.urandom(RECORD)
        self.counter = 0
        self.epoch = 1
        self.written = 0
        self._warm()

    def _warm(self) -> None:
        """Untimed, as the raw file is prefilled untimed: three segments' worth of writes and
        snapshots, so that timing starts in the steady state, with purged segments to recycle
        (a new store zero-fills its first segments)."""
        group, self.group = self.group, 1000
        total = 0
        while total < 3 * self.segment_bytes:
            self.one()
            total += self.group * RECORD
        self.group = group

    def one(self) -> tuple[float, float]:
        """One group commit of ``group`` records; returns the seconds append and sync took."""
        if self.written > self.segment_bytes:  # a snapshot (untimed) purges the log, as a replica's do
            self.store.save_snapshot(Zxid.of(self.epoch, self.counter), b"")
            self.written = 0
        batch = [Txn(Zxid.of(self.epoch, self.counter + i + 1), self.value, 1, i) for i in range(self.group)]
        self.counter += self.group
        t0 = time.perf_counter()
        self.store.append(batch)
        t1 = time.perf_counter()
        self.store.sync()
        t2 = time.perf_counter()
        self.written += self.group * RECORD
        return t1 - t0, t2 - t1

    def close(self) -> None:
        self.store.close()


def measure(base: str, group: int, seconds: float, segment_bytes: int) -> dict[str, float]:
    """Alternate one raw group commit with one DiskStore group commit until each side has had
    ``seconds`` of timed work, so both see the same disk conditions; then time the growing file."""
    raw = RawFile(os.path.join(base, "raw.bin"), RECORD * group, prefill=True)
    store = StoreRun(os.path.join(base, "store"), group, segment_bytes)
    try:
        raw_t = append_t = sync_t = 0.0
        n = 0
        while raw_t < seconds or append_t + sync_t < seconds:
            t0 = time.perf_counter()
            raw.one()
            t1 = time.perf_counter()
            a, s = store.one()
            raw_t += t1 - t0
            append_t += a
            sync_t += s
            n += 1
        raw_rate = n * group / raw_t
        store_rate = n * group / (append_t + sync_t)
    finally:
        raw.close()
        store.close()
        shutil.rmtree(os.path.join(base, "store"), ignore_errors=True)
    grow = RawFile(os.path.join(base, "grow.bin"), RECORD * group, prefill=False)
    try:
        grow_rate = grow.rate(seconds / 2) * group
    finally:
        grow.close()
    return {
        "raw": raw_rate,
        "grow": grow_rate,
        "store": store_rate,
        "ratio": store_rate / raw_rate,
        "raw_us": raw_t / n * 1e6,
        "append_us": append_t / n * 1e6,
        "sync_us": sync_t / n * 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--dir", help="directory on the disk to measure (default: a temp dir)")
    ap.add_argument(
        "--seconds", type=float, default=3.0, help="timed seconds per side per group size (default 3)"
    )
    ap.add_argument("--segment-mb", type=int, default=64, help="DiskStore segment size in MiB (default 64)")
    args = ap.parse_args(argv)
    base = tempfile.mkdtemp(prefix="zabray-bench-", dir=args.dir)
    try:
        print(machine_line())
        print(
            f"disk: {os.path.abspath(base)}   record: {RECORD} B   {args.seconds:g} s per side per group size\n"
            f"DiskStore: fsync on, preallocated segments of {args.segment_mb} MiB, keep_snapshots=1, a snapshot "
            "after each segment's worth of writes (purged segments recycled), 3 segments of warm-up"
        )
        rows = []
        for group in GROUPS:
            rows.append((group, measure(base, group, args.seconds, args.segment_mb << 20)))
            print(f"  measured group {group}", file=sys.stderr)
        print()
        print(
            f"{'group':>6} | {'raw fsync/s':>11} {'raw rec/s':>11} | {'grow rec/s':>11} "
            f"| {'DiskStore rec/s':>15} {'syncs/s':>8} | {'ratio':>6} "
            f"| {'raw us':>7} {'append us':>9} {'sync us':>8}"
        )
        print("-" * 113)
        for group, m in rows:
            print(
                f"{group:>6} | {m['raw'] / group:>11,.0f} {m['raw']:>11,.0f} | {m['grow']:>11,.0f} "
                f"| {m['store']:>15,.0f} {m['store'] / group:>8,.0f} | {m['ratio']:>6.0%} "
                f"| {m['raw_us']:>7,.0f} {m['append_us']:>9,.0f} {m['sync_us']:>8,.0f}"
            )
        print()
        print("raw = pwrite(N KiB) + fdatasync into a zero-filled file; grow = the same into a growing file;")
        print("ratio = DiskStore rec/s / raw rec/s, the two measured in alternation, commit by commit.")
        print("per commit: raw us = raw write + fdatasync; append us = DiskStore encoding the records (CPU);")
        print("sync us = joining and checksumming the group, its write + fdatasync, rollovers and background")
        print("preallocation.")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
