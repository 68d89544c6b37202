"""Every shipped fault schedule (configs/faults/*.yaml), against every service, reports no
violation: what a user sees from `zabray faults run` on a healthy ensemble.

Each schedule runs with its own seed and fault mix, its times scaled down (and a random one cut
to ten steps) so a case takes seconds: the faults and targets are the file's, only shorter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ensemble.conftest import start  # noqa: F401
from zabray.cli.faults import run_under_load
from zabray.errors import ConfigError

pytestmark = pytest.mark.ray
SCHEDULES = sorted((Path(__file__).resolve().parents[2] / "configs" / "faults").glob("*.yaml"))


def lean(data: dict[str, Any], factor: float = 0.4, max_steps: int = 10) -> dict[str, Any]:
    """The same schedule, quicker: every time scaled by ``factor``, at most ``max_steps`` random steps."""
    out = dict(data)
    out["script"] = [{k: (v * factor if k in ("at", "after", "hold") else v) for k, v in step.items()}
                     for step in data.get("script") or []]
    if data.get("random"):
        r = dict(data["random"])
        r["steps"] = min(int(r.get("steps", 10)), max_steps)
        for key in ("interval", "hold"):
            if key in r:
                r[key] = [x * factor for x in r[key]] if isinstance(r[key], list) else r[key] * factor
        out["random"] = r
    out["workload"] = {**(data.get("workload") or {}), "in_flight": 20}
    return out


def test_shipped_schedules_exist() -> None:
    assert {p.name for p in SCHEDULES} >= {"leader-churn.yaml", "mixed.yaml"}


@pytest.mark.parametrize("service", ["broadcast", "zookeeper"])
@pytest.mark.parametrize("path", SCHEDULES, ids=[p.stem for p in SCHEDULES])
def test_schedule_reports_no_violation(start, path: Path, service: str) -> None:  # noqa: F811
    ens = start(3, service=service, trace=False)
    prog, result, problems = run_under_load(ens, lean(yaml.safe_load(path.read_text())), None)
    assert not prog["error"], prog["error"]
    assert prog["done"] == prog["total"] > 0
    assert result.acked, "the workload acknowledged nothing"
    assert not problems, "\n".join(problems[:10])


def test_raw_submit_on_a_zookeeper_ensemble_is_refused(start) -> None:  # noqa: F811
    ens = start(3, service="zookeeper", trace=False)
    with pytest.raises(ConfigError, match="service: zookeeper"):
        ens.submit(b"hello-raw")
    with pytest.raises(ConfigError, match="service: zookeeper"):
        ens.submit_many([b"a"])
