"""Drives a DataTree the way the Zab core does: prepare in zxid order on the leader, apply later."""

from __future__ import annotations

from collections import deque

from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid
from zabray.tree import DataTree, Result


class Leader:
    """A leader's tree with a queue of prepared-but-unapplied txns."""

    def __init__(self, tree: DataTree | None = None, epoch: int = 1) -> None:
        self.tree = tree if tree is not None else DataTree()
        self.epoch = epoch
        self.counter = 0
        self.queue: deque[Txn] = deque()
        self.log: list[Txn] = []  # every txn applied, in order

    def prepare(self, request: bytes) -> Txn:
        self.counter += 1
        z = Zxid.of(self.epoch, self.counter)
        txn = Txn(z, self.tree.prepare(request, z))
        self.queue.append(txn)
        return txn

    def apply_next(self) -> Result:
        txn = self.queue.popleft()
        self.log.append(txn)
        r = self.tree.apply(txn)
        assert r is not None
        return r

    def apply_all(self) -> list[Result]:
        return [self.apply_next() for _ in range(len(self.queue))]

    def write(self, request: bytes) -> Result:
        """Prepare and apply ``request`` (after anything already queued)."""
        self.prepare(request)
        return self.apply_all()[-1]

    def new_epoch(self) -> list[Txn]:
        """End the iteration: abandon prepared state; unapplied txns never commit."""
        dropped = list(self.queue)
        self.queue.clear()
        self.tree.abandon_prepared()
        self.epoch += 1
        self.counter = 0
        return dropped


def replica(txns: list[Txn]) -> DataTree:
    t = DataTree()
    for txn in txns:
        t.apply(txn)
    return t
