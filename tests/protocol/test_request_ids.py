"""A request is answered only by its own txn, across restarts of the replica it came through.

A replica's shell numbers the requests it submits from 1 again in every incarnation, and a txn
its previous incarnation forwarded may commit after the restart. The core tags each id with its
incarnation in the txn (``RID_BITS``) and answers only its own: before, such an old txn answered
the new request of the same id, with another write's zxid (a client told "committed" for a
write that could still be lost). Found by the simulators with wipes (seeds below).
"""

from __future__ import annotations

import pytest

from zabray.protocol.actions import Committed
from zabray.protocol.durable import DurableState
from zabray.protocol.events import RID_BITS, Submit
from zabray.protocol.messages import Txn
from zabray.protocol.node import Node
from zabray.protocol.protocol_config import ProtocolConfig
from zabray.protocol.zxid import Zxid
from zabray.sim.simulator import SimOptions, run_seed
from zabray.sim.zksim import ZkSimOptions, run_zk_seed

CFG = ProtocolConfig(voters=frozenset({1, 2, 3}))
WIPES = ("crash", "partition", "break", "snapshot", "drop", "wipe")


def test_only_this_incarnations_txns_answer_its_requests() -> None:
    old, new = 4 << RID_BITS, 5 << RID_BITS
    txns = (
        Txn(Zxid.of(1, 1), b"old", 2, old | 1),  # forwarded by incarnation 4, committed after the restart
        Txn(Zxid.of(1, 2), b"new", 2, new | 1),  # this incarnation's request 1
        Txn(Zxid.of(1, 3), b"other", 3, new | 2),  # another replica's
    )
    n = Node(2, CFG, DurableState(accepted_epoch=1, current_epoch=1, txns=txns), incarnation=5)
    n._out = out = []
    n.deliver_to(Zxid.of(1, 3))
    assert [(a.request_id, a.zxid) for a in out if type(a) is Committed] == [(1, Zxid.of(1, 2))]


def test_a_request_id_must_fit_below_the_tag() -> None:
    n = Node(2, CFG, DurableState(), incarnation=1)
    with pytest.raises(ValueError, match="request id"):
        n.step(Submit(1 << RID_BITS, b"x"))


@pytest.mark.parametrize("seed", [316, 876])
def test_broadcast_seeds_that_answered_a_request_with_an_older_txn(seed: int) -> None:
    r = run_seed(seed, SimOptions(voters=3, steps=6000, faults=WIPES, fault_rate=0.01))
    assert r.ok, r.violations[0]


def test_the_zookeeper_seed_that_ran_a_session_under_another_sessions_id() -> None:
    """A connect's create-session request got the commit of the previous incarnation's connect
    (another client's): the client was told one session id while its connection was bound to
    the other, so its writes ran as another session."""
    r = run_zk_seed(400234, SimOptions(voters=3, observers=1, steps=3000, faults=WIPES, fault_rate=0.01),
                    ZkSimOptions(clients=3))
    assert r.ok, r.violations[0]  # type: ignore[attr-defined]
