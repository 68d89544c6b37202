"""kazoo 2.11's own test suite, a fast subset in CI (the whole suite: ``python
tests/zkcompat/kazoo_suite.py``, 20 to 40 minutes here): the same kazoo tests, unchanged, against
Apache ZooKeeper 3.8 and a zabray ensemble through kazoo's own harness, compared test by test.
The subset covers what once separated the two: the version kazoo reads from ``envi`` (one of
the tests that gate on it), SASL DIGEST-MD5, read-only mode, the TLS port and reconfiguration.
"""

from __future__ import annotations

import pytest

from tests.zkcompat.kazoo_suite import (
    Outcome,
    compare,
    counts,
    run_suite,
    summary,
    unexplained,
)

FAST = (
    # Gated on the server's version kazoo reads from `envi` (create with include_data, ACL
    # duplicates, transactions, the locking queue all are): one test stands for them.
    "test_client.py::TestClient::test_create_acl_duplicate",
    "test_client.py::TestSSLClient::test_create",
    "test_sasl.py::TestSASLDigestAuthentication",
    "test_connection.py::TestReadOnlyMode::test_read_only",
    "test_client.py::TestReconfig",  # dynamic reconfiguration: kazoo's reconfig, NoAuth, bad input
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
    assert not unexplained(compare(a, dict(a)))
    assert "t.py::A::two: apache passed, zabray failed" in summary(a, z)
