"""Dynamic reconfiguration on a real ensemble (real Ray, TCP, fsync): growing 3 -> 5 and shrinking
5 -> 3 under a write load, the leader removed and handing over, refusals typed; every
acknowledged write is on every replica of the final configuration, and ``zabray check`` (PySpark)
finds every property holding in the run's traces, the configurations' agreement included.
"""

from __future__ import annotations

import pytest

from tests.driver.conftest import assert_no_loss, converged, wait_until
from zabray.driver.scenario import spark_check
from zabray.driver.workload import Workload
from zabray.errors import ReconfigError

pytestmark = pytest.mark.ray


def _configs(ens) -> set[tuple[int, tuple[int, ...], tuple[int, ...]]]:  # type: ignore[no-untyped-def]
    return {(s.config_version or 0, s.voters, s.observers) for s in ens.status() if s.alive and not s.stale}


def test_grow_3_to_5_and_shrink_back_under_a_write_load_loses_nothing(start) -> None:  # type: ignore[no-untyped-def]
    ens = start(3, reconfig_enabled=True)
    ens.wait_for_leader(30)
    wl = Workload(ens, in_flight=30).start()
    wait_until(lambda: len(wl.result.records) > 200, what="writes flowing")
    a = ens.add_replica()
    b = ens.add_replica()
    assert (a, b) == (4, 5)
    wait_until(lambda: _configs(ens) == {(_configs(ens).pop()[0], (1, 2, 3, 4, 5), ())}, timeout=30,
               what="every replica with the 5-voter configuration")
    n = len(wl.result.records)
    wait_until(lambda: len(wl.result.records) > n + 200, timeout=60, what="writes through the 5 voters")
    # Shrink back to three, the leader among those removed: it hands over to a new voter.
    leader = ens.wait_for_leader(30)
    keep = sorted({1, 2, 3, 4, 5} - {leader})[:3]
    version = ens.reconfigure(keep)
    wait_until(lambda: ens.leader() in keep and _configs(ens) == {(version, tuple(keep), ())}, timeout=60,
               what="the 3-voter configuration in force everywhere, with a leader of it")
    assert sorted(s.sid for s in ens.status()) == keep  # the removed replicas were stopped
    n = len(wl.result.records)
    wait_until(lambda: len(wl.result.records) > n + 200, timeout=60, what="writes through the 3 voters")
    result = wl.stop()
    assert result.count("ok") > 600
    wait_until(lambda: converged(ens), timeout=60, what="the replicas converging")
    assert_no_loss(ens, result.acked)
    assert spark_check(ens.info["run_dir"]) == 0  # zabray check: every property, config_agreement too


def test_refusals_are_typed_and_change_nothing(start) -> None:  # type: ignore[no-untyped-def]
    ens = start(3, reconfig_enabled=True)
    ens.wait_for_leader(30)
    version, text = ens.reconfig()  # nothing asked: the configuration as it is, rewritten
    assert text.endswith(f"version={version:x}") and text.count("server.") == 3
    with pytest.raises(ReconfigError) as e:
        ens.reconfig(leaving="1", from_config=version + 1)
    assert e.value.code == "BAD_VERSION"
    with pytest.raises(ReconfigError) as e:
        ens.reconfig(joining="some thing")
    assert e.value.code == "BAD_ARGUMENTS"
    with pytest.raises(ReconfigError) as e:  # 2 of 4 voters synced: no quorum of the new configuration
        ens.reconfig(joining="server.9=127.0.0.1:1:2;3,server.8=127.0.0.1:4:5;6", leaving="1")
    assert e.value.code == "NEW_CONFIG_NO_QUORUM"
    assert {v for v, _, _ in _configs(ens)} == {version}
    off = start(3)
    with pytest.raises(ReconfigError) as e:
        off.add_replica()
    assert e.value.code == "RECONFIG_DISABLED"
