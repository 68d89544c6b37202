"""The differential test of issue 13: Apache ZooKeeper 3.8 is the oracle, a real 3-replica zabray
ensemble (``service: zookeeper`` on real Ray) the candidate. The same seeded sequence of kazoo
operations runs against both; every answer, error code, watch event, reply body length and Stat
field must match after normalisation (zxids and times by order, see ``differential``).
ZABRAY_DIFF_OPS sets the length (2,000 in CI), ZABRAY_DIFF_SEED the sequence. A second Apache
ZooKeeper as the candidate shows the harness itself raises no false alarm.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.zkcompat.conftest import ORACLE_FLAGS
from tests.zkcompat.differential import Op, first_difference, generate, run_normalised
from zabray.driver import apache_zk
from zabray.driver.ensemble import Ensemble

pytestmark = [pytest.mark.zookeeper, pytest.mark.ray]
N_OPS = int(os.environ.get("ZABRAY_DIFF_OPS", "2000"))
SEED = int(os.environ.get("ZABRAY_DIFF_SEED", "13"))


@pytest.fixture(scope="module")
def zabray_zk(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    tmp = tmp_path_factory.mktemp("zabray-diff")
    ens = Ensemble.start(3, name=f"diff-{os.getpid()}-{time.monotonic_ns() % 10**8}", data_dir=str(tmp / "data"),
                         run_dir=str(tmp / "run"), service="zookeeper", trace=False, zk_container_check_ms=0)
    ens.wait_for_leader()
    yield ens
    ens.stop()


_ORACLE: dict[int, list[Any]] = {}  # the oracle's normalised run, shared by this module's tests


def _oracle(zk: apache_zk.ApacheZooKeeper, ops: list[Op]) -> list[Any]:
    if len(ops) not in _ORACLE:
        _ORACLE[len(ops)] = run_normalised(zk.hosts, ops)
    return _ORACLE[len(ops)]


def _side_by_side(zk: apache_zk.ApacheZooKeeper, hosts: str, ops: list[Op]) -> tuple[list[Any], list[Any]]:
    """The oracle's run and the candidate's; the two servers are independent, so side by side."""
    box: dict[str, Any] = {}

    def oracle() -> None:
        box["r"] = _oracle(zk, ops)

    t = threading.Thread(target=oracle)
    t.start()
    try:
        candidate = run_normalised(hosts, ops)
    finally:
        t.join()
    return box["r"], candidate


def test_zabray_answers_as_apache_zookeeper(apache_zookeeper: apache_zk.ApacheZooKeeper,
                                            zabray_zk: Ensemble) -> None:
    ops = generate(seed=SEED, n=N_OPS)
    oracle, candidate = _side_by_side(apache_zookeeper, zabray_zk.connect_string(), ops)
    diff = first_difference(ops, oracle, candidate)
    assert diff is None, diff
    # The sequence must exercise every kind of op, failures as well as successes.
    assert {o.kind for o in ops} >= {"create", "create_raw", "set", "delete", "delete_child", "get", "exists",
                                     "children", "multi", "get_acls", "set_acls", "auth", "sync", "count",
                                     "ephemerals", "whoami", "multi_read", "add_watch", "watches", "reopen",
                                     "raw_path"}
    outcomes = collections.Counter(r[0][1] if r[0][0] == "error" else "ok" for r in candidate)
    assert {"NoNodeError", "NodeExistsError", "BadVersionError", "NoAuthError", "InvalidACLError",
            "NotEmptyError", "BadArgumentsError", "NoWatcherError"} <= set(outcomes), outcomes
    assert outcomes["ok"] > len(ops) // 3, outcomes
    assert sum(1 for r in candidate for frames in r[1] for f in frames if f[0] == "event") > 50


def test_the_harness_raises_no_false_alarm(apache_zookeeper: apache_zk.ApacheZooKeeper,
                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    """A second, independent Apache ZooKeeper answers exactly as the first: what the harness
    normalises away (zxid values, wall clocks, session ids, set orders) is all that differs."""
    ops = generate(seed=SEED, n=N_OPS)
    root = Path(tmp_path_factory.mktemp("apache-zk-b"))
    with apache_zk.ApacheZooKeeper(root, jvm_flags=ORACLE_FLAGS) as second:
        oracle, candidate = _side_by_side(apache_zookeeper, second.hosts, ops)
    diff = first_difference(ops, oracle, candidate)
    assert diff is None, diff


def test_a_changed_answer_is_reported_with_its_operation() -> None:
    ops = generate(seed=1, n=3)
    a = [(("ok", "/d"), ((), ())), (("error", "NoNodeError"), ((), ())), (("ok", None), ((), ()))]
    b = [a[0], (("error", "BadVersionError"), ((), ())), a[2]]
    msg = first_difference(ops, a, b)
    assert msg is not None and msg.startswith("op #1 ") and "NoNodeError" in msg and "BadVersionError" in msg
    assert first_difference(ops, a, list(a)) is None
