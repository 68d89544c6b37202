"""Zab's properties, checked incrementally after every simulator step.

``G`` is the global delivery order: the sequence of (zxid, digest) in the order txns were
first delivered by anyone. Every replica incarnation must deliver exactly a contiguous run of
``G`` starting at its snapshot point; that single rule is total order and agreement. On top:
integrity (delivered = proposed), uniqueness (one value per zxid), local and global primary
order (no gaps within an epoch, epochs never go back), primary integrity (nothing of an older
epoch is delivered after a newer leader began proposing), durability (every txn a client was
told is committed, and every delivered txn, is in every later established leader's history),
and the durability rule itself: a replica never acknowledges what its disk does not hold.

Reconfiguration (Shraer et al., ATC 2012): ``config`` is the configuration in force after
``G`` (the last reconfiguration txn delivered, or the static one). When a txn is first
delivered, the replicas holding it durably must be a quorum of the configuration in force
before it and, for a reconfiguration txn, also of the configuration it makes: a quorum of the
old and of the new (``committed_by``). A configuration is the same wherever it is put in force
(``config_delivered``, ``config_activated``), and a leader proposes nothing more in an epoch
once it has put in force a configuration in which it does not vote (the hand-off).
"""

from __future__ import annotations

from dataclasses import dataclass

from zabray.protocol.membership import Membership
from zabray.protocol.statemachine import chain_step
from zabray.protocol.zxid import fmt
from zabray.trace.records import members_text


@dataclass(frozen=True, slots=True)
class Violation:
    prop: str
    detail: str
    step: int

    def __str__(self) -> str:
        return f"[step {self.step}] {self.prop}: {self.detail}"


