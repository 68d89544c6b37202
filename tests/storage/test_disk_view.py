"""``storage.diskview.read_disk`` on directories written by ``DiskStore`` itself: it shows exactly
what a replica would recover, marks only what a snapshot proves as committed, reports damage as
the typed errors a replica's start would raise, and never changes a byte of what it reads."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from pathlib import Path

import pytest

from storage import DiskStore
from storage.diskview import read_disk
from storage.segments import SEG_HEADER_SIZE
from zabray.cli.inspect import render
from zabray.errors import ConfigError, CorruptionError
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid
from zabray.trace.records import digest

SEG = 2048


def fingerprint(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every file under ``root``: content hash, size and mtime (ns)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_size, st.st_mtime_ns)
    return out


def write_replica(root: Path) -> tuple[list[Txn], Zxid]:
    """A replica data dir as the replica lays it out (``store/`` + ``incarnation``): 3 epochs of
    txns over several segments, two snapshots; returns every txn written and the newest snapshot."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "incarnation").write_text("4")
    txns: list[Txn] = []
    snap = Zxid(0)
    with DiskStore(root / "store", segment_bytes=SEG, keep_snapshots=2) as s:
        for epoch in (1, 2, 3):
            s.write_accepted_epoch(epoch, 2)
            s.write_current_epoch(epoch)
            for c in range(1, 31):
                t = Txn(Zxid.of(epoch, c), f"value {epoch}:{c}".encode() * (c % 4 + 1), origin=epoch, request_id=c)
                s.append([t])
                txns.append(t)
                if c % 7 == 0:
                    s.sync()
            s.sync()
            if epoch < 3:
                snap = Zxid.of(epoch, 20)
                s.save_snapshot(snap, b"state up to " + str(snap).encode())
        assert s.recover().last_zxid == txns[-1].zxid
    return txns, snap


def test_the_view_is_what_the_replica_recovers_and_leaves_every_byte_alone(tmp_path: Path) -> None:
    txns, snap = write_replica(tmp_path)
    before = fingerprint(tmp_path)
    view = read_disk(tmp_path)
    assert fingerprint(tmp_path) == before
    assert view.path == str(tmp_path / "store") and view.incarnation == 4
    assert (view.accepted_epoch, view.accepted_leader, view.current_epoch) == (3, 2, 3)
    assert [s.zxid for s in view.snapshots] == [Zxid.of(1, 20), Zxid.of(2, 20)]
    assert all(s.problem is None and not s.stale and s.size > 0 for s in view.snapshots)
    assert view.committed_through == snap == Zxid.of(2, 20)
    assert view.last_zxid == txns[-1].zxid and view.torn_at is None and view.leftovers == ()
    # Files kept to become later segments are listed as such, not as leftovers.
    on_disk = sorted(n for n in os.listdir(tmp_path / "store") if n.startswith("spare."))
    assert on_disk and list(view.spares) == on_disk and view.to_dict()["spares"] == on_disk
    assert "kept to become later log segments: " + ", ".join(on_disk) in render(view, 1, 4)
    # Every logged record the purge kept, each with the trace's digest, in zxid order.
    by_zxid = {t.zxid: t for t in txns}
    assert view.log and [e.zxid for e in view.log] == sorted(e.zxid for e in view.log)
    assert view.log[-1].zxid == txns[-1].zxid
    for e in view.log:
        t = by_zxid[e.zxid]
        assert (e.size, e.digest, e.origin, e.request_id) == (len(t.value), digest(t.value), t.origin, t.request_id)
        assert e.committed == (e.zxid <= snap)
    tail = view.not_known_committed()
    assert [e.zxid for e in tail] == [t.zxid for t in txns if t.zxid > snap]
    assert len(view.segments) > 2 and sum(s.records for s in view.segments) == len(view.log)
    assert view.segments[-1].needed and all(s.problem is None for s in view.segments)
    d = view.to_dict()
    assert d["committed_through"] == "2:20" and d["log"][-1]["zxid"] == "3:30"
    # The store (not the replica dir) works too, and so does reading while a store holds the LOCK.
    with DiskStore(tmp_path / "store", segment_bytes=SEG, keep_snapshots=2):
        again = read_disk(tmp_path / "store")
    assert again.incarnation is None and again.log == view.log


def test_an_empty_store_is_the_initial_state(tmp_path: Path) -> None:
    DiskStore(tmp_path / "store").close()
    view = read_disk(tmp_path)
    assert (view.current_epoch, view.last_zxid, view.committed_through, view.log) == (0, 0, 0, ())


