"""Settings for every test process.

Every Ray the suite starts (its own local clusters, ``Cluster`` nodes, the CLI's head) runs its
workers at nice 0, as a Ray that ``zabray up`` or ``Ensemble.start`` starts does. A test of the
other case (a cluster started without it) removes the variable for its own cluster.

``bin/test`` runs the Ray half on two pytest-xdist workers (``--dist loadscope``). Each worker
has a Ray temp dir of its own, so a ``ray.init()`` in one never finds the other's cluster. A test
module is one unit of work (its module-scoped Ray cluster is started once); tests that share one
machine-wide thing are one unit: the lab (network namespaces, one bridge, its subnet) and the
pipeline tests (one SparkSession, one JVM). The longest units go first, so that the two workers
end at about the same time.
"""

from __future__ import annotations

import os

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

from zabray.driver.rayhead import unniced_workers

unniced_workers()

_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    os.environ["RAY_TMPDIR"] = f"{os.environ.get('RAY_TMPDIR', '/tmp/ray')}-{_WORKER}"

# Units of work that span a folder (see the module docstring).
_SHARED = ("tests/lab/", "tests/pipeline/")
# The longest units (CI's --durations, in minutes: lab ~7, the CLI 3, pipeline 4, kazoo's suite 2,
# the benchmark scripts 2.5), started first; every other unit follows in collection order.
_LONGEST_FIRST = ("tests/lab/", "tests/pipeline/", "tests/driver/test_cli.py", "tests/benchmarks/",
                  "tests/zkcompat/test_kazoo_suite.py", "tests/driver/test_faults.py",
                  "tests/driver/test_scenarios.py", "tests/experiments/test_notebooks.py",
                  "tests/driver/test_reconfig_on_ray.py")


def _unit(path: str) -> str:
    return next((shared for shared in _SHARED if path.startswith(shared)), path)


def _rank(unit: str) -> int:
    return next((i for i, p in enumerate(_LONGEST_FIRST) if unit.startswith(p)), len(_LONGEST_FIRST))


class _UnitScheduling(LoadScopeScheduling):
    """xdist's ``loadscope`` with this suite's units (a module, or a folder in ``_SHARED``). Its
    ``loadgroup`` marks cannot say it here: xdist 3.8 writes them into ``Item._nodeid``, which
    pytest 9 no longer reads."""

    def _split_scope(self, nodeid: str) -> str:
        return _unit(nodeid.split("::", 1)[0])


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadScopeScheduling | None:
    return _UnitScheduling(config, log) if config.getvalue("dist") == "loadscope" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _WORKER:
        return
    # A stable sort: within a unit, and among units of one rank, collection order is kept; the
    # scheduler hands units out in this order (bin/test passes --no-loadscope-reorder).
    items.sort(key=lambda item: _rank(_unit(item.nodeid.split("::", 1)[0])))
