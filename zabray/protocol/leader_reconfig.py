"""The leader's part of a reconfiguration: judging a request, the commit point when several
configurations must agree, and the designated leader (``Leader`` calls these; see its doc)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zabray.errors import ReconfigError
from zabray.protocol.learner_handle import Stage
from zabray.protocol.membership import ConfigChange, Membership, next_membership
from zabray.protocol.zxid import ZERO, Zxid

if TYPE_CHECKING:
    from zabray.protocol.leader import Leader
    from zabray.protocol.messages import Txn


def decide(leader: Leader, change: ConfigChange) -> Membership:
    """ZooKeeper 3.8's checks of a reconfiguration, in its order; the next configuration
    (version 0: its txn's zxid becomes it), or ``ReconfigError``. No side effects: the state
    machine may still refuse the request after this (an ACL)."""
    n = leader.node
    if not n.cfg.reconfig_enabled:
        raise ReconfigError("RECONFIG_DISABLED", "reconfiguration is disabled (reconfig_enabled is off)")
    if any(t.zxid > leader.committed for t in n.history.configs):
        raise ReconfigError("RECONFIG_IN_PROGRESS", "another reconfiguration is in progress")
    current = n.config
    if change.from_version != -1 and change.from_version != current.version:
        raise ReconfigError("BAD_VERSION", f"Reconfiguration from version {change.from_version:x} failed -- "
                                           f"last seen version is {current.version:x}")
    new = next_membership(current, change)
    synced = {s for s, h in leader.learners.items() if h.stage == Stage.ACTIVE and not h.observer
              and n.now - h.heard <= n.cfg.sync_limit}
    if not new.is_quorum(synced | {n.sid}):
        raise ReconfigError("NEW_CONFIG_NO_QUORUM", "Reconfig failed - there must be a connected and synced "
                                                    "quorum in new configuration")
    return new


def designate(leader: Leader, txn: Txn) -> int:
    """ZooKeeper's designated leader for the configuration ``txn`` makes: this leader if it is a
    voter of it, else the voter of it with the most acknowledged (a quorum of its voters
    acknowledged ``txn``: one exists); -1 if none is connected."""
    n = leader.node
    config = txn.config
    assert config is not None
    if n.sid in config.voters:
        return n.sid
    best = [(h.acked, -h.sid) for h in leader.learners.values()
            if h.stage == Stage.ACTIVE and not h.observer and h.sid in config.voters and h.acked >= txn.zxid]
    return -max(best)[1] if best else -1


def point(config: Membership, acks: dict[int, Zxid]) -> Zxid:
    """The highest zxid a quorum of ``config``'s voters holds durably (ZERO if none)."""
    got = sorted([z for s, z in acks.items() if s in config.voters], reverse=True)
    return got[config.quorum - 1] if len(got) >= config.quorum else ZERO


def commit_point(leader: Leader) -> Zxid:
    """The highest zxid every configuration that must agree on it has a quorum for: the oldest
    for everything, and each newer one (a reconfiguration in progress, or one put in force but
    not yet durable) for every txn from its own on."""
    n = leader.node
    acks = {s: h.acked for s, h in leader.learners.items() if not h.observer and h.stage == Stage.ACTIVE}
    acks[n.sid] = leader.self_acked
    configs = n.quorum_configs()
    p = leader._point(configs[0], acks)
    for c in configs[1:]:
        if p < c.version:
            break
        p = max(Zxid(c.version - 1), min(p, leader._point(c, acks)))
    return p
