"""kazoo 2.11's own test suite, a fast subset in CI (the whole suite: ``python
tests/zkcompat/kazoo_suite.py``, 20 to 40 minutes here): the same kazoo tests, unchanged, against
Apache ZooKeeper 3.8 and a zabray ensemble through kazoo's own harness, compared test by test.
The subset covers what once separated the two: the version kazoo reads from ``envi`` (every
test that gates on it), SASL DIGEST-MD5, read-only mode and the TLS port, and a recipe.
"""

from __future__ import annotations

import pytest

from tests.zkcompat.kazoo_suite import (
    NEEDS_RECONFIG,
    Outcome,
    compare,
    counts,
    run_suite,
    summary,
    unexplained,
)

FAST = (
    "test_client.py::TestClientTransactions::test_basic_create",
    "test_client.py::TestClientTransactions::test_bad_commit",
    "test_client.py::TestClient::test_create_stat",
    "test_client.py::TestClient::test_create_acl_duplicate",
    "test_client.py::TestSSLClient::test_create",
    "test_sasl.py::TestSASLDigestAuthentication",
    "test_sasl.py::TestLegacySASLDigestAuthentication::test_connect_sasl_auth",
    "test_connection.py::TestReadOnlyMode::test_read_only",
    "test_queue.py::KazooLockingQueueTests::test_queue",
)


@pytest.mark.zookeeper
@pytest.mark.ray
@pytest.mark.timeout(1800)
def test_kazoos_own_tests_pass_on_zabray_as_on_apache_zookeeper() -> None:
    apache = run_suite("apache", FAST, per_test_timeout=240)
    zabray = run_suite("zabray", FAST, per_test_timeout=240)
    report = summary(apache, zabray)
    # the oracle passes the whole subset, so the comparison is about something
    assert counts(apache)["passed"] == len(apache) >= len(FAST), report
    assert set(zabray) == set(apache), report
    assert not unexplained(compare(apache, zabray)), report
    assert counts(zabray)["passed"] == len(zabray), report


def test_the_comparison_names_each_test_that_differs() -> None:
    a = {"t.py::A::one": Outcome("passed"), "t.py::A::two": Outcome("passed"), "t.py::A::three": Outcome("skipped")}
    z = {"t.py::A::one": Outcome("passed"), "t.py::A::two": Outcome("failed", "call: E boom"),
         "t.py::A::three": Outcome("passed")}
    diffs = compare(a, z)
    assert [(d.test, d.apache, d.zabray) for d in diffs] == [("t.py::A::three", "skipped", "passed"),
                                                             ("t.py::A::two", "passed", "failed")]
    assert [d.test for d in unexplained(diffs)] == ["t.py::A::two"]  # zabray passing more is no failure
    reconfig = next(iter(NEEDS_RECONFIG))
    assert not unexplained(compare({reconfig: Outcome("passed")}, {reconfig: Outcome("failed")}))
    assert not unexplained(compare(a, dict(a)))
    assert "t.py::A::two: apache passed, zabray failed" in summary(a, z)