def test_a_view_of_a_log_that_grows_while_it_is_read_agrees_with_itself(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A running replica appends between the view's two reads of its directory (recovery's
    judgement, then each segment's records): the newest zxid shown is the newest record listed."""
    import storage.diskview as dv

    store = DiskStore(tmp_path / "store")
    store.append([Txn(Zxid.of(1, 1), b"written before")])
    store.sync()
    real = dv.recovery.analyze

    def analyze_then_append(path):  # type: ignore[no-untyped-def]
        rec = real(path)
        store.append([Txn(Zxid.of(1, 2), b"written meanwhile")])
        store.sync()
        return rec

    monkeypatch.setattr(dv.recovery, "analyze", analyze_then_append)
    view = read_disk(tmp_path)
    store.close()
    assert [e.zxid for e in view.log] == [Zxid.of(1, 1), Zxid.of(1, 2)]
    assert view.last_zxid == Zxid.of(1, 2)


def test_a_damaged_record_is_a_corruption_error_and_stays_as_it_was(tmp_path: Path) -> None:
    write_replica(tmp_path)
    store = tmp_path / "store"
    segs = sorted(p for p in store.iterdir() if p.name.startswith("log."))
    victim = segs[-2]  # not the newest: no torn-tail excuse
    data = bytearray(victim.read_bytes())
    data[SEG_HEADER_SIZE + 40] ^= 0xFF  # inside the first record's value
    victim.write_bytes(bytes(data))
    before = fingerprint(tmp_path)
    with pytest.raises(CorruptionError, match=f"{victim.name}: bad frame at offset {SEG_HEADER_SIZE}"):
        read_disk(tmp_path)
    assert fingerprint(tmp_path) == before


def test_a_damaged_epoch_file_is_a_corruption_error(tmp_path: Path) -> None:
    write_replica(tmp_path)
    path = tmp_path / "store" / "currentEpoch"
    data = bytearray(path.read_bytes())
    data[10] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="currentEpoch: checksum mismatch"):
        read_disk(tmp_path)


def test_a_damaged_newest_snapshot_is_reported_and_commitment_falls_back(tmp_path: Path) -> None:
    """The replica would start from the older snapshot plus the log: so does the view, and it
    claims commitment only up to the snapshot it can trust."""
    write_replica(tmp_path)
    newest = tmp_path / "store" / sorted(p.name for p in (tmp_path / "store").iterdir() if p.name.startswith("snap."))[-1]
    data = bytearray(newest.read_bytes())
    data[-10] ^= 0xFF
    newest.write_bytes(bytes(data))
    before = fingerprint(tmp_path)
    view = read_disk(tmp_path)
    assert fingerprint(tmp_path) == before  # DiskStore would set it aside as .corrupt; the view does not
    bad = [s for s in view.snapshots if s.problem]
    assert [s.name for s in bad] == [newest.name] and "checksum mismatch" in (bad[0].problem or "")
    assert view.committed_through == Zxid.of(1, 20)
    assert all(e.committed == (e.zxid <= Zxid.of(1, 20)) for e in view.log)


def test_a_torn_last_record_is_reported_not_cut(tmp_path: Path) -> None:
    txns, _ = write_replica(tmp_path)
    newest = sorted(p for p in (tmp_path / "store").iterdir() if p.name.startswith("log."))[-1]
    before_view = read_disk(tmp_path)
    end = before_view.segments[-1].end
    with open(newest, "r+b") as f:  # half a group header after the last group: a crash mid-write
        f.seek(end)
        f.write(b"ZBG4\x05\x00")
    before = fingerprint(tmp_path)
    view = read_disk(tmp_path)
    assert fingerprint(tmp_path) == before
    assert view.torn_at == (newest.name, end) and view.last_zxid == txns[-1].zxid


def test_not_a_data_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no replica data directory"):
        read_disk(tmp_path / "missing")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("hi")
    with pytest.raises(ConfigError, match="not a replica's data directory"):
        read_disk(tmp_path / "other")
    assert os.listdir(tmp_path / "other") == ["notes.txt"]


def run_cli(*argv: str) -> tuple[int, str, str]:
    from zabray.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_the_command_reads_a_directory_without_ray(tmp_path: Path) -> None:
    txns, snap = write_replica(tmp_path / "data" / "ens" / "replica-2")
    before = fingerprint(tmp_path)
    rc, out, _ = run_cli("inspect", "2", "--name", "ens", "--data-dir", str(tmp_path / "data"), "--tail", "3")
    assert rc == 0
    assert "epochs: accepted 3 (leader 2), current 3" in out and "incarnation 4" in out
    assert "committed through 2:20" in out and f"last zxid {txns[-1].zxid}" in out
    rows = out.splitlines()[-3:]
    assert [r.split()[0] for r in rows] == ["3:28", "3:29", "3:30"]
    assert all(r.endswith("logged (commit not on disk)") for r in rows)
    rc, out, _ = run_cli("inspect", "2", "--data-dir", str(tmp_path / "data" / "ens" / "replica-2"), "--json")
    d = json.loads(out)
    assert rc == 0 and len(d["log"]) == len(read_disk(tmp_path / "data" / "ens" / "replica-2").log)
    assert d["log"][-1]["committed"] is False and d["snapshots"][-1]["zxid"] == "2:20"
    assert fingerprint(tmp_path) == before
    # Damage: one line naming the file, exit 1; a directory that is not a replica's: exit 2.
    epoch = tmp_path / "data" / "ens" / "replica-2" / "store" / "acceptedEpoch"
    epoch.write_bytes(b"\0" * 3)
    rc, out, err = run_cli("inspect", "2", "--name", "ens", "--data-dir", str(tmp_path / "data"))
    assert (rc, out) == (1, "") and err.count("\n") == 1
    assert err.startswith("zabray inspect: CorruptionError: acceptedEpoch: 3 bytes at offset 0")
    rc, _, err = run_cli("inspect", "1", "--data-dir", str(tmp_path / "nowhere"))
    assert rc == 2 and "no replica data directory" in err
