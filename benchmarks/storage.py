"""Durable-append throughput of DiskStore next to the raw write + fdatasync rate of the same disk.

    python benchmarks/storage.py [--dir D] [--seconds S] [--repeat R] [--segment-mb M]

For each group size N (1, 10, 100, 1000 records of 1 KiB per fsync):

- raw:       one ``os.pwrite`` of N KiB + one ``os.fdatasync`` into a zero-filled file, so the
             disk overwrites allocated blocks, exactly what DiskStore's preallocated segments get;
             records/s = fsyncs/s x N. (Also shown: appending to a growing file, no preallocation.)
- DiskStore: ``append`` N txns then ``sync``; only those two calls are timed (building the Txn
             objects is the caller's work). Segment rollovers, each writing a whole preallocated
             segment of zeros, fall inside the timed syncs and are counted.

Each cell is the median of ``--repeat`` interleaved runs of ``--seconds`` each; the ratio is
DiskStore records/s over raw records/s at the same group size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from storage import DiskStore  # noqa: E402
from zabray.protocol.messages import Txn  # noqa: E402
from zabray.protocol.zxid import Zxid  # noqa: E402

RECORD = 1024
GROUPS = (1, 10, 100, 1000)


def raw_rate(dirpath: str, group: int, seconds: float, *, prefill_mb: int) -> float:
    """fsyncs per second of pwrite(group KiB) + fdatasync; zero-prefilled file unless prefill_mb=0."""
    path = os.path.join(dirpath, "raw.bin")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        size = prefill_mb << 20
        if size:
            zeros = bytes(1 << 20)
            for off in range(0, size, len(zeros)):
                os.pwrite(fd, zeros, off)
            os.fsync(fd)
        data = os.urandom(RECORD * group)
        off = n = 0
        wrap = size - len(data) if size else 1 << 62
        start = time.perf_counter()
        while True:
            os.pwrite(fd, data, off)
            os.fdatasync(fd)
            n += 1
            off += len(data)
            if off > wrap:
                off = 0
            if n % 8 == 0 and time.perf_counter() - start >= seconds:
                break
        return n / (time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)


def store_rate(dirpath: str, group: int, seconds: float, *, segment_bytes: int) -> float:
    """Records per second through DiskStore: append(group txns) + sync, only those calls timed."""
    path = os.path.join(dirpath, "store")
    value = os.urandom(RECORD)
    store = DiskStore(path, segment_bytes=segment_bytes)
    try:
        # Untimed warm-up sync creates the first segment, as the raw file is prefilled untimed;
        # rollovers to later segments happen inside the timed syncs.
        store.append([Txn(Zxid.of(1, 1), value)])
        store.sync()
        counter = 1
        records = 0
        busy = 0.0
        while busy < seconds:
            batch = [Txn(Zxid.of(1, counter + i + 1), value, 1, counter + i) for i in range(group)]
            counter += group
            t0 = time.perf_counter()
            store.append(batch)
            store.sync()
            busy += time.perf_counter() - t0
            records += group
        return records / busy
    finally:
        store.close()
        shutil.rmtree(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", help="directory on the disk to measure (default: a temp dir)")
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds per measurement (default 2)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per cell, median taken (default 3)")
    ap.add_argument("--segment-mb", type=int, default=64, help="DiskStore segment size in MiB (default 64)")
    args = ap.parse_args(argv)
    base = tempfile.mkdtemp(prefix="zabray-bench-", dir=args.dir)
    segment = args.segment_mb << 20
    try:
        print(
            f"disk: {os.path.abspath(base)}   record: {RECORD} B   {args.repeat} x {args.seconds:g} s per cell"
        )
        rows = []
        for group in GROUPS:
            # Interleaved runs, medians: a shared or throttled disk drifts, and drift should hit
            # both sides alike.
            runs: list[tuple[float, float, float]] = []
            for _ in range(args.repeat):
                runs.append(
                    (
                        raw_rate(base, group, args.seconds, prefill_mb=0),
                        raw_rate(base, group, args.seconds, prefill_mb=256),
                        store_rate(base, group, args.seconds, segment_bytes=segment),
                    )
                )
            raw_grow, raw, store = (statistics.median(col) for col in zip(*runs, strict=True))
            rows.append((group, raw_grow, raw, store))
            print(f"  measured group {group}", file=sys.stderr)
        print()
        print(
            f"{'group':>6} | {'raw fsync/s':>11} {'raw rec/s':>11} | {'grow fsync/s':>12} {'grow rec/s':>11} "
            f"| {'DiskStore rec/s':>15} {'sync/s':>9} | {'ratio':>6}"
        )
        print("-" * 104)
        for group, raw_grow, raw, store in rows:
            print(
                f"{group:>6} | {raw:>11,.0f} {raw * group:>11,.0f} | {raw_grow:>12,.0f} {raw_grow * group:>11,.0f} "
                f"| {store:>15,.0f} {store / group:>9,.0f} | {store / (raw * group):>6.0%}"
            )
        print()
        print("raw = pwrite(N KiB) + fdatasync into a zero-filled file (what preallocated segments get);")
        print("grow = the same appending to a growing file; ratio = DiskStore rec/s / raw rec/s.")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
