"""``DiskStore``: the on-disk ``Store`` (transaction log, epoch files, snapshots in one directory).

Directory layout::

    LOCK                          flock'ed while a DiskStore has the directory open
    REJOINING                     written into an emptied directory by ``mark_rejoining``
    acceptedEpoch, currentEpoch   storage.epochs
    config                        storage.configfile (once a reconfiguration is in force)
    snap.<gen>.<zxid>             storage.snapshots
    log.<gen>.<seq>               storage.txnlog
    spare.<n>.tmp                 files kept for later log segments (storage.txnlog), reused at open
    *.tmp                         other half-written files of an interrupted write, reaped at open
    *.corrupt                     damaged snapshots set aside when recovery could do without them

Generations make ``install_snapshot`` atomic: the installed snapshot is written as generation
g+1, and its rename into place is the commit point. From then on recovery ignores every file of
generation <= g, and new appends go to generation g+1 segments; the old files are deleted after.

Failure model: ``append``/``truncate`` are volatile until ``sync``. Any I/O error (an fsync error
above all) raises ``StorageError`` and leaves the store unusable: every later call raises too,
because after a failed fsync the kernel may have dropped the dirty pages and nothing the store
believes about its files can be trusted. Reopening re-reads what actually reached the disk.
``close`` releases the directory without syncing (unsynced appends are dropped, as in a crash).
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from storage import configfile, epochs, fsutil, recovery, snapshots, txnlog
from storage.snapshots import SnapshotFile
from storage.txnlog import TxnLog
from zabray.errors import ConfigError, StorageError
from zabray.protocol.durable import DurableState
from zabray.protocol.membership import Membership
from zabray.protocol.messages import Txn
from zabray.protocol.statemachine import Encoded
from zabray.protocol.zxid import Zxid, fmt

log = logging.getLogger(__name__)

LOCK_FILE = "LOCK"
CORRUPT_SUFFIX = ".corrupt"
MIN_SEGMENT_BYTES = 256


def _zxid(value: int, what: str) -> Zxid:
    try:
        return Zxid(value)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{what}: {e}") from e


class DiskStore:
    """A durable ``Store`` in directory ``path`` (created if missing).

    ``keep_snapshots`` newest snapshots are kept, with every log segment needed to replay from the
    oldest of them; ``segment_bytes`` is the preallocated size of a log segment; with
    ``preallocate`` a new segment is filled with zeros up front so group commits overwrite
    allocated blocks instead of growing the file.

    Opening recovers: reaps temp files, verifies everything, cuts a torn last record (with a
    warning), finishes an interrupted snapshot install, and raises ``CorruptionError`` (naming
    the file and offset) when the directory cannot be trusted.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        keep_snapshots: int = 3,
        segment_bytes: int = 64 << 20,
        preallocate: bool = True,
        fsync: bool = True,
    ) -> None:
        """``fsync=False`` skips the group commit's fdatasync (epoch and snapshot files are still
        synced): acknowledged writes then survive a process crash but not a power cut."""
        if not isinstance(keep_snapshots, int) or keep_snapshots < 1:
            raise ConfigError(f"keep_snapshots must be an int >= 1, got {keep_snapshots!r}")
        if not isinstance(segment_bytes, int) or segment_bytes < MIN_SEGMENT_BYTES:
            raise ConfigError(f"segment_bytes must be an int >= {MIN_SEGMENT_BYTES}, got {segment_bytes!r}")
        self.path = os.path.abspath(os.fspath(path))
        self.keep_snapshots = keep_snapshots
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self.preallocate = bool(preallocate)
        self._failed: BaseException | None = None
        self._closed = False
        self._lock_fd = -1
        self._cached: DurableState | None = None
        try:
            self._make_dir()
            self._lock()
            try:
                self._open()
            except BaseException:
                self._unlock()
                raise
        except OSError as e:
            raise StorageError(f"cannot open store {self.path}: {e}") from e

    # -- opening --------------------------------------------------------------------------------

    def _make_dir(self) -> None:
        missing = []
        p = self.path
        while not os.path.isdir(p):
            missing.append(p)
            p = os.path.dirname(p)
        for d in reversed(missing):
            os.mkdir(d, 0o755)
            fsutil.fsync_dir(os.path.dirname(d))

    def _lock(self) -> None:
        fd = os.open(os.path.join(self.path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            os.close(fd)
            raise StorageError(f"store {self.path} is already open (LOCK is held)") from e
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            fd, self._lock_fd = self._lock_fd, -1
            try:
                os.close(fd)  # releases the flock
            except OSError as e:
                log.warning("%s: closing LOCK: %s", self.path, e)

    def _open(self) -> None:
        changed = False
        spares = []
        for name in os.listdir(self.path):
            if name.endswith(fsutil.TMP_SUFFIX):
                path = os.path.join(self.path, name)
                if self.preallocate and txnlog.is_spare(name) and os.stat(path).st_size == self.segment_bytes:
                    spares.append(name)  # whatever it holds: a segment made from it gets a new seed
                    continue
                log.info("%s: removing leftover temp file %s", self.path, name)
                os.unlink(path)
                changed = True
        spares.sort(key=txnlog.spare_number)
        for name in spares[txnlog.MAX_RECYCLED :]:
            os.unlink(os.path.join(self.path, name))
            changed = True
        if changed:
            fsutil.fsync_dir(self.path)

        rec = recovery.analyze(self.path)

        # Repairs, only once the whole directory has been judged trustworthy.
        changed = False
        for name in rec.damaged_snapshots:
            log.warning(
                "%s: setting damaged snapshot %s aside as %s%s", self.path, name, name, CORRUPT_SUFFIX
            )
            os.replace(os.path.join(self.path, name), os.path.join(self.path, name + CORRUPT_SUFFIX))
            changed = True
        for name in rec.stale:
            log.info("%s: removing %s, replaced by an installed snapshot", self.path, name)
            os.unlink(os.path.join(self.path, name))
            changed = True
        if changed:
            fsutil.fsync_dir(self.path)
        last = rec.last_scan

        self._generation = rec.generation
        self._snaps: list[SnapshotFile] = list(rec.snapshots)
        state = rec.state
        base = self._snaps[-1].zxid if self._snaps else Zxid(0)
        self._log = TxnLog(  # cuts a torn tail off the newest segment
            self.path,
            rec.generation,
            list(rec.segments),
            last,
            base,
            floor=state.snapshot_zxid,
            segment_bytes=self.segment_bytes,
            preallocate=self.preallocate,
            fsync=self.fsync,
            spares=spares[: txnlog.MAX_RECYCLED],
        )
        self._cached = state
        log.info(
            "%s: recovered generation %d, snapshot %s, %d txns after it, last zxid %s",
            self.path,
            rec.generation,
            fmt(state.snapshot_zxid),
            len(state.txns),
            fmt(state.last_zxid),
        )

    # -- failure handling -----------------------------------------------------------------------

    def _check(self) -> None:
        if self._closed:
            raise StorageError(f"store {self.path} is closed")
        if self._failed is not None:
            raise StorageError(f"store {self.path} is unusable after an earlier failure: {self._failed!r}")

    @contextmanager
    def _io(self, what: str) -> Iterator[None]:
        """Run a durable operation; any failure inside it makes the store unusable."""
        self._check()
        self._cached = None
        try:
            yield
        except OSError as e:
            self._failed = e
            log.error("%s: %s failed: %s; store is now unusable", self.path, what, e)
            raise StorageError(f"{what} failed in {self.path}: {e}") from e
        except BaseException as e:
            self._failed = e
            raise

    # -- the Store interface --------------------------------------------------------------------

    def recover(self) -> DurableState:
        """What is durable now (re-read from disk unless nothing changed since the last look)."""
        self._check()
        if self._cached is None:
            try:
                self._cached = recovery.analyze(self.path).state
            except OSError as e:
                raise StorageError(f"recover failed in {self.path}: {e}") from e
        return self._cached

    def append(self, txns: Sequence[Txn]) -> None:
        """Buffer txns (zxids must strictly increase past the log); durable at the next ``sync``."""
        self._check()
        self._log.append(txns)

    def truncate(self, zxid: Zxid) -> None:
        """Drop every txn after ``zxid``; durable at the next ``sync``."""
        self._check()
        self._log.truncate(_zxid(zxid, "truncate"))

    def room(self) -> int:
        """Bytes a ``sync`` can add without creating a segment or cutting the log (0 if it would
        have to): a sync within them costs one write and one fdatasync, nothing more."""
        return 0 if self._closed or self._failed is not None else self._log.room()

    def sync(self) -> None:
        """Group commit: make every buffered append and truncation durable (one write + one fdatasync)."""
        self._check()
        if not self._log.dirty:
            return
        with self._io("sync"):
            self._log.sync()

    def mark_rejoining(self) -> None:
        """Record, durably, that this directory was wiped while the ensemble went on: until a
        leader has synced it (currentEpoch > 0), ``recover`` reports ``rejoining``."""
        with self._io("mark_rejoining"):
            fsutil.atomic_write(self.path, recovery.REJOINING_FILE, [b"wiped; rebuilt by the next leader that syncs it\n"])
        self._cached = None

    def write_accepted_epoch(self, epoch: int, leader: int) -> None:
        """Atomically and durably record acceptedEpoch and its leader (after any buffered log changes)."""
        epochs.validate(epoch, leader)
        with self._io("write_accepted_epoch"):
            if self._log.dirty:  # apply_persists already did; keeps the order for direct callers
                self._log.sync()
            epochs.write(self.path, epochs.ACCEPTED_EPOCH, epochs.EpochRecord(epoch, leader))

    def write_current_epoch(self, epoch: int) -> None:
        """Atomically and durably record currentEpoch (after any buffered log changes: history first)."""
        epochs.validate(epoch)
        with self._io("write_current_epoch"):
            if self._log.dirty:
                self._log.sync()
            epochs.write(self.path, epochs.CURRENT_EPOCH, epochs.EpochRecord(epoch, -1))

    def write_config(self, config: Membership, left: bool) -> None:
        """Atomically and durably record the configuration in force (after any buffered log
        changes: the txn that carries it is durable first)."""
        with self._io("write_config"):
            if self._log.dirty:
                self._log.sync()
            configfile.write(self.path, config, left)

    def install_snapshot(self, zxid: Zxid, state: bytes) -> None:
        """Atomically replace the whole history with ``state`` at ``zxid`` (a SNAP from the leader).

        Unsynced appends and truncations are dropped: they belonged to the history being replaced.
        """
        z = _zxid(zxid, "install_snapshot")
        data = self._state_bytes(state)
        with self._io("install_snapshot"):
            if self._log.dirty:
                log.debug(
                    "%s: install_snapshot drops %d unsynced records", self.path, self._log.pending_records
                )
            gen = self._generation + 1
            new = snapshots.write(self.path, gen, z, (data,))  # the commit point
            old = [s.name for s in self._log.reset(gen, z)] + [s.name for s in self._snaps]
            self._generation = gen
            self._snaps = [new]
            for name in old:
                os.unlink(os.path.join(self.path, name))
            fsutil.fsync_dir(self.path)
            log.info("%s: installed snapshot at %s as generation %d", self.path, fmt(z), gen)

    def save_snapshot(self, zxid: Zxid, state: bytes | Encoded) -> None:
        """Durably record the delivered state at ``zxid``; the log after it is kept.

        Keeps the ``keep_snapshots`` newest snapshots (in generation 0 the empty initial state
        counts as the oldest) and every segment needed to replay from the oldest of them.
        """
        z = _zxid(zxid, "save_snapshot")
        data = tuple(map(self._state_bytes, state)) if isinstance(state, tuple) else (self._state_bytes(state),)
        self._check()
        if self._snaps and z < self._snaps[-1].zxid:
            raise ConfigError(
                f"save_snapshot: zxid {fmt(z)} is older than the newest snapshot {self._snaps[-1]}"
            )
        with self._io("save_snapshot"):
            if self._log.dirty:
                self._log.sync()
            snap = snapshots.write(self.path, self._generation, z, data)
            if self._snaps and self._snaps[-1].zxid == z:
                self._snaps[-1] = snap
            else:
                self._snaps.append(snap)
            self._log.raise_floor(z)
            self._purge()

    def _purge(self) -> None:
        drop = len(self._snaps) - self.keep_snapshots
        removed: list[str] = []
        if drop > 0:
            for s in self._snaps[:drop]:
                os.unlink(os.path.join(self.path, s.name))
                removed.append(s.name)
            del self._snaps[:drop]
        if self._generation == 0 and len(self._snaps) < self.keep_snapshots:
            keep_from = Zxid(0)  # the empty initial state is still one of the kept snapshots
        else:
            keep_from = self._snaps[0].zxid
        removed += self._log.purge(keep_from)
        if removed:
            fsutil.fsync_dir(self.path)
            log.debug("%s: purged %s", self.path, ", ".join(removed))

    @staticmethod
    def _state_bytes(state: bytes) -> bytes:
        if not isinstance(state, (bytes, bytearray, memoryview)):
            raise ConfigError(f"snapshot state must be bytes, got {type(state).__name__}")
        return bytes(state)

    def close(self) -> None:
        """Release the directory. Does not sync: unsynced appends are dropped, as in a crash."""
        if self._closed:
            return
        self._closed = True
        log_ = getattr(self, "_log", None)
        try:
            if log_ is not None:
                if log_.dirty and self._failed is None:
                    log.debug(
                        "%s: closing with %d unsynced records; they are dropped", self.path, log_.pending_records
                    )
                try:
                    log_.close()
                except OSError as e:
                    log.warning("%s: closing the log: %s", self.path, e)
        finally:
            self._unlock()  # whatever stopped the close: the directory is released

    def __enter__(self) -> DiskStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DiskStore({self.path!r})"
