"""Recipes on a live ensemble: a contended lock across a leader kill, election handover, a double barrier."""

from __future__ import annotations

import threading
import time

import pytest

from tests.zk.conftest import wait_until
from zabray.client.recipes import DoubleBarrier, Election, Group, Lock, ReadWriteLock, ensure_path

pytestmark = pytest.mark.ray


def test_lock_never_two_holders_across_a_leader_kill(start) -> None:
    ens = start(3)
    sessions = [ens.session(timeout=6) for _ in range(10)]
    holders = 0
    violations: list[str] = []
    acquired = 0
    errors: list[BaseException] = []
    guard = threading.Lock()
    stop = threading.Event()

    def worker(i: int) -> None:
        nonlocal holders, acquired
        lock = Lock(sessions[i], "/locks/L", str(i).encode())
        try:
            while not stop.is_set():
                assert lock.acquire(timeout=60)
                with guard:
                    holders += 1
                    acquired += 1
                    if holders != 1:
                        violations.append(f"{holders} holders when {i} got the lock")
                time.sleep(0.005)
                with guard:
                    holders -= 1
                lock.release()
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: acquired >= 30, timeout=60, what="30 acquisitions")
        ens.kill(ens.wait_for_leader())
        before = acquired
        wait_until(lambda: acquired >= before + 30, timeout=90, what="30 more acquisitions after the kill")
    finally:
        stop.set()
        for t in threads:
            t.join(120)
        for s in sessions:
            try:
                s.close()
            except Exception:
                pass
    assert not violations, violations[:3]  # safety: never two holders
    assert not errors, errors[:3]


def test_a_lock_is_never_blocked_by_its_own_lost_create(zk) -> None:
    """A create whose reply was lost can commit after the lock looked for it (a partition that
    keeps the old leader alive): that node is the lock's own, and must not block it."""
    s = zk.session(timeout=5)
    lock = Lock(s, "/locks/ghost")
    ensure_path(s, "/locks/ghost")
    ghost = s.create(f"/locks/ghost/{lock.guid}-lock-", ephemeral=True, sequential=True)
    other = Lock(zk.session(timeout=5), "/locks/ghost")
    assert lock.acquire(timeout=10)
    assert s.exists(ghost) is None and lock.node != ghost
    assert not other.acquire(timeout=0.5)  # still exclusive
    lock.release()
    assert other.acquire(timeout=10)
    other.release()
    other.s.close()
    s.close()


def test_election_hands_over_when_the_leader_session_dies(start) -> None:
    ens = start(3)
    # Only the session that will die has a short timeout: the others must not expire under load.
    sessions = [ens.session(timeout=1.5)] + [ens.session(timeout=8) for _ in range(2)]
    watcher = ens.session(timeout=5)
    elections = [Election(s, "/election", f"c{i}".encode()) for i, s in enumerate(sessions)]
    leading = [threading.Event() for _ in elections]
    for i, e in enumerate(elections):
        threading.Thread(target=lambda i=i, e=e: e.run() and leading[i].set(), daemon=True).start()
        if i == 0:
            assert leading[0].wait(20)
        # Candidates line up in the order they created their nodes: start the next only once
        # this one's node exists, so c1 (not c2) is next in line.
        wait_until(lambda i=i: len(watcher.children("/election")) == i + 1, timeout=20,
                   what=f"candidate c{i} in line")
    assert Election(watcher, "/election").leader() == b"c0"
    assert not leading[1].is_set() and not leading[2].is_set()
    sessions[0]._kill()  # the leader's client dies: its session expires, its node vanishes
    wait_until(lambda: leading[1].is_set(), timeout=20, what="c1 to take over")
    assert not leading[2].is_set()
    assert Election(watcher, "/election").leader() == b"c1"
    elections[1].resign()
    wait_until(lambda: leading[2].is_set(), timeout=20, what="c2 to take over")
    for s in sessions[1:] + [watcher]:
        s.close()


def test_double_barrier_releases_everyone_once_and_group_and_rwlock(start) -> None:
    ens = start(3)
    n = 5
    sessions = [ens.session(timeout=5) for _ in range(n)]
    joined: list[float] = []
    passed: list[tuple[int, float]] = []
    left: list[int] = []
    guard = threading.Lock()

    def party(i: int) -> None:
        b = DoubleBarrier(sessions[i], "/barrier", n, f"p{i}")
        time.sleep(0.1 * i)
        with guard:
            joined.append(time.monotonic())
        assert b.enter(timeout=30)
        with guard:
            passed.append((i, time.monotonic()))
        assert b.leave(timeout=30)
        with guard:
            left.append(i)

    threads = [threading.Thread(target=party, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(i for i, _ in passed) == list(range(n))  # everyone released, exactly once
    assert min(t for _, t in passed) >= max(joined)  # nobody before the last one arrived
    assert sorted(left) == list(range(n))
    # group membership: a member leaves with its session
    g0, g1 = Group(sessions[0], "/group"), Group(sessions[1], "/group")
    g0.join("a")
    g1.join("b")
    changed = threading.Event()
    assert g0.members(watch=lambda e: changed.set()) == ["a", "b"]
    sessions[1].close()
    assert changed.wait(10) and g0.members() == ["a"]
    # read/write lock: two readers together, the writer waits for both
    rw0, rw2 = ReadWriteLock(sessions[0], "/rw"), ReadWriteLock(sessions[2], "/rw")
    rw3 = ReadWriteLock(sessions[3], "/rw")
    assert rw0.read.acquire(5) and rw2.read.acquire(5)
    assert not rw3.write.acquire(timeout=0.5)
    rw0.read.release()
    rw2.read.release()
    assert rw3.write.acquire(5)
    assert not rw0.read.acquire(timeout=0.5)
    rw3.write.release()
    for s in sessions[:1] + sessions[2:]:
        s.close()
