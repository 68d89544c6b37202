"""Property: however prepares and applies interleave (and however often the leader's iteration
ends), the leader's txns equal those of a reference that applies each txn as soon as it is
prepared, every replica applying the committed txns reaches the same tree and results, and a
snapshot taken at any point plus the rest of the log reaches it too."""

from __future__ import annotations

from collections import deque

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid
from zabray.tree import (
    Check,
    CloseSession,
    Create,
    CreateSession,
    DataTree,
    Delete,
    DeleteContainer,
    Multi,
    Request,
    Result,
    SetACL,
    SetData,
    Sync,
    encode_request,
)

PATHS = ["/a", "/b", "/a/b", "/a/c", "/b/a", "/a/b/c", "/e", "/zookeeper/q", "/zookeeper/config/x"]
PREFIXES = ["/a/s", "/s", "/a/b/", "/e/x"]
SESSIONS = [1, 2, 3]
BOB, EVE = ("digest", "bob:hash"), ("digest", "eve:hash")
AUTHS = [(), (), (("ip", "10.0.0.7"),), (BOB,), (EVE, ("ip", "10.1.0.1")), (("super", ""),)]
ACLS = [
    ((31, "world", "anyone"),),
    ((31, "world", "anyone"),),
    ((1, "world", "anyone"), (31, *BOB)),
    ((31, "auth", ""),),  # expands to the requester's digest ids (INVALID_ACL without one)
    ((12, "ip", "10.0.0.0/16"), (19, "world", "anyone")),
    ((0, "world", "anyone"),),
    ((31, "digest", "bad"),),  # INVALID_ACL
    (),  # INVALID_ACL
]


def all_paths(tree: DataTree) -> list[str]:
    out, todo = [], ["/"]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(("" if p == "/" else p) + "/" + c for c in tree.children(p))
    return sorted(out)


