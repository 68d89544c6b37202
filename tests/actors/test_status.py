"""``ReplicaStatus`` read three ways: from a running replica's report, from a stopped one's
disk, or unknown. A number it does not know is never shown as known, and ``zabray status
--json`` (``to_json``) is plain JSON: enums by name, an infinite bucket bound as "+Inf"."""

from __future__ import annotations

import json
import math

import pytest

from actors.metrics import HistogramView, MetricsView
from actors.status import DiskSummary, ReplicaReport, ReplicaStatus
from zabray.protocol.messages import PeerState
from zabray.protocol.node import NodeStatus
from zabray.protocol.role import Phase
from zabray.protocol.zxid import Zxid

pytestmark = pytest.mark.timeout(30)

NODE = NodeStatus(PeerState.LEADING, 2, 3, 3, Zxid.of(3, 9), Zxid.of(3, 8), 4, 1, Phase.BROADCAST, False, 0,
                  (1, 2, 3), (), False)
HIST = HistogramView(2, 0.004, ((0.001, 1), (math.inf, 1)))
REPORT = ReplicaReport(2, None, NODE, established=True, pid=7, stats={"delivered": 8},
                       metrics=MetricsView(8, 1.0, 0, HIST, 1, HIST, 0, 0, 0, 4096))


def test_a_running_replicas_numbers_come_from_its_report() -> None:
    st = ReplicaStatus(2, "LEADING", alive=True, observer=False, node="n", pid=7, incarnation=1, report=REPORT)
    assert st.known and st.established_leader and (st.epoch, st.last_zxid, st.applied) == (3, NODE.last_zxid,
                                                                                            NODE.applied)
    assert st.phase == "broadcast" and st.stats == {"delivered": 8} and st.config_version == 0


def test_a_stopped_replica_shows_its_disk_marked_stale_or_nothing() -> None:
    disk = DiskSummary(3, 3, Zxid.of(3, 5), Zxid.of(3, 4), 1)
    down = ReplicaStatus(1, "DOWN", alive=False, observer=False, node=None, pid=None, incarnation=1, stale=True,
                         disk=disk)
    assert down.known and (down.epoch, down.last_zxid, down.applied) == (3, disk.last_zxid, disk.committed_through)
    assert not down.established_leader and down.config_version is None and down.phase is None
    lost = ReplicaStatus(3, "DOWN", alive=False, observer=False, node=None, pid=None, incarnation=1, stale=True,
                         unknown="host h3 has no live Ray node")
    assert not lost.known and lost.stats == {} and lost.metrics is None


def test_status_json_is_plain_json() -> None:
    st = ReplicaStatus(2, "LEADING", alive=True, observer=False, node="n", pid=7, incarnation=1, report=REPORT,
                       client=("10.0.0.2", 2181))
    row = json.loads(json.dumps(st.to_json(), allow_nan=False))
    assert row["sid"] == 2 and row["known"] is True and row["epoch"] == 3 and row["client"] == ["10.0.0.2", 2181]
    assert row["report"]["node"]["state"] == "LEADING" and row["report"]["node"]["phase"] == "broadcast"
    assert row["report"]["metrics"]["fsync"]["buckets"] == [[0.001, 1], ["+Inf", 1]]
