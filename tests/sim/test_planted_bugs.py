"""The simulator has teeth: deliberately broken cores are caught within a few hundred seeds."""

from __future__ import annotations

import pytest

from zabray.protocol import election, leader
from zabray.protocol.actions import Action
from zabray.protocol.messages import Commit
from zabray.protocol.node import Node
from zabray.sim.simulator import SimOptions, run_seed


class AcksBeforeDurable(Node):
    """Sends every acknowledgement at once instead of after the write it promises."""

    def hold(self, action: Action) -> None:
        self._out.append(action)


def commit_alone(self: leader.Leader) -> None:
    """Commits whatever its own log holds, as if the leader were a quorum by itself."""
    if self.established and self.self_acked > self.committed:
        self.committed = self.self_acked
        for h in self.learners.values():
            if h.stage == leader.Stage.ACTIVE and not h.observer:
                self._send(h, Commit(self.committed))
        self.node.deliver_to(self.committed)


SAFETY = ("durability", "agreement", "order", "integrity", "uniqueness", "ack before durable", "quorum",
          "hand-off")


def first_violation(seeds: range, safety_only: bool = True, **opts: object) -> str | None:
    """The first seed's first violation (a safety one, unless ``safety_only`` is False)."""
    for seed in seeds:
        r = run_seed(seed, SimOptions(**opts))  # type: ignore[arg-type]
        for v in r.violations:
            if not safety_only or any(p in v.prop for p in SAFETY):
                return f"seed {seed}: {v}"
    return None


def test_acknowledging_before_the_write_is_durable_is_caught() -> None:
    found = first_violation(range(200), voters=3, node_factory=AcksBeforeDurable)
    assert found is not None and "ack before durable" in found, found


def test_committing_without_a_quorum_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leader.Leader, "_advance_commit", commit_alone)
    found = first_violation(range(300), voters=3)
    # (The checker's quorum rule sees it first: a txn delivered that no quorum holds.)
    assert found is not None and any(p in found for p in ("quorum", "durability", "agreement", "order")), found


def test_a_leader_that_ignores_more_up_to_date_histories_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Election picks the highest sid whatever its history, and discovery no longer checks
    that the leader holds the freshest history of its quorum: committed txns get truncated."""
    monkeypatch.setattr(election, "better", lambda leader_, zxid, epoch, b: leader_ > b[0])
    monkeypatch.setattr(leader.Leader, "_check_not_behind", lambda self, h: None)
    found = first_violation(range(300), voters=3)
    assert found is not None and ("durability" in found or "agreement" in found or "order" in found), found


def test_the_correct_core_passes_the_same_seeds() -> None:
    assert first_violation(range(200), safety_only=False, voters=3) is None


class CountsAtOnceAfterAWipe(Node):
    """A voter that lost its disk votes, promises and acknowledges at once, as if nothing had
    been lost (ZooKeeper's behaviour): it can help elect a leader without an acknowledged write
    that only its old disk and a crashed leader held."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.rejoining = False


WIPES = {"voters": 3, "steps": 1500, "faults": ("crash", "partition", "break", "wipe"), "fault_rate": 0.02}


def test_a_wiped_voter_that_counts_at_once_is_caught() -> None:
    found = first_violation(range(100), node_factory=CountsAtOnceAfterAWipe, **WIPES)
    assert found is not None and "durability" in found, found


def test_wiped_voters_rejoining_lose_nothing_and_the_ensemble_goes_on() -> None:
    assert first_violation(range(100), safety_only=False, **WIPES) is None
    assert run_seed(3, SimOptions(**WIPES)).faults["wipe"] > 0  # type: ignore[arg-type]