class Gen:
    """Draws requests with primitive draws (fast, and shrinks well), biased toward paths and
    sessions that exist in the future state so that most requests do something."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def pick(self, items: list) -> object:  # type: ignore[type-arg]
        return items[self.int(0, len(items) - 1)]

    def weighted(self, *weights: int) -> int:
        """Index i with probability weights[i] / sum(weights)."""
        x = self.int(0, sum(weights) - 1)
        for i, w in enumerate(weights):
            if x < w:
                return i
            x -= w
        raise AssertionError

    def version(self) -> int:
        return self.pick([-1, -1, -1, 0, 1, 2])  # type: ignore[return-value]

    def bytes_(self) -> bytes | None:
        """A znode's data: a few bytes, or ZooKeeper's null."""
        return self.data.draw(st.none() | st.binary(max_size=3))

    def path(self, existing: list[str]) -> str:
        """Mostly an existing znode, sometimes one from the fixed set (which may not exist)."""
        if existing and self.weighted(3, 1) == 0:
            return self.pick(existing)  # type: ignore[return-value]
        return self.pick(PATHS)  # type: ignore[return-value]

    def create(self, existing: list[str]) -> Create:
        seq = self.weighted(3, 1) == 1
        if self.weighted(3, 1) == 0:
            parent = self.pick(["/", *existing])
            name = self.pick(["s", ""] if seq else ["a", "b", "c"])
            path = ("" if parent == "/" else parent) + "/" + name  # type: ignore[operator]
        else:
            path = self.pick(PREFIXES if seq else PATHS)  # type: ignore[assignment]
        kind = self.weighted(8, 4, 2, 2)  # persistent, ephemeral, container, ttl
        ttl = self.pick([-1, 0, 5, 2**40]) if kind == 0 else self.pick([1, 10, 1000]) if kind == 3 else -1
        return Create(
            path,  # type: ignore[arg-type]
            self.bytes_(),
            kind == 1,
            seq,
            self.pick(ACLS),  # type: ignore[arg-type]
            container=kind == 2,
            ttl=ttl,  # type: ignore[arg-type]
            stat=self.weighted(1, 1) == 1,
        )

    def sub_op(self, existing: list[str]) -> Create | Delete | SetData | Check:
        k = self.weighted(4, 2, 2, 1)
        if k == 0:
            return self.create(existing)
        path = self.path(existing)
        if k == 1:
            return Delete(path, self.version())
        if k == 2:
            return SetData(path, self.bytes_(), self.version())
        return Check(path, self.version())

    def request(self, future: DataTree) -> bytes:
        """A request against ``future`` (the reference tree: committed plus pending)."""
        if self.weighted(15, 1) == 1:
            return self.data.draw(st.binary(max_size=6))  # garbage becomes an error txn
        existing = all_paths(future)[1:]
        live = sorted(future.sessions())
        k = self.weighted(10, 2, 2, 1, 1, 2, 2)
        op: object
        time_ms = self.int(0, 10**6)
        if k == 0:
            op = self.sub_op(existing)
        elif k == 1:
            op = Multi(tuple(self.sub_op(existing) for _ in range(self.int(0, 4))))
        elif k == 2:
            op = CreateSession(self.pick([100, 250]))  # type: ignore[arg-type]
        elif k == 3:
            op = CloseSession()
        elif k == 4:
            op = Sync(self.path(existing))
        elif k == 5:
            op = SetACL(self.path(existing), self.pick(ACLS), self.pick([-1, -1, 0, 1]))  # type: ignore[arg-type]
        else:
            # what the leader's sweep would submit now, or a stale / ineligible path
            due = future.expired(time_ms)
            op = DeleteContainer(self.pick(due) if due and self.weighted(1, 1) else self.path(existing))  # type: ignore[arg-type]
        if k in (2, 3):
            session = self.pick(SESSIONS)  # may be live or not
        else:
            session = self.pick(live) if live and self.weighted(3, 1) == 0 else self.pick([0, 0, *SESSIONS])
        auth = self.pick(AUTHS)
        return encode_request(Request(session, time_ms, op, auth))  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_leader_follower_reference_and_snapshot_replay_agree(draw: st.DataObject) -> None:
    gen = Gen(draw)
    leader, follower, ref = DataTree(), DataTree(), DataTree()
    epoch, counter = 1, 0
    queue: deque[Txn] = deque()
    committed: list[Txn] = []
    ref_results: dict[int, Result | None] = {}
    snapshots: list[bytes] = [follower.snapshot()]

    def commit(n: int) -> None:
        for _ in range(min(n, len(queue))):
            txn = queue.popleft()
            r = leader.apply(txn)
            assert r is not None and r == follower.apply(txn) == ref_results[txn.zxid]
            committed.append(txn)

    for _ in range(draw.draw(st.integers(0, 80), label="steps")):
        kind = ("req", "apply", "abandon", "snapshot")[gen.weighted(12, 4, 1, 1)]
        if kind == "req":
            request = gen.request(ref)
            counter += 1
            z = Zxid.of(epoch, counter)
            value = leader.prepare(request, z)
            # the reference prepares against a tree that already applied everything pending
            assert value == ref.prepare(request, z)
            ref_results[z] = ref.apply(Txn(z, value))
            queue.append(Txn(z, value))
        elif kind == "apply":
            commit(gen.int(0, 6))
        elif kind == "abandon":
            queue.clear()  # never committed
            leader.abandon_prepared()
            assert leader.pending == 0
            ref.restore(follower.snapshot())
            epoch, counter = epoch + 1, 0
        else:
            snapshots.append(follower.snapshot())
    commit(len(queue))

    assert leader.pending == 0
    final = follower.snapshot()
    assert leader.snapshot() == final == ref.snapshot()
    assert leader.digest() == follower.digest() == ref.digest()
    assert leader.expired(10**6) == follower.expired(10**6)
    for snap in snapshots:
        t = DataTree()
        t.restore(snap)  # restore also re-checks the tree's structural invariants
        for txn in committed:
            t.apply(txn)  # txns the snapshot already holds are skipped
        assert t.snapshot() == final and t.digest() == follower.digest()
