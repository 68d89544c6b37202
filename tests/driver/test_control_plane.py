"""The control plane's own failure: the controller's process dies. The replicas are not the
controller's (detached actors), so they go on serving clients; Ray starts the controller again,
and it finds them by name from what it saved on its disk (``actors.checkpoint``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest

from tests.driver.conftest import converged, wait_until
from zabray.driver.ensemble import Ensemble
from zabray.errors import NotRunningError, RequestTimeoutError

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


def test_replicas_serve_while_the_controller_is_lost_and_a_restarted_one_adopts_them(
        start: Callable[..., Ensemble]) -> None:
    ens = start(3)
    ens.wait_for_leader(60)
    ens.submit_many([b"before"] * 20)
    before = {s.sid: (s.incarnation, s.pid) for s in ens.status()}
    os.kill(int(ens.info["controller_pid"]), signal.SIGKILL)
    # Writes go to the replicas, not through Ray: they go on while the controller is gone.
    acked = [ens.submit(b"during", timeout=30) for _ in range(20)]
    assert len(acked) == 20

    def adopted() -> bool:
        try:
            st = ens.status()
        except (NotRunningError, RequestTimeoutError):
            return False
        return all(s.alive and not s.stale for s in st) and {s.sid: (s.incarnation, s.pid) for s in st} == before

    wait_until(adopted, timeout=120, what="a restarted controller that found the same replica processes")
    assert ens.info["controller_pid"] != Ensemble.connect(ens.name).info["controller_pid"]
    leader = ens.wait_for_leader(30)  # and it controls them again: a kill and a restart
    ens.kill(leader)
    ens.restart(leader)
    ens.submit(b"after")
    wait_until(lambda: converged(ens), timeout=60, what="every replica delivering the same")
