"""The differential test of issue 13: Apache ZooKeeper 3.8 is the oracle, a real 3-replica zabray
ensemble (``service: zookeeper`` on real Ray) the candidate. The same seeded sequence of kazoo
operations runs against both; every answer, error code, watch event, reply body length and Stat
field must match after normalisation (zxids and times by order, see ``differential``).
ZABRAY_DIFF_OPS sets the length (2,000 in CI).
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.zkcompat.differential import first_difference, generate, run_normalised
from zabray import apache_zk
from zabray.ensemble import Ensemble

pytestmark = [pytest.mark.zookeeper, pytest.mark.ray]
N_OPS = int(os.environ.get("ZABRAY_DIFF_OPS", "2000"))


@pytest.fixture(scope="module")
def zabray_zk(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    tmp = tmp_path_factory.mktemp("zabray-diff")
    ens = Ensemble.start(3, name=f"diff-{os.getpid()}-{time.monotonic_ns() % 10**8}", data_dir=str(tmp / "data"),
                         run_dir=str(tmp / "run"), service="zookeeper", trace=False, zk_container_check_ms=0)
    ens.wait_for_leader()
    yield ens
    ens.stop()


def test_zabray_answers_as_apache_zookeeper(apache_zookeeper: apache_zk.ApacheZooKeeper,
                                            zabray_zk: Ensemble) -> None:
    ops = generate(seed=13, n=N_OPS)
    oracle: dict[str, Any] = {}

    def run_oracle() -> None:
        oracle["r"] = run_normalised(apache_zookeeper.hosts, ops)

    t = threading.Thread(target=run_oracle)
    t.start()  # the two servers are independent: run them side by side
    candidate = run_normalised(zabray_zk.connect_string(), ops)
    t.join()
    assert first_difference(ops, oracle["r"], candidate) is None, first_difference(ops, oracle["r"], candidate)
    # The sequence must exercise every kind of op, failures as well as successes.
    assert {o.kind for o in ops} >= {"create", "create_raw", "set", "delete", "delete_child", "get", "exists",
                                     "children", "multi", "get_acls", "set_acls", "auth", "sync", "count",
                                     "ephemerals", "whoami", "multi_read", "add_watch", "watches", "reopen"}
    outcomes = collections.Counter(r[0][1] if r[0][0] == "error" else "ok" for r in candidate)
    assert {"NoNodeError", "NodeExistsError", "BadVersionError", "NoAuthError", "InvalidACLError",
            "NotEmptyError", "BadArgumentsError", "NoWatcherError"} <= set(outcomes), outcomes
    assert outcomes["ok"] > len(ops) // 3, outcomes
    assert sum(1 for r in candidate for frames in r[1] for f in frames if f[0] == "event") > 50


def test_a_changed_answer_is_reported_with_its_operation() -> None:
    ops = generate(seed=1, n=3)
    a = [(("ok", "/d"), ((), ())), (("error", "NoNodeError"), ((), ())), (("ok", None), ((), ()))]
    b = [a[0], (("error", "BadVersionError"), ((), ())), a[2]]
    msg = first_difference(ops, a, b)
    assert msg is not None and msg.startswith("op #1 ") and "NoNodeError" in msg and "BadVersionError" in msg
    assert first_difference(ops, a, list(a)) is None
