"""kazoo's own recipes (Lock, Semaphore, Election, Counter, Queue, Barrier, Party), each used
concurrently by three clients while the leader is killed: safety is checked all the way through
(never two lock holders or leaders, never more leases than allowed, no lost or doubled counter
update, no queue item handed out twice or lost) and every recipe makes progress after the new
leader took over. Destructive: its own ensemble."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss
from kazoo.recipe.barrier import Barrier
from kazoo.recipe.counter import Counter
from kazoo.recipe.election import Election
from kazoo.recipe.lock import Lock, Semaphore
from kazoo.recipe.party import Party
from kazoo.recipe.queue import Queue

from tests.zkwire.conftest import KazooFactory, wait_until
from zabray.driver.ensemble import Ensemble

pytestmark = pytest.mark.ray
log = logging.getLogger(__name__)

RETRY = {"max_tries": -1, "delay": 0.05, "max_delay": 1.0}
RECIPES = ("lock", "semaphore", "election", "counter", "queue")


class Monitor:
    """At most ``limit`` inside at once, checked on every entry; a violation is recorded."""

    def __init__(self, name: str, limit: int, violations: list[str]) -> None:
        self.name, self.limit, self.violations = name, limit, violations
        self.inside = 0
        self.mu = threading.Lock()

    def __enter__(self) -> None:
        with self.mu:
            self.inside += 1
            if self.inside > self.limit:
                self.violations.append(f"{self.name}: {self.inside} holders at once (limit {self.limit})")

    def __exit__(self, *exc: object) -> None:
        with self.mu:
            self.inside -= 1


class Run:
    """Worker threads looping until ``stop``, counting completed operations per recipe."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.done: Tally[str] = Tally()
        self.errors: list[str] = []
        self.violations: list[str] = []
        self.mu = threading.Lock()
        self.threads: list[threading.Thread] = []

    def count(self, recipe: str) -> None:
        with self.mu:
            self.done[recipe] += 1

    def counts(self) -> dict[str, int]:
        with self.mu:
            return {r: self.done[r] for r in RECIPES}

    def spawn(self, name: str, step: Callable[[], None]) -> None:
        def loop() -> None:
            try:
                while not self.stop.is_set():
                    step()
            except Exception as e:  # a worker that dies is a failure, reported by the test
                self.errors.append(f"{name}: {type(e).__name__}: {e}")

        t = threading.Thread(target=loop, name=name, daemon=True)
        self.threads.append(t)
        t.start()


def _workers(run: Run, i: int, c: KazooClient, monitors: dict[str, Monitor], produced: dict[str, list[str]],
             posts: list[int]) -> None:
    lock = Lock(c, "/lock", f"c{i}")
    sem = Semaphore(c, "/sem", f"c{i}", max_leases=2)
    election = Election(c, "/election", f"c{i}")
    counter = Counter(c, "/counter")
    queue = Queue(c, "/queue")
    in_lock, in_sem, in_lead = monitors["lock"], monitors["semaphore"], monitors["election"]
    n = [0]

    def locked() -> None:
        if lock.acquire(timeout=60):
            try:
                with in_lock:
                    c.retry(c.set, "/lock", f"c{i}".encode())
            finally:
                lock.release()
            run.count("lock")

    def leased() -> None:
        if sem.acquire(timeout=60):
            try:
                with in_sem:
                    c.retry(c.exists, "/sem")
            finally:
                sem.release()
            run.count("semaphore")

    def lead() -> None:
        def as_leader() -> None:
            with in_lead:
                c.retry(c.set, "/election", f"c{i}".encode())
            run.count("election")
        election.run(as_leader)

    def increment() -> None:
        counter.__add__(1)
        assert counter.post_value is not None
        with run.mu:
            posts.append(counter.post_value)
        run.count("counter")

    def produce() -> None:
        n[0] += 1
        item = f"c{i}-{n[0]}"
        produced["tried"].append(item)
        try:
            queue.put(item.encode())  # kazoo does not retry a put: an error leaves it uncertain
        except Exception:
            return
        produced["acked"].append(item)
        run.count("queue")

    for name, step in (("lock", locked), ("semaphore", leased), ("election", lead),
                       ("counter", increment), ("queue", produce)):
        run.spawn(f"{name}-c{i}", step)


