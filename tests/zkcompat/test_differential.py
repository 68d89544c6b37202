"""The differential harness against Apache ZooKeeper 3.8.

Until zabray serves ZooKeeper's protocol the candidate is a second, independent Apache
ZooKeeper: the same seeded operations must give identical normalised answers, which shows the
harness itself is deterministic and raises no false alarm. ZABRAY_DIFF_OPS sets the length.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.zkcompat.differential import first_difference, generate, run_normalised
from zabray import apache_zk

pytestmark = pytest.mark.zookeeper
N_OPS = int(os.environ.get("ZABRAY_DIFF_OPS", "2000"))


@pytest.fixture(scope="module")
def second_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[apache_zk.ApacheZooKeeper]:
    with apache_zk.ApacheZooKeeper(Path(tmp_path_factory.mktemp("apache-zk-b"))) as zk:
        yield zk


def test_same_operations_same_answers(apache_zookeeper: apache_zk.ApacheZooKeeper,
                                      second_zookeeper: apache_zk.ApacheZooKeeper) -> None:
    ops = generate(seed=13, n=N_OPS)
    oracle = run_normalised(apache_zookeeper.hosts, ops)
    candidate = run_normalised(second_zookeeper.hosts, ops)
    assert first_difference(ops, oracle, candidate) is None
    kinds = {o.kind for o in ops}
    assert kinds >= {"create", "set", "delete", "get", "exists", "children", "multi", "get_acls",
                     "set_acls", "auth", "sync", "reopen"}
    answers = [r[0] for r in oracle]
    errors = {a[1] for a in answers if a[0] == "error"}
    # The sequence must exercise failures as well as successes, or agreement proves little.
    assert {"NoNodeError", "NodeExistsError", "BadVersionError", "NoAuthError"} <= errors, errors
    assert sum(1 for r in oracle for evs in r[1] if evs) > 20  # watches fired


def test_a_changed_answer_is_reported_with_its_operation() -> None:
    ops = generate(seed=1, n=3)
    a = [(("ok", "/d"), ((), ())), (("error", "NoNodeError"), ((), ())), (("ok", None), ((), ()))]
    b = [a[0], (("error", "BadVersionError"), ((), ())), a[2]]
    msg = first_difference(ops, a, b)
    assert msg is not None and msg.startswith("op #1 ") and "NoNodeError" in msg and "BadVersionError" in msg
    assert first_difference(ops, a, list(a)) is None
