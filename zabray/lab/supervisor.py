"""A lab host's init: mounts the host's disk, then keeps its Ray node running.

Run by ``zabray.lab.nodes`` inside the host's network namespace (``ip netns exec``, which also
gives it a mount namespace of its own): ``python -m zabray.lab.supervisor SPEC_JSON HOST``.
It plays what systemd (``Restart=always``) or a cluster manager plays for a real host's Ray
node: when the node ends (Ray declared it dead while the host was cut off, its raylet lost the
head for too long), ``ray start`` runs again and the host joins as a new Ray node with the same
IP, label and resources. Killed with the rest of the host by ``lab crash``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from zabray.lab.plan import DISK_MOUNT, LabSpec

log = logging.getLogger("zabray.lab.supervisor")
RESTART_DELAY_S = 1.0


def _children(pid: int) -> list[tuple[int, str]]:
    """Every process below ``pid`` with its command name."""
    parent: dict[int, int] = {}
    comm: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
                comm[int(d.name)] = stat[stat.index("(") + 1:stat.rindex(")")]
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], {pid}
    while frontier:
        below = {p for p, pp in parent.items() if pp in frontier}
        found += [(p, comm[p]) for p in below]
        frontier = below
    return found


def mount_disk(spec: LabSpec, host: int) -> None:
    """The host's own disk at ``DISK_MOUNT``, in this process's mount namespace only."""
    disk = spec.disk(host)
    os.makedirs(disk, exist_ok=True)
    subprocess.run(["mount", "--bind", disk, DISK_MOUNT], check=True)


def _subreaper() -> None:
    """Become the parent of what ``ray start`` leaves behind (Ray's daemons are its orphans), so
    that ending a node ends all of it, and reap them."""
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def _reap(keep: int) -> None:
    for pid, _ in _children(os.getpid()):
        if pid == keep:
            continue
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not ours (a grandchild), or reaped already
            pass


def run(spec: LabSpec, host: int) -> int:
    mount_disk(spec, host)
    _subreaper()
    ray_bin = shutil.which("ray", path=os.path.dirname(sys.executable)) or "ray"
    env = {**os.environ, **spec.env()}
    env.pop("RAY_ADDRESS", None)  # `ray start` takes the head's address from --address
    child: subprocess.Popen[bytes] | None = None
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    generation = 0
    while not stopping:
        generation += 1
        log.info("host %d: starting its Ray node (start %d)", host, generation)
        child = subprocess.Popen(spec.ray_start(host, ray_bin), env=env, start_new_session=True,
                                 stdin=subprocess.DEVNULL)
        had_raylet = False
        missing = 0
        while child.poll() is None and not stopping:
            time.sleep(1.0)
            _reap(child.pid)
            raylet = any(name == "raylet" for _, name in _children(child.pid))
            had_raylet = had_raylet or raylet
            missing = missing + 1 if had_raylet and not raylet else 0
            if missing >= 2:  # the raylet ended and `ray start --block` took it for a clean exit
                log.warning("host %d: its raylet ended; restarting its Ray node", host)
                os.killpg(child.pid, signal.SIGKILL)
        if child.poll() is None:
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        for pid, _ in _children(os.getpid()):  # what `ray start` left behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
        _reap(-1)
        if not stopping:
            log.warning("host %d: its Ray node ended (exit %s); starting it again in %.0f s",
                        host, child.returncode, RESTART_DELAY_S)
            time.sleep(RESTART_DELAY_S)
    return 0


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    spec = LabSpec.from_dict(json.loads(argv[0]))
    return run(spec, int(argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
