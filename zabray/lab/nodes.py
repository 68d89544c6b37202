"""The lab's processes: each host's Ray node (under ``zabray.lab.supervisor``), commands run on
a host (``exec``), a host's crash, and what the lab's Ray head says of its nodes."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from zabray.lab import net
from zabray.lab.errors import LabCommandError
from zabray.lab.plan import DISK_MOUNT, HOST_LABEL, LabSpec

log = logging.getLogger(__name__)

# A command run on a host sees the host's disk where the host's Ray node does: the mount is made
# in the mount namespace `ip netns exec` gives every command it runs.
_ENTER = 'disk=$1; at=$2; shift 2; mount --bind "$disk" "$at" && exec "$@"'


def host_argv(spec: LabSpec, host: int, argv: list[str]) -> list[str]:
    """``argv`` as run on ``host``: its network namespace, its disk at ``DISK_MOUNT``."""
    return ["ip", "netns", "exec", spec.netns(host), "sh", "-c", _ENTER, "sh", spec.disk(host), DISK_MOUNT, *argv]


def host_env(spec: LabSpec, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a command run on a lab host: the lab's Ray (its address, its token,
    its settings) and this interpreter's ``bin`` first on PATH (``zabray``, ``ray``)."""
    env = {**os.environ, **spec.env(), **(extra or {})}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def start_node(spec: LabSpec, host: int) -> int:
    """Start the host's supervisor (which mounts its disk and runs its Ray node); returns its pid."""
    os.makedirs(spec.disk(host), exist_ok=True)
    logf = open(spec.log_file(host), "ab")
    try:
        argv = ["ip", "netns", "exec", spec.netns(host), sys.executable, "-m", "zabray.lab.supervisor",
                json.dumps(spec.to_dict()), str(host)]
        env = host_env(spec)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_source_root(), env.get("PYTHONPATH")) if p)
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                             start_new_session=True, cwd="/")
    finally:
        logf.close()
    return p.pid


def _source_root() -> str:
    """The directory holding the ``zabray`` package, so the supervisor imports this very code."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kill_host(spec: LabSpec, host: int, timeout: float = 10.0) -> int:
    """SIGKILL every process in the host's namespace (its supervisor, its Ray node, whatever ran
    there), as a power cut would; returns how many. Waits until they are gone."""
    ns = spec.netns(host)
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [p for p in net.pids_in(ns) if p != os.getpid() and _running(p)]
        if not pids:
            return len(killed)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    raise LabCommandError(f"processes of host {host} still run {timeout:.0f} s after SIGKILL: "
                          f"{net.pids_in(ns)}")


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def exec_on(spec: LabSpec, host: int, argv: list[str], *, env: dict[str, str] | None = None,
            timeout: float | None = None, capture: bool = True, check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` on ``host`` and wait for it."""
    r = subprocess.run(host_argv(spec, host, argv), env=host_env(spec, env), text=True, timeout=timeout,
                       capture_output=capture, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        err = ((r.stderr or "") + (r.stdout or "")).strip().splitlines()
        raise LabCommandError(f"`{' '.join(argv)}` on host {host} exited {r.returncode}: {err[-1] if err else ''}")
    return r


def spawn_on(spec: LabSpec, host: int, argv: list[str], *, env: dict[str, str] | None = None,
             **popen: Any) -> subprocess.Popen[Any]:
    """Start ``argv`` on ``host`` without waiting (a workload, a ZooKeeper server)."""
    return subprocess.Popen(host_argv(spec, host, argv), env=host_env(spec, env), **popen)


@dataclass(frozen=True, slots=True)
class RayNode:
    node_id: str
    ip: str
    host: int | None
    alive: bool


def ray_nodes(spec: LabSpec, timeout: float = 5.0) -> list[RayNode] | None:
    """Every node the lab's Ray head knows (alive or dead), or None if the head does not answer
    from here (the root namespace; host 1 cut off or crashed). Asked in a child process, so that
    this one's Ray (if any) and environment are left alone."""
    code = ("import json,sys\nfrom ray._raylet import GcsClient\n"
            f"c=GcsClient(address={spec.head_address!r})\n"
            f"n=c.get_all_node_info(timeout={timeout})\n"
            "print(json.dumps([[k.hex(),v.node_manager_address,v.state==0,dict(v.labels)] for k,v in n.items()]))")
    try:
        r = subprocess.run([sys.executable, "-c", code], env=host_env(spec), capture_output=True, text=True,
                           timeout=timeout + 20)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode != 0:
        log.debug("lab: no answer from the head: %s", r.stderr.strip()[-300:])
        return None
    out = []
    for node_id, ip, alive, labels in json.loads(r.stdout.strip().splitlines()[-1]):
        label = str(labels.get(HOST_LABEL, ""))
        host = int(label[1:]) if label.startswith("h") and label[1:].isdigit() else spec.host_of_ip(ip)
        out.append(RayNode(node_id, ip, host, bool(alive)))
    return out
