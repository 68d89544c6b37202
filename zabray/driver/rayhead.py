"""The local Ray head that ``zabray up`` starts and ``zabray down --stop-ray`` stops.

Found the way Ray's own client finds it (``RAY_ADDRESS``, else the bootstrap address ``ray
start`` records in ``<ray temp dir>/ray_current_cluster``), never through ``ray status``, which
does not pick up a token-authenticated head's token the way ``ray.init`` does. Stopping stops
exactly that head's processes (found by its session), not every Ray process of the user as
``ray stop`` would: other clusters on the machine (a test suite's, a notebook's) keep running.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from actors.names import WORKER_NICENESS
from zabray.errors import NotRunningError

log = logging.getLogger(__name__)

# Ray starts its workers at nice 15, so that its own daemons win the CPU. A replica is a
# latency-bound server, and on a machine it shares (with ZooKeeper in the side-by-side
# benchmarks, say) nice 15 would starve it. A cluster zabray starts gets nice-0 workers through
# the raylet's environment, where it costs nothing: asking per actor (a ``runtime_env``) starts
# each replica's worker through Ray's ``setup_worker``, a second interpreter that imports ray
# once more (about 0.6 s of CPU and 1 s per replica start, measured).

def unniced_workers() -> None:
    """Make the Ray this process starts (``ray.init``, ``ray start``, ``Cluster``) run its
    workers at nice 0, unless the user set ``RAY_worker_niceness`` already."""
    os.environ.setdefault(WORKER_NICENESS, "0")


def _bootstrap_address() -> str | None:
    try:
        from ray._private.services import find_bootstrap_address

        addr = find_bootstrap_address(None)  # what ray.init() reads: <ray temp dir>/ray_current_cluster
        return str(addr) if addr else None
    except Exception:  # the private API moved: nothing found
        log.debug("cannot read Ray's bootstrap address", exc_info=True)
        return None


def running_head() -> str | None:
    """``RAY_ADDRESS``, or the address of the head ``ray start`` last started here if its GCS
    port still accepts connections (a stale file from a stopped head does not count)."""
    env = os.environ.get("RAY_ADDRESS")
    if env:
        return env
    addr = _bootstrap_address()
    if not addr:
        return None
    return addr if answers(addr) else None


def answers(address: str) -> bool:
    """Whether something accepts TCP connections at a ``host:port`` Ray address (any other form,
    ``ray://`` or ``auto``, is Ray's to resolve: True)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return True
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=2).close()
    except OSError:
        return False
    return True


def is_local_head(address: str) -> bool:
    """Whether ``address`` names a head running on this machine: the one ``ray start`` recorded
    (its address, or its port on a loopback name), or, when that record is gone, a local GCS
    process serving that port on a loopback name."""
    recorded = _bootstrap_address()
    if recorded and address == recorded:
        return True
    host, _, port = address.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
        return False
    if recorded:
        return port == recorded.rpartition(":")[2]
    return bool(head_pids(address))


def use_local_token() -> None:
    """Send this machine's Ray token to a head found by its address, as ``ray.init()`` does for
    the head it finds itself. Ray never does so for an address it is given (``--address``,
    ``RAY_ADDRESS``), so without this, the address ``zabray up`` printed would not admit its
    own user once a token exists here (a head started with a token asks for it). No-op when
    ``RAY_AUTH_MODE`` is set or there is no token."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # the private API moved: Ray's own default stands
        log.debug("cannot enable Ray's token authentication", exc_info=True)
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _any_free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_head(port: int | None = None) -> tuple[str, int]:
    """``ray start --head`` with Ray's dashboard (on 8265, or a free port if another head has it);
    returns the new head's address and the dashboard's port."""
    gcs = port or 6379  # Ray's default
    if not _free(gcs):  # else `ray start` fails with a session-name mismatch that says nothing useful
        raise NotRunningError(
            f"port {gcs} is taken, by a Ray head this machine has no record of (`ray start` records "
            f"the head it starts; a `ray stop` elsewhere can remove that record) or by another program: "
            f"join it with --address 127.0.0.1:{gcs} (or RAY_ADDRESS), start a head on another port "
            f"with --ray-port, or stop it (`ray stop`)")
    ray_bin = shutil.which("ray", path=os.path.dirname(sys.executable)) or "ray"
    dashboard = 8265 if _free(8265) else _any_free_port()
    cmd = [ray_bin, "start", "--head", "--disable-usage-stats", f"--dashboard-port={dashboard}"]
    if port:
        cmd.append(f"--port={port}")
    unniced_workers()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        lines = [ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()]
        raise NotRunningError(f"`ray start --head` failed: {lines[-1] if lines else '(no output)'}")
    addr = running_head()
    if addr is None:
        raise NotRunningError("`ray start --head` returned but no head answers at its recorded address")
    return addr, dashboard


def _cmdlines() -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                out[int(d.name)] = (d / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
    return out


def _descendants(pids: set[int]) -> set[int]:
    """``pids`` and every process below them, however deep (the dashboard's modules are its
    forkserver's children)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found = set(pids)
    grew = True
    while grew:
        below = {pid for pid, ppid in parent.items() if ppid in found} - found
        found |= below
        grew = bool(below)
    return found


def head_pids(address: str) -> set[int]:
    """Every local process of the Ray session whose GCS listens at ``address`` (and children)."""
    cmds = _cmdlines()
    sessions = {a.split("=", 1)[1] for args in cmds.values() if f"--gcs-address={address}" in args
                for a in args if a.startswith("--session-name=")}
    port = address.rpartition(":")[2]
    sessions |= {a.split("=", 1)[1] for args in cmds.values() if f"--gcs_server_port={port}" in args
                 for a in args if a.startswith("--session-name=")}
    if not sessions:
        return set()
    pids = {pid for pid, args in cmds.items() if any(s in a for a in args for s in sessions)}
    # Ray's client server names the head by address only, and `ray start` leaves it an orphan.
    pids |= {pid for pid, args in cmds.items() if "ray.util.client.server" in args and f"--address={address}" in args}
    pids.discard(os.getpid())
    return _descendants(pids) - {os.getpid()}


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie does not: it only waits for a parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def stop_head(address: str, timeout: float = 3.0) -> int:
    """Stop the head at ``address`` (SIGTERM, then SIGKILL after ``timeout``); returns how many
    processes were signalled. Forgets the recorded address if it was this head's.

    The grace is short on purpose: the raylet and the GCS take 13 s or more to leave on SIGTERM,
    and nothing of zabray's is lost by killing them (replicas keep their state on their disks)."""
    pids = head_pids(address)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_running(p) for p in pids):
        time.sleep(0.1)
    for pid in [p for p in pids if _running(p)]:  # not a pid that has exited (it may be reused)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5.0  # SIGKILL is not refused, but its exit takes a moment
    while time.monotonic() < deadline and any(_running(p) for p in pids):
        time.sleep(0.05)
    if _bootstrap_address() == address:
        try:
            from ray._common.utils import reset_ray_address

            reset_ray_address()
        except Exception:
            log.debug("cannot forget Ray's bootstrap address", exc_info=True)
    return len(pids)
