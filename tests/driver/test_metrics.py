"""Per-replica metrics: the same numbers in ``status()`` (``zabray status --json``) and in
Prometheus, through Ray's metrics agent."""

from __future__ import annotations

import re
import urllib.request

import pytest

from tests.driver.conftest import start, wait_until  # noqa: F401

pytestmark = pytest.mark.ray


def test_replica_metrics_in_status_and_prometheus(start) -> None:  # noqa: F811
    import ray

    ens = start(3, service="zookeeper", trace=False)
    ens.wait_for_leader()
    s = ens.session()
    try:
        s.create("/m", b"0")
        for i in range(30):
            s.set("/m", b"%d" % i)
        s.exists("/m", watch=lambda ev: None)  # one-shot: it stays registered while /m is left alone
        wait_until(lambda: all(r.metrics is not None and r.metrics.commits >= 32 for r in ens.status()), 60,
                   "commits on all")
        ms = [r.metrics for r in ens.status()]
        for m in ms:
            assert m is not None
            assert m.fsync.count > 0 and m.fsync.sum_s > 0
            assert sum(n for _, n in m.fsync.buckets) == m.fsync.count
            assert m.elections >= 1 and m.election.count == m.elections
            assert m.sessions == 1 and m.znodes >= 2 and m.disk_bytes > 0
            assert m.proposals_outstanding >= 0
        assert sum(m.watches for m in ms if m is not None) == 1  # on the replica the session uses
    finally:
        s.close()

    port = ray._private.worker.global_worker.node.metrics_export_port
    label = f'ensemble="{re.escape(ens.name)}"'
    pattern = re.compile(r"^ray_zabray_commits_total\{[^}]*" + label + r"[^}]*\} (\S+)$", re.M)
    # Group-commit durations reach Ray from the once-a-second export, not from the commit path.
    fsyncs = re.compile(r"^ray_zabray_fsync_seconds_count\{[^}]*" + label + r"[^}]*replica=\"(\d)\"[^}]*\} (\S+)$", re.M)

    def exported() -> bool:
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        except OSError:
            return False
        synced = {sid for sid, n in fsyncs.findall(body) if float(n) > 0}
        return sum(float(v) for v in pattern.findall(body)) >= 3 * 32 and len(synced) == 3

    wait_until(exported, 120, "zabray_commits_total and zabray_fsync_seconds in Prometheus for all three replicas")