def test_recipes_across_a_leader_kill(start: Callable[..., Ensemble], kazoo: KazooFactory) -> None:
    ens = start(3)
    clients = [kazoo(ens, timeout=30.0, command_retry=RETRY, connection_retry=RETRY) for _ in range(3)]
    c0, c1, c2 = clients
    for p in ("/lock", "/sem", "/election"):
        c0.ensure_path(p)

    # Party: every member joins before the kill.
    parties = [Party(c, "/party", f"m{i}") for i, c in enumerate(clients)]
    for p in parties:
        p.join()
    wait_until(lambda: len(parties[0]) == 3, what="all three party members")
    # Barrier: c0 raises it, c1 and c2 wait on it across the kill.
    removed = threading.Event()
    barrier_seen: list[tuple[bool, bool]] = []
    Barrier(c0, "/barrier").create()

    def wait_barrier(c: KazooClient) -> None:
        # kazoo's Barrier.wait loses its watch when the connection drops (kazoo 2.11 fires a
        # one-shot watch with EventType.NONE and does not re-register it), and its exists call
        # is not retried (a ConnectionLoss when the kill catches it in flight), so a waiter that
        # lives through a leader change waits again, in slices.
        b = Barrier(c, "/barrier")
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                if b.wait(timeout=1):
                    break
            except ConnectionLoss:
                continue
        barrier_seen.append((not c.retry(c.exists, "/barrier"), removed.is_set()))

    waiters = [threading.Thread(target=wait_barrier, args=(c,), daemon=True) for c in (c1, c2)]
    for t in waiters:
        t.start()

    run = Run()
    monitors = {"lock": Monitor("lock", 1, run.violations), "semaphore": Monitor("semaphore", 2, run.violations),
                "election": Monitor("election", 1, run.violations)}
    produced: dict[str, list[str]] = {"tried": [], "acked": []}
    posts: list[int] = []
    try:
        for i, c in enumerate(clients):
            _workers(run, i, c, monitors, produced, posts)
        wait_until(lambda: min(run.counts().values()) >= 2 or bool(run.errors), timeout=120,
                   what=f"every recipe under way: {run.counts()}")
        leader = ens.wait_for_leader()
        log.info("killing leader %d at %s", leader, run.counts())
        ens.kill(leader)
        at_kill = run.counts()
        new_leader = ens.wait_for_leader(timeout=120)
        log.info("new leader %d at %s", new_leader, run.counts())
        assert new_leader != leader
        wait_until(lambda: all(run.counts()[r] >= at_kill[r] + 3 for r in RECIPES) or bool(run.errors),
                   timeout=180, what=f"progress after the new leader: {at_kill} -> {run.counts()}")
        log.info("progress after the kill: %s", run.counts())
    finally:
        run.stop.set()
        for t in run.threads:
            t.join(timeout=120)
        log.info("workers stopped: %s", run.counts())
    assert not run.errors, run.errors
    assert not run.violations, run.violations
    assert not any(t.is_alive() for t in run.threads), "a worker never came back"

    # Party: members kept across the kill (their sessions lived on); leaving works.
    assert sorted(parties[0]) == ["m0", "m1", "m2"]
    parties[1].leave()
    wait_until(lambda: sorted(parties[0]) == ["m0", "m2"], what="m1 to leave the party")
    # Barrier: nobody passed it before it was removed, everyone passes once it is.
    assert barrier_seen == []
    removed.set()
    Barrier(c0, "/barrier").remove()
    for t in waiters:
        t.join(timeout=120)
    assert barrier_seen == [(True, True), (True, True)]

    # Counter: every acknowledged increment took its own value; the final value is the last.
    final = Counter(c0, "/counter").value
    assert len(posts) == len(set(posts)), "two increments read the same value and both succeeded"
    assert final == max(posts) >= len(posts)

    # Queue: drained by two consumers at once; nothing handed out twice, nothing acked lost.
    got: list[str] = []
    mu = threading.Lock()

    def consume(c: KazooClient) -> None:
        q = Queue(c, "/queue")
        while (item := q.get()) is not None:
            with mu:
                got.append(item.decode())

    consumers = [threading.Thread(target=consume, args=(c,), daemon=True) for c in (c1, c2)]
    for t in consumers:
        t.start()
    for t in consumers:
        t.join(timeout=120)
    assert len(got) == len(set(got)), "a queue item was handed out twice"
    assert set(produced["acked"]) <= set(got) <= set(produced["tried"])
