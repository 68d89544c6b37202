"""What the lab's ensemble tests run on host 1 (``lab.spawn(1, [python, -m, tests.lab.driver, ...])``),
as an operator logged in to the head would: a Ray driver needs a Ray node beside it.

``load NAME DIR``: a write load (zabray's own client, broadcast) until ``DIR/stop`` appears,
``DIR/progress.json`` updated every 0.2 s (acknowledged writes, the time of the last); then it
waits until every replica is up and has delivered the same, checks that every acknowledged write
is on every replica, and writes ``DIR/result.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def load(name: str, where: str) -> int:
    from zabray.driver.ensemble import Ensemble
    from zabray.driver.workload import Workload, check_histories

    d = Path(where)
    ens = Ensemble.connect(name)
    trace_dir = Path(ens.info["run_dir"]) / "trace"
    wl = Workload(ens, in_flight=20, size=256, session=7, trace_dir=trace_dir).start()
    while not (d / "stop").exists():
        oks = [r.complete_t for r in list(wl.result.records) if r.outcome == "ok"]
        tmp = d / "progress.tmp"
        tmp.write_text(json.dumps({"acked": len(oks), "last_ack": max(oks, default=0.0), "t": time.time()}))
        tmp.replace(d / "progress.json")
        time.sleep(0.2)
    result = wl.stop()
    deadline = time.monotonic() + 180
    converged = False
    while time.monotonic() < deadline:
        st = ens.status()
        if all(x.alive and not x.stale for x in st) and len({x.applied for x in st}) == 1:
            converged = True
            break
        time.sleep(0.2)
    problems = check_histories(ens.histories(), result.acked) if converged else ["never converged"]
    (d / "result.json").write_text(json.dumps({
        "acked": len(result.acked), "problems": problems[:20], "converged": converged,
        "failed": result.count("failed"), "unknown": result.count("unknown")}))
    ens.close()
    return 0


if __name__ == "__main__":
    sys.exit(load(sys.argv[2], sys.argv[3]) if sys.argv[1] == "load" else 2)