class Checker:
    def __init__(self, static: Membership | None = None) -> None:
        self.config = static if static is not None else Membership(())
        self.configs: dict[int, Membership] = {}  # reconfiguration zxid -> the configuration it made
        self.nonvoting: dict[tuple[int, int], int] = {}  # (replica, incarnation) -> epoch it stopped voting in
        self.G: list[tuple[int, str]] = []
        self.G_index: dict[int, int] = {}
        self.G_values: dict[int, bytes] = {}
        self.chains: list[bytes] = [b"\0" * 16]  # chains[k] = chain after G[:k]
        self.proposed: dict[int, tuple[str, int]] = {}  # zxid -> (digest, leader)
        self.first_proposal: dict[int, int] = {}  # epoch -> len(G) when its leader first proposed
        self.max_proposing_epoch = 0
        self.pos: dict[tuple[int, int], int] = {}  # (replica, incarnation) -> next index into G
        self.acked: dict[int, str] = {}  # zxid -> digest told committed to a client
        self.violations: list[Violation] = []
        self.step = 0

    def _fail(self, prop: str, detail: str) -> None:
        self.violations.append(Violation(prop, detail, self.step))

    # -- observations ---------------------------------------------------------------------------

    def start_incarnation(self, replica: int, inc: int, snapshot_zxid: int, chain: bytes | None) -> None:
        self._position_at(replica, inc, snapshot_zxid, chain, "restart")

    def snapshot_installed(self, replica: int, inc: int, zxid: int, chain: bytes | None) -> None:
        self._position_at(replica, inc, zxid, chain, "SNAP")

    def _position_at(self, replica: int, inc: int, zxid: int, chain: bytes | None, how: str) -> None:
        if zxid == 0:
            self.pos[(replica, inc)] = 0
            return
        k = self.G_index.get(zxid)
        if k is None:
            self._fail("agreement", f"replica {replica} holds state at {fmt(zxid)} ({how}) that nobody delivered")
            self.pos[(replica, inc)] = len(self.G)
            return
        if chain is not None and chain != self.chains[k + 1]:
            self._fail("agreement", f"replica {replica}'s state at {fmt(zxid)} ({how}) differs from the delivered history")
        self.pos[(replica, inc)] = k + 1

    def proposed_txn(self, leader: int, epoch: int, zxid: int, digest: str, inc: int = -1) -> None:
        stopped = self.nonvoting.get((leader, inc))
        if stopped is not None and stopped == epoch:
            self._fail("hand-off", f"leader {leader} proposed {fmt(zxid)} in epoch {epoch} after putting in force "
                                   "a configuration in which it does not vote")
        prev = self.proposed.get(zxid)
        if prev is not None and prev != (digest, leader):
            self._fail("uniqueness", f"zxid {fmt(zxid)} proposed as {prev} and as {(digest, leader)}")
        self.proposed[zxid] = (digest, leader)
        if epoch not in self.first_proposal:
            self.first_proposal[epoch] = len(self.G)
            self.max_proposing_epoch = max(self.max_proposing_epoch, epoch)

    def delivered(self, replica: int, inc: int, zxid: int, digest: str, value: bytes) -> None:
        prop = self.proposed.get(zxid)
        if prop is None or prop[0] != digest:
            self._fail("integrity", f"replica {replica} delivered {fmt(zxid)}={digest}, proposed {prop}")
        key = (replica, inc)
        k = self.pos.get(key, 0)
        if k < len(self.G):
            gz, gd = self.G[k]
            if (gz, gd) != (zxid, digest):
                self._fail(
                    "total order/agreement",
                    f"replica {replica} delivered {fmt(zxid)} as its #{k}; others delivered {fmt(gz)} there",
                )
        else:
            if self.G:
                last = self.G[-1][0]
                if zxid <= last:
                    self._fail("total order", f"{fmt(zxid)} delivered after {fmt(last)}")
                elif zxid >> 32 == last >> 32 and (zxid & 0xFFFFFFFF) != (last & 0xFFFFFFFF) + 1:
                    self._fail("local primary order", f"{fmt(zxid)} delivered right after {fmt(last)}")
                elif zxid >> 32 != last >> 32 and (zxid & 0xFFFFFFFF) != 1:
                    self._fail("local primary order", f"{fmt(zxid)} is the first of its epoch delivered")
            if zxid >> 32 < self.max_proposing_epoch:
                self._fail(
                    "primary integrity",
                    f"{fmt(zxid)} delivered after the leader of epoch {self.max_proposing_epoch} began proposing",
                )
            self.G_index[zxid] = len(self.G)
            self.G.append((zxid, digest))
            self.G_values[zxid] = value
            self.chains.append(chain_step(self.chains[-1], zxid, value))
        self.pos[key] = k + 1

    def client_acked(self, zxid: int, digest: str | None) -> None:
        """A client was told its write committed as ``zxid``; ``digest`` is its value's, when the
        txn carries the value as the client sent it (None: an app made the txn of it)."""
        k = self.G_index.get(zxid)
        if k is None:
            self._fail("durability", f"client told {fmt(zxid)} committed before anyone delivered it")
        elif digest is not None and self.G[k][1] != digest:
            self._fail("acknowledged", f"client told its write committed as {fmt(zxid)}, which holds another write")
        self.acked[zxid] = digest or ""

    def leader_established(self, leader: int, epoch: int, history: dict[int, str], base: int, base_chain: bytes | None) -> None:
        """The new leader's initial history (zxid -> digest after ``base``) must hold all of G."""
        for zxid, digest in self.G:
            if zxid <= base:
                continue
            if history.get(zxid) != digest:
                what = "acknowledged" if zxid in self.acked else "delivered"
                self._fail("durability", f"leader {leader} of epoch {epoch} lacks {what} txn {fmt(zxid)}")
                return
        if base and base_chain is not None:
            k = self.G_index.get(base)
            if k is None or self.chains[k + 1] != base_chain:
                self._fail("durability", f"leader {leader} of epoch {epoch} starts from a snapshot at {fmt(base)} that differs")

    # -- configurations ------------------------------------------------------------------------

    def committed_by(self, zxid: int, config: Membership | None, holders: set[int]) -> None:
        """``zxid`` was just delivered for the first time; ``holders`` hold it durably."""
        old = self.config
        if old.voters and not old.is_quorum(holders):
            self._fail("quorum", f"{fmt(zxid)} committed held by {sorted(holders)}, not a quorum of the "
                                 f"configuration in force ({members_text(old.voters, old.observers)})")
        if config is not None:
            if not config.is_quorum(holders):
                self._fail("quorum", f"reconfiguration {fmt(zxid)} committed held by {sorted(holders)}, not a "
                                     f"quorum of the new configuration ({members_text(config.voters, config.observers)})")
            self.config = config

    def config_delivered(self, replica: int, zxid: int, config: Membership) -> None:
        seen = self.configs.setdefault(zxid, config)
        if not seen.same_members(config):
            self._fail("config agreement", f"replica {replica} delivered configuration {fmt(zxid)} as "
                                           f"{config.body()!r}, others as {seen.body()!r}")

    def config_activated(self, replica: int, inc: int, epoch: int, version: int, members: str) -> None:
        seen = self.configs.get(version)
        if seen is not None and members_text(seen.voters, seen.observers) != members:
            self._fail("config agreement", f"replica {replica} put configuration {version:x} in force as "
                                           f"{members!r}, it was committed as {members_text(seen.voters, seen.observers)!r}")
        voters = {int(x) for x in members.split("|")[0].split(",") if x.strip()}
        if replica not in voters:
            self.nonvoting[(replica, inc)] = epoch
        else:
            self.nonvoting.pop((replica, inc), None)

    def acked_unsafely(self, replica: int, what: str) -> None:
        self._fail("ack before durable", f"replica {replica} sent {what}")
