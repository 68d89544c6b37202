"""Shared by the DiskStore tests: a reference model, a seeded workload, fault injection, and the
child process of the SIGKILL test (``python disk_harness.py child DIR SEED SEGMENT_BYTES``).

The model is what must be durable after each operation. A crash inside operation j may leave
the state before it, the state after it, or (for a log sync, whose one write can be cut short)
the old log cut back no further than the truncation point, or the truncated log plus a prefix
of the new records. ``allowed_views`` lists exactly those.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

if __name__ == "__main__":  # run as a script by the SIGKILL test: make the repo importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from zabray.protocol.durable import DurableState  # noqa: E402
from zabray.protocol.messages import Txn  # noqa: E402
from zabray.protocol.zxid import Zxid  # noqa: E402

# -- application state: a hash chain, so "snapshot + replay" can be compared with "replay all" ----


def fold(state: bytes | None, txns: list[Txn] | tuple[Txn, ...]) -> bytes:
    """Digest of applying ``txns`` to ``state`` (whose first 32 bytes are its digest)."""
    d = state[:32] if state else bytes(32)
    for t in txns:
        d = hashlib.sha256(d + int(t.zxid).to_bytes(8, "big") + t.value).digest()
    return d


# -- the model ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    accepted: tuple[int, int] = (0, -1)
    current: int = 0
    snap_zxid: int = 0
    snap: bytes | None = None
    log: tuple[Txn, ...] = ()  # every txn after snap_zxid at least (may hold older ones)
    hi: int = 0  # generator bookkeeping: new zxids must exceed this

    @classmethod
    def of(cls, st: DurableState) -> Model:
        return cls(
            (st.accepted_epoch, st.accepted_leader),
            st.current_epoch,
            st.snapshot_zxid,
            st.snapshot,
            st.txns,
            st.last_zxid,
        )

    def view(self) -> tuple:
        return (
            self.accepted,
            self.current,
            self.snap_zxid,
            self.snap,
            tuple(t for t in self.log if t.zxid > self.snap_zxid),
        )

    @property
    def last(self) -> int:
        return max([self.snap_zxid] + [t.zxid for t in self.log])

    def digest(self) -> bytes:
        return fold(self.snap, [t for t in self.log if t.zxid > self.snap_zxid])


def view_of(st: DurableState) -> tuple:
    return ((st.accepted_epoch, st.accepted_leader), st.current_epoch, st.snapshot_zxid, st.snapshot, st.txns)


# -- operations -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sync:
    steps: tuple  # ("append", tuple[Txn, ...]) | ("truncate", int)


@dataclass(frozen=True)
class Accepted:
    epoch: int
    leader: int


@dataclass(frozen=True)
class Current:
    epoch: int


@dataclass(frozen=True)
class Save:
    zxid: int
    state: bytes


@dataclass(frozen=True)
class Install:
    zxid: int
    state: bytes


@dataclass(frozen=True)
class Reopen:
    pass


Op = Sync | Accepted | Current | Save | Install | Reopen


def apply_model(m: Model, op: Op) -> Model:
    if isinstance(op, Sync):
        log = list(m.log)
        hi = m.hi
        for kind, arg in op.steps:
            if kind == "append":
                log.extend(arg)
                hi = max(hi, arg[-1].zxid)
            else:
                log = [t for t in log if t.zxid <= arg]
                hi = max(hi, arg)
        return replace(m, log=tuple(log), hi=hi)
    if isinstance(op, Accepted):
        return replace(m, accepted=(op.epoch, op.leader))
    if isinstance(op, Current):
        return replace(m, current=op.epoch)
    if isinstance(op, Save):
        return replace(m, snap_zxid=op.zxid, snap=op.state, log=tuple(t for t in m.log if t.zxid > op.zxid))
    if isinstance(op, Install):
        return replace(m, snap_zxid=op.zxid, snap=op.state, log=(), hi=max(m.hi, op.zxid))
    return m


def allowed_views(before: Model, op: Op, after: Model) -> list[tuple]:
    """Every state a crash inside ``op`` may legitimately leave behind."""
    views = [before.view(), after.view()]
    if isinstance(op, Sync):
        old, new = before.log, after.log
        k = 0
        while k < min(len(old), len(new)) and old[k] == new[k]:
            k += 1
        for m in range(k, len(old) + 1):  # truncation under way: later segments already gone
            views.append(replace(before, log=old[:m]).view())
        for m in range(k, len(new) + 1):  # truncated, then a prefix of the one write
            views.append(replace(before, log=new[:m]).view())
    return views


_POOL = random.Random(0).randbytes(1 << 21)


def _bytes(rng: random.Random, n: int) -> bytes:
    """``n`` pseudo-random bytes, cheaply (a slice of a fixed pool), deterministic in ``rng``."""
    off = rng.randrange(len(_POOL) - n)
    return _POOL[off : off + n]


def _txns(rng: random.Random, first: Zxid, n: int, max_value: int) -> tuple[Txn, ...]:
    out = []
    z = int(first)
    for _ in range(n):
        out.append(
            Txn(Zxid(z), _bytes(rng, rng.randint(0, max_value)), rng.randint(-1, 4), rng.randint(0, 1 << 40))
        )
        z += 1
    return tuple(out)


def _next(m_hi: int, new_epoch: bool) -> Zxid:
    z = Zxid(m_hi)
    return Zxid.of(z.epoch + 1, 1) if new_epoch else Zxid(m_hi + 1)


def gen_ops(rng: random.Random, start: Model, n: int, **kw) -> list[Op]:  # type: ignore[no-untyped-def]
    return list(itertools.islice(iter_ops(rng, start, **kw), n))


def iter_ops(
    rng: random.Random,
    start: Model,
    *,
    max_batch: int = 20,
    max_value: int = 300,
    max_snap: int = 3000,
    reopen: bool = True,
    p_truncate: float = 0.25,
) -> Iterator[Op]:
    """An endless random but valid op sequence from ``start`` (zxids increase, TRUNC/snapshots
    never undo delivered state, epochs only grow), deterministic in ``rng`` and ``start``."""
    m = start
    while True:
        r = rng.random()
        above = [t.zxid for t in m.log if t.zxid > m.snap_zxid]
        op: Op
        if r < 0.5:
            steps: list = []
            if above and rng.random() < p_truncate:
                z = rng.choice(above + [m.snap_zxid])
                steps.append(("truncate", z))
                first = _next(max(m.hi, z), True)
            else:
                first = _next(m.hi, rng.random() < 0.1)
            batch = _txns(rng, first, rng.randint(1, max_batch), max_value)
            steps.append(("append", batch))
            if rng.random() < 0.15:  # cut the buffered batch itself, then carry on
                cut = rng.choice(batch).zxid
                steps.append(("truncate", cut))
                steps.append(
                    ("append", _txns(rng, _next(batch[-1].zxid, True), rng.randint(1, 3), max_value))
                )
            op = Sync(tuple(steps))
        elif r < 0.6:
            op = Accepted(m.accepted[0] + rng.randint(1, 2), rng.randint(0, 4))
        elif r < 0.68:
            op = Current(max(m.current, m.accepted[0]))
        elif r < 0.85:
            z = rng.choice(above) if above else m.snap_zxid
            state = fold(m.snap, [t for t in m.log if m.snap_zxid < t.zxid <= z]) + _bytes(
                rng, rng.randint(0, max_snap)
            )
            op = Save(z, state)
        elif r < 0.93 or not reopen:
            z = rng.choice([m.snap_zxid, m.last, int(_next(m.hi, True)) - 1])
            op = Install(max(z, m.snap_zxid), _bytes(rng, 32 + rng.randint(0, max_snap)))
        else:
            op = Reopen()
        yield op
        m = apply_model(m, op)


def run_op(store, op: Op):  # type: ignore[no-untyped-def]
    """Apply one op to a DiskStore; returns the store (a Reopen returns a new one)."""
    from storage.disk import DiskStore

    if isinstance(op, Sync):
        for kind, arg in op.steps:
            if kind == "append":
                store.append(arg)
            else:
                store.truncate(Zxid(arg))
        store.sync()
    elif isinstance(op, Accepted):
        store.write_accepted_epoch(op.epoch, op.leader)
    elif isinstance(op, Current):
        store.write_current_epoch(op.epoch)
    elif isinstance(op, Save):
        store.save_snapshot(Zxid(op.zxid), op.state)
    elif isinstance(op, Install):
        store.install_snapshot(Zxid(op.zxid), op.state)
    elif isinstance(op, Reopen):
        opts = dict(
            keep_snapshots=store.keep_snapshots,
            segment_bytes=store.segment_bytes,
            preallocate=store.preallocate,
        )
        store.close()
        store = DiskStore(store.path, **opts)
    return store


# -- fault injection ------------------------------------------------------------------------------


class Crash(BaseException):
    """The process 'dies' here: nothing after this point runs."""


_PATCHED = (
    "open",
    "close",
    "write",
    "pwrite",
    "pwritev",
    "fsync",
    "fdatasync",
    "replace",
    "rename",
    "unlink",
    "ftruncate",
)


@dataclass
class Injector:
    """Wraps the ``os`` calls the store makes on files under ``root`` and counts them as points.

    At point ``at`` it does ``action``: "crash" (raise ``Crash``; a write first writes a random
    prefix of its data, a torn write), "error" (raise ``OSError(EIO)``; a write may first write a
    prefix), or "powercut" (crash, then undo effects no fsync made durable: see ``PowerCut``).
    """

    root: str
    at: int = -1
    action: str = "crash"
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    count: int = 0
    fds: dict = field(default_factory=dict)
    power: PowerCut | None = None
    fired: bool = False

    def _ours(self, path) -> bool:  # type: ignore[no-untyped-def]
        return isinstance(path, (str, bytes, os.PathLike)) and os.path.abspath(os.fsdecode(path)).startswith(
            self.root
        )

    @contextmanager
    def installed(self) -> Iterator[Injector]:
        real = {n: getattr(os, n) for n in _PATCHED}
        if self.action == "powercut":
            self.power = PowerCut(self.root, real, self.rng)

        def point(name: str, torn: Callable[[int], None] | None = None) -> None:
            i = self.count
            self.count += 1
            if i != self.at:
                return
            self.fired = True
            if torn is not None and self.rng.random() < 0.7:
                torn(self.rng.random())
            if self.action == "error":
                raise OSError(errno.EIO, f"injected EIO at {name} (point {i})")
            raise Crash(f"{name} at point {i}")

        def w_open(path, flags, mode=0o777, *a, **k):  # type: ignore[no-untyped-def]
            if not self._ours(path):
                return real["open"](path, flags, mode, *a, **k)
            point("open")
            if self.power:
                return self.power.open(path, flags, mode)
            fd = real["open"](path, flags, mode, *a, **k)
            self.fds[fd] = path
            return fd

        def _write_prefix(fd: int, data, off: int | None):  # type: ignore[no-untyped-def]
            def torn(frac: float) -> None:
                part = bytes(memoryview(data)[: int(len(data) * frac)])
                if self.power:
                    self.power.pwrite(fd, part, off if off is not None else os.lseek(fd, 0, os.SEEK_CUR))
                elif off is None:
                    real["write"](fd, part)
                else:
                    real["pwrite"](fd, part, off)

            return torn

        def w_write(fd, data):  # type: ignore[no-untyped-def]
            if fd not in self.fds and not (self.power and fd in self.power.fds):
                return real["write"](fd, data)
            point("write", _write_prefix(fd, data, None))
            if self.power:
                off = os.lseek(fd, 0, os.SEEK_CUR)
                n = self.power.pwrite(fd, data, off)
                os.lseek(fd, off + n, os.SEEK_SET)
                return n
            return real["write"](fd, data)

        def w_pwrite(fd, data, off):  # type: ignore[no-untyped-def]
            if fd not in self.fds and not (self.power and fd in self.power.fds):
                return real["pwrite"](fd, data, off)
            point("pwrite", _write_prefix(fd, data, off))
            if self.power:
                return self.power.pwrite(fd, data, off)
            return real["pwrite"](fd, data, off)

        def w_pwritev(fd, bufs, off):  # type: ignore[no-untyped-def]
            if fd not in self.fds and not (self.power and fd in self.power.fds):
                return real["pwritev"](fd, bufs, off)
            data = b"".join(bytes(b) for b in bufs)
            point("pwritev", _write_prefix(fd, data, off))
            if self.power:
                return self.power.pwrite(fd, data, off)
            return real["pwritev"](fd, bufs, off)

        def fd_call(name: str):  # type: ignore[no-untyped-def]
            def w(fd, *a):  # type: ignore[no-untyped-def]
                if fd not in self.fds and not (self.power and fd in self.power.fds):
                    return real[name](fd, *a)
                point(name)
                if self.power:
                    return getattr(self.power, name)(fd, *a)
                return real[name](fd, *a)

            return w

        def path_call(name: str):  # type: ignore[no-untyped-def]
            def w(*paths, **k):  # type: ignore[no-untyped-def]
                if not any(self._ours(p) for p in paths):
                    return real[name](*paths, **k)
                point(name)
                if self.power:
                    return getattr(self.power, name)(*paths)
                return real[name](*paths, **k)

            return w

        def w_close(fd):  # type: ignore[no-untyped-def]
            self.fds.pop(fd, None)
            if self.power:
                self.power.fds.pop(fd, None)
            return real["close"](fd)

        wrapped = {
            "open": w_open,
            "close": w_close,
            "write": w_write,
            "pwrite": w_pwrite,
            "pwritev": w_pwritev,
            "fsync": fd_call("fsync"),
            "fdatasync": fd_call("fdatasync"),
            "ftruncate": fd_call("ftruncate"),
            "replace": path_call("replace"),
            "rename": path_call("rename"),
            "unlink": path_call("unlink"),
        }
        for n, f in wrapped.items():
            setattr(os, n, f)
        try:
            yield self
        finally:
            for n, f in real.items():
                setattr(os, n, f)

    def power_fail(self) -> None:
        """After a Crash in "powercut" mode: drop what was never made durable."""
        if self.power is not None:
            self.power.fail()


class PowerCut:
    """A model of losing the page cache: effects not yet made durable by an fsync may vanish.

    Files: a random suffix of each file's un-fsynced writes and ftruncates is lost, the first lost
    write possibly in part (a prefix of it survives); an fsync/fdatasync of the file makes its
    earlier changes durable. (Writes reaching the disk out of order within one file are not
    modelled: recovery deliberately refuses such a log as corrupt rather than guess.)
    Directory entries (create, rename, unlink) are durable only after an fsync of the
    directory; before that a random suffix of them is undone, in reverse order.
    Only files directly in ``root`` are tracked. Undo works on inode numbers, since a file may
    be renamed after it was written.
    """

    def __init__(self, root: str, real: dict, rng: random.Random) -> None:
        self.root = os.path.abspath(root)
        self.real = real
        self.rng = rng
        self.fds: dict[int, tuple[int, bool]] = {}  # fd -> (inode, is_dir)
        self.file_ops: list[tuple[int, Callable[[], None], Callable[[float], None] | None]] = []
        self.dir_ops: list[Callable[[], None]] = []
        self.alias: dict[int, int] = {}

    def _ino(self, ino: int) -> int:
        while ino in self.alias:
            ino = self.alias[ino]
        return ino

    def _path_of(self, ino: int) -> str | None:
        ino = self._ino(ino)
        for name in os.listdir(self.root):
            p = os.path.join(self.root, name)
            if os.stat(p).st_ino == ino:
                return p
        return None

    def _content(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def _set_content(self, ino: int, data: bytes) -> None:
        p = self._path_of(ino)
        if p is None:
            return
        fd = self.real["open"](p, os.O_WRONLY)
        try:
            self.real["ftruncate"](fd, len(data))
            self.real["pwrite"](fd, data, 0) if data else None
        finally:
            os.close(fd)

    def open(self, path, flags, mode):  # type: ignore[no-untyped-def]
        p = os.path.abspath(path)
        existed = os.path.exists(p)
        old = self._content(p) if existed and not os.path.isdir(p) and flags & os.O_TRUNC else None
        fd = self.real["open"](path, flags, mode)
        st = os.fstat(fd)
        is_dir = os.path.isdir(p)
        self.fds[fd] = (st.st_ino, is_dir)
        if not existed:
            ino = st.st_ino

            def undo_create() -> None:
                q = self._path_of(ino)
                if q is not None:
                    self.real["unlink"](q)

            self.dir_ops.append(undo_create)
        if old:
            ino = st.st_ino
            self.file_ops.append((ino, lambda: self._set_content(ino, old), None))
        return fd

    def pwrite(self, fd: int, data, off: int) -> int:  # type: ignore[no-untyped-def]
        ino = self.fds[fd][0]
        before = self._content(f"/proc/self/fd/{fd}")
        n = self.real["pwrite"](fd, data, off)
        after_part = bytes(memoryview(data)[:n])

        def undo() -> None:
            self._set_content(ino, before)

        def partial(frac: float) -> None:
            keep = after_part[: int(len(after_part) * frac)]
            img = bytearray(before)
            if len(img) < off:
                img += bytes(off - len(img))
            img[off : off + len(keep)] = keep
            self._set_content(ino, bytes(img))

        self.file_ops.append((ino, undo, partial))
        return n

    def ftruncate(self, fd: int, length: int) -> None:
        ino = self.fds[fd][0]
        before = self._content(f"/proc/self/fd/{fd}")
        self.real["ftruncate"](fd, length)
        self.file_ops.append((ino, lambda: self._set_content(ino, before), None))

    def fsync(self, fd: int) -> None:
        self.real["fsync"](fd)
        ino, is_dir = self.fds[fd]
        if is_dir:
            self.dir_ops.clear()
        else:
            self.file_ops = [e for e in self.file_ops if e[0] != ino]

    def fdatasync(self, fd: int) -> None:
        self.real["fdatasync"](fd)
        ino, is_dir = self.fds[fd]
        if is_dir:
            self.dir_ops.clear()
        else:
            self.file_ops = [e for e in self.file_ops if e[0] != ino]

    def replace(self, src, dst) -> None:  # type: ignore[no-untyped-def]
        dst_old = self._content(dst) if os.path.exists(dst) else None
        self.real["replace"](src, dst)

        def undo() -> None:
            if os.path.exists(dst):
                self.real["replace"](dst, src)
            if dst_old is not None:
                with open(dst, "wb") as f:
                    f.write(dst_old)

        self.dir_ops.append(undo)

    rename = replace

    def unlink(self, path) -> None:  # type: ignore[no-untyped-def]
        p = os.path.abspath(path)
        old_ino = os.stat(p).st_ino
        data = self._content(p)
        self.real["unlink"](p)

        def undo() -> None:
            with open(p, "wb") as f:
                f.write(data)
            new = os.stat(p).st_ino
            # The file system may hand out a freed inode number again: a live file's number no
            # longer stands for the dead file that had it (which would make a cycle of aliases).
            self.alias.pop(new, None)
            if new != old_ino:
                self.alias[old_ino] = new

        self.dir_ops.append(undo)

    def fail(self) -> None:
        # Directory entries: a random suffix is lost, newest first.
        keep = self.rng.randint(0, len(self.dir_ops))
        for undo in reversed(self.dir_ops[keep:]):
            undo()
        # File contents: per file, a random suffix of the un-fsynced changes is lost; the first
        # lost write may have got part of the way (a prefix of it is on disk).
        by_ino: dict[int, list] = {}
        for ino, undo, partial in self.file_ops:
            by_ino.setdefault(ino, []).append((undo, partial))
        for changes in by_ino.values():
            k = self.rng.randint(0, len(changes))
            for j in reversed(range(k, len(changes))):
                undo, partial = changes[j]
                if j == k and partial is not None and self.rng.random() < 0.5:
                    partial(self.rng.random())
                else:
                    undo()
        self.file_ops.clear()
        self.dir_ops.clear()


# -- the SIGKILL child ----------------------------------------------------------------------------


def child_main(path: str, seed: int, segment_bytes: int) -> None:
    """Open the store, run the seeded workload; print "b <i>" before op i and "d <i>" once durable."""
    from storage.disk import DiskStore

    store = DiskStore(path, segment_bytes=segment_bytes)
    start = Model.of(store.recover())
    out = sys.stdout
    ops = itertools.islice(iter_ops(random.Random(seed), start, **CHILD_WORKLOAD), 10_000)
    for i, op in enumerate(ops):
        out.write(f"b {i}\n")
        out.flush()
        store = run_op(store, op)
        out.write(f"d {i}\n")
        out.flush()
    store.close()


CHILD_WORKLOAD = dict(max_batch=300, max_value=4000, max_snap=1_000_000, reopen=False)


if __name__ == "__main__":
    if sys.argv[1] == "child":
        child_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
