"""One lab of three hosts for the whole session (building one takes some 25 s), with Ray's node
health checks shortened so that a cut-off node is declared dead in about 6 s, not 30 (shorter
still declares live nodes dead on a machine as loaded as CI's can be)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from zabray.lab import Lab, LabSpec, RaySettings

LAB = LabSpec(name="ztest", hosts=3, subnet="10.213.250.0/24",
              ray=RaySettings(health_period_ms=1000, health_timeout_ms=1000, health_failures=5))


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("the lab needs root (network namespaces); CI runs as root")


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    need_root()
    with Lab.up(LAB) as made:
        yield made


@pytest.fixture
def healed(lab: Lab) -> Iterator[Lab]:
    """The lab, healed again after the test (cuts, partitions, limits, crashed hosts revived). A
    cut may have ended a host's Ray node (its supervisor starts it again): a test that needs
    every node first waits for them (``lab.wait_nodes``)."""
    yield lab
    lab.heal()
    for h in lab.spec.host_ids:
        if lab.state.limit_of(h) is not None:
            lab.unlimit(h)
        if h in lab.state.crashed:
            lab.revive(h)
