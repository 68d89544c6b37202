"""``zabray demo``: a local 3-replica ensemble on an embedded Ray, a stream of writes, a leader
kill, the new leader and how long it took, a check that nothing acknowledged was lost."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from zabray.driver.ensemble import Ensemble
from zabray.driver.workload import Workload, check_histories, percentile, trace_zxid
from zabray.errors import ConfigError, ZabError


def _say(msg: str) -> None:
    print(msg, flush=True)


def run_demo(seconds: float = 6.0, in_flight: int = 200, replicas: int = 3, keep: bool = False) -> int:
    """Run the demo; its replicas' data (128 MB of preallocated log each) is always deleted at the
    end, and its traces too unless ``keep``."""
    if not seconds > 0 or in_flight < 1 or replicas < 1:
        raise ConfigError(f"the demo needs --seconds > 0, --in-flight >= 1 and replicas >= 1, "
                          f"got {seconds:g}, {in_flight} and {replicas}")
    t_start = time.monotonic()
    data = Path(tempfile.mkdtemp(prefix="zabray-demo-"))
    _say(f"zabray demo: {replicas} replicas on an embedded Ray cluster, fsync on, data in {data}")
    ens = Ensemble.start(replicas, name="demo", data_dir=str(data / "data"), run_dir=str(data / "run"))
    try:
        t0 = time.monotonic()
        leader = ens.wait_for_leader(60)
        _say(f"  leader elected: replica {leader} (epoch {_epoch(ens, leader)}) in {time.monotonic() - t0:.2f} s")
        ens.prepare_faults()  # so the kill below is timed without the injector's start
        wl = Workload(ens, in_flight=in_flight, size=1024, trace_dir=data / "run" / "trace").start()
        _say(f"  writing 1 KB values, {in_flight} in flight ...")
        time.sleep(seconds / 2)
        killed_at = time.time()
        k0 = time.monotonic()
        ens.kill(leader)
        _say(f"  killed the leader, replica {leader}, {seconds / 2:.1f} s into the stream")
        new = ens.wait_for_leader(60)
        elected = time.monotonic() - k0
        time.sleep(seconds / 2)
        result = wl.stop()
        pause = result.longest_pause(killed_at - 1.0, killed_at + seconds / 2)
        _say(f"  new leader: replica {new} (epoch {_epoch(ens, new)}), seen established {elected:.3f} s after "
             f"the kill; the longest stretch without an acknowledged write was {pause:.3f} s")
        r0 = time.monotonic()
        ens.restart(leader)
        target = max(result.acked) if result.acked else 0
        caught = _wait_caught_up(ens, target, 60)
        _say(f"  restarted replica {leader}: {'caught up' if caught else 'NOT caught up'} "
             f"in {time.monotonic() - r0:.2f} s")
        lat = result.latencies_ms()
        _say(f"  writes: {len(result.acked):,} acknowledged ({result.throughput():,.0f}/s), "
             f"{result.count('failed')} refused, {result.count('unknown')} of unknown outcome (in flight when "
             "their replica lost its leader: each may or may not have committed, as after ZooKeeper's "
             "connection loss, and none is counted as acknowledged); "
             f"latency p50 {percentile(lat, 50):.1f} ms, p99 {percentile(lat, 99):.1f} ms")
        problems = check_histories(ens.histories(), result.acked)
        if problems:
            _say("  CHECK FAILED: " + "; ".join(problems[:5]))
        else:
            last = trace_zxid(max(result.acked)) if result.acked else "-"
            _say(f"  checked: all {len(result.acked):,} acknowledged writes (through {last}) are on every "
                 f"replica, in one order: nothing acknowledged was lost")
        if keep:
            _say(f"  traces for `zabray check`: {data / 'run'}")
        _say(f"done in {time.monotonic() - t_start:.1f} s")
        return 1 if problems or not caught else 0
    finally:
        try:
            ens.stop(wipe=True)
        except ZabError as e:  # never hide what went wrong above behind a failed cleanup
            _say(f"  could not stop the demo ensemble cleanly: {e}")
        shutil.rmtree(data / "data", ignore_errors=True)
        if not keep:
            shutil.rmtree(data, ignore_errors=True)
            _say("  cleaned up (`zabray demo --keep` keeps the traces for `zabray check`)")


def _epoch(ens: Ensemble, sid: int) -> int:
    return next(s.epoch for s in ens.status() if s.sid == sid)


def _wait_caught_up(ens: Ensemble, zxid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = ens.status()
        if all(s.alive and s.applied >= zxid for s in st):
            return True
        time.sleep(0.05)
    return False
