"""What a replica's four-letter words report: its ``AdminView`` (``zabray.wire.four_letter``),
gathered from the replica, its core and its ZooKeeper service, and the resets ``srst``/``crst``.

Only cheap reads on the replica's loop: counters, the connection set, the watch tables, a stat
of the few files in the replica's store. Nothing here walks the data tree.
"""

from __future__ import annotations

import getpass
import os
import platform
import socket
import sys
import time
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zabray.protocol.messages import PeerState
from zabray.protocol.role import Phase
from zabray.wire import four_letter
from zabray.wire.four_letter import AdminView, Latency

if TYPE_CHECKING:
    from actors.replica import ReplicaServer

_JAVA_ONLY = ("java.version", "java.vendor", "java.home", "java.class.path", "java.library.path", "java.io.tmpdir",
              "java.compiler")


@cache
def _static_environment() -> tuple[tuple[str, str], ...]:
    try:
        host = socket.getfqdn(socket.gethostname())  # the JVM's getCanonicalHostName
    except OSError:
        host = "<NA>"
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "<NA>"
    arch = {"x86_64": "amd64"}.get(platform.machine(), platform.machine())  # the JVM's os.arch names
    return (("host.name", host or "<NA>"), *((k, "<NA>") for k in _JAVA_ONLY),
            ("os.name", platform.system()), ("os.arch", arch), ("os.version", platform.release()),
            ("user.name", user), ("user.home", str(Path.home())), ("user.dir", os.getcwd()))


def _mb(n: int) -> str:
    return f"{n // (1024 * 1024)}MB"


def environment() -> list[tuple[str, str]]:
    """What ``envi`` reports, in ZooKeeper's order: its version first (kazoo's ``server_version``
    reads it), then host.name, java.* (``<NA>``: no JVM here), os.* and user.*, then memory:
    ``os.memory.total`` this process's resident size, ``os.memory.max`` the machine's memory and
    ``os.memory.free`` what the machine has available (Python has no heap limit to report), and
    last zabray's own lines. Never the secret or its file."""
    mem: list[tuple[str, str]] = []
    try:
        meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        rss_pages = int(Path("/proc/self/statm").read_text().split()[1])
        mem = [("os.memory.free", _mb(int(meminfo["MemAvailable"].split()[0]) * 1024)),
               ("os.memory.max", _mb(int(meminfo["MemTotal"].split()[0]) * 1024)),
               ("os.memory.total", _mb(rss_pages * os.sysconf("SC_PAGE_SIZE")))]
    except (OSError, KeyError, ValueError, IndexError):
        mem = [("os.memory.free", "<NA>"), ("os.memory.max", "<NA>"), ("os.memory.total", "<NA>")]
    return [("zookeeper.version", four_letter.VERSION), *_static_environment(), *mem,
            ("python.version", sys.version.split()[0]), ("python.implementation", platform.python_implementation()),
            ("python.executable", sys.executable), ("process.id", str(os.getpid()))]


_HIDDEN = ("secret", "key", "digest", "sasl", "jaas", "password")


def safe_config(cfg: Any) -> dict[str, object]:
    """zabray's config minus anything naming secrets, keys or credentials' files."""
    return {k: v for k, v in cfg.to_dict().items() if not any(h in k for h in _HIDDEN) and k != "extra"}


def fd_counts() -> tuple[int, int]:
    """(open file descriptors, their limit) of this process, -1 where unknown (mntr)."""
    import resource

    try:
        n = len(os.listdir("/proc/self/fd"))
    except OSError:
        n = -1
    return n, resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def dir_size(path: Path) -> int:
    """Bytes of the regular files under ``path`` (``dirs``, ``conf``'s dataDirSize)."""
    total = 0
    try:
        for p in path.rglob("*"):
            try:
                if p.is_file():
                    total += p.stat().st_size
            except OSError:
                continue
    except OSError:
        return 0
    return total


_MODES = {PeerState.LEADING: "leader", PeerState.FOLLOWING: "follower", PeerState.OBSERVING: "observer"}


def mode_of(server: ReplicaServer) -> tuple[str, str]:
    """(``srvr``'s Mode, ``mntr``'s zk_peer_state) of the replica: leader, follower, observer,
    standalone, read-only, or "not serving" with its peer state ("looking")."""
    node = server.node
    if node is None or server.fatal is not None:
        return "not serving", "looking"
    phase = node.role.phase
    peer = f"{node.state.name.lower()} - {phase.value}"
    if phase is Phase.BROADCAST and node.state in _MODES:
        mode = _MODES[node.state]
        if mode == "leader" and len(server.proto.voters) == 1 and not server.proto.observers:
            mode = "standalone"
        return mode, peer
    zk = server.zk
    if zk is not None and zk.svc.read_only_serving:
        return "read-only", peer
    return "not serving", peer


def _leader_view(server: ReplicaServer) -> tuple[int, int, int, tuple[int, int, int] | None]:
    """(learners, synced followers, synced observers, proposal sizes last/min/max) of a leader."""
    from zabray.protocol.leader import Leader, Stage

    role = server.node.role if server.node is not None else None
    if not isinstance(role, Leader):
        return 0, 0, 0, None
    active = [h for h in role.learners.values() if h.stage >= Stage.ACTIVE]
    return (len(role.learners), sum(1 for h in active if not h.observer), sum(1 for h in active if h.observer),
            role.proposal_sizes)


def _conf(server: ReplicaServer, zk_port: int, secure_port: int, store_size: int) -> list[tuple[str, str | None]]:
    """``conf``: ZooKeeper's keys in its order, with zabray's values (one peer port serves both
    Zab and election, so electionPort and quorumPort name the same port), zabray's own keys
    (``zabray.*``, nothing secret), then the membership."""
    cfg = server.cfg
    store = str((server.data_dir / "store").resolve())
    peers = server.transport.peers if server.transport is not None else {}
    qport = server.transport.port if server.transport is not None else 0
    out: list[tuple[str, str | None]] = [
        ("clientPort", str(zk_port)), ("secureClientPort", str(secure_port)), ("dataDir", store),
        ("dataDirSize", str(store_size)), ("dataLogDir", store), ("dataLogSize", str(store_size)),
        ("tickTime", str(cfg.tick_ms)), ("maxClientCnxns", "0"),
        ("minSessionTimeout", str(cfg.zk_min_session_timeout_ms)),
        ("maxSessionTimeout", str(cfg.zk_max_session_timeout_ms)), ("clientPortListenBacklog", "-1"),
        ("serverId", str(server.sid)), ("initLimit", str(cfg.init_limit)), ("syncLimit", str(cfg.sync_limit)),
        ("electionAlg", "3"), ("electionPort", str(qport)), ("quorumPort", str(qport)),
        ("peerType", "1" if server.sid in server.proto.observers else "0"),
    ]
    out += [(f"zabray.{k}", str(v)) for k, v in sorted(safe_config(cfg).items())]
    out.append(("membership: ", None))
    for sid in sorted(server.proto.voters | server.proto.observers):
        host, port = peers.get(sid, (cfg.host, qport if sid == server.sid else 0))
        role = "observer" if sid in server.proto.observers else "participant"
        out.append((f"server.{sid}", f"{host}:{port}:{port}:{role}"))
    out.append(("version", "0"))
    return out


def admin_view(server: ReplicaServer) -> AdminView:
    """What the four-letter words tell about ``server`` right now."""
    mode, peer = mode_of(server)
    zk = server.zk
    svc = zk.svc if zk is not None else None
    tree = svc.tree if svc is not None else None
    sessions = {s: tree.ephemerals(s) for s in tree.sessions()} if tree is not None else {}
    timeouts = tree.sessions() if tree is not None else {}
    base_in, base_out = server.admin_base
    open_fds, max_fds = fd_counts()
    store_size = dir_size(server.data_dir / "store")
    zk_port = server.zk_port()
    learners, synced, synced_obs, sizes = _leader_view(server) if mode == "leader" else (0, 0, 0, None)
    expiry = dict(svc.tracker) if svc is not None and svc.tracker is not None else None
    return AdminView(
        mode=mode, zxid=tree.last_zxid if tree is not None else 0, znodes=len(tree) if tree is not None else 0,
        watches=svc.watches.count() if svc is not None else 0,
        connections=len(server._zk_clients) + len(server._clients),
        outstanding=len(svc.pending) if svc is not None else 0,
        received=server.stats["zk_requests"] - base_in, sent=server.stats["zk_frames_out"] - base_out,
        latency=server.zk_latency.view(), sessions=sessions, session_timeouts=timeouts, expiry=expiry,
        config=_conf(server, zk_port, server.zk_secure_port(), store_size), environment=environment(),
        clients=sorted((c.info() for c in server._zk_clients), key=lambda c: c.address),
        data_watches=svc.watches.data_by_session() if svc is not None else {},
        tick_ms=server.cfg.tick_ms, peer_state=peer,
        quorum_size=len(server.proto.voters), learners=learners, synced_followers=synced,
        synced_observers=synced_obs, proposal_sizes=sizes,
        approximate_data_size=tree.data_bytes if tree is not None else 0,
        uptime_ms=int((time.monotonic() - server.started_at) * 1000), open_fds=open_fds, max_fds=max_fds,
        auth_failed=server.stats.get("zk_auth_failed", 0), dirs=(store_size, store_size))


def reset(server: ReplicaServer, word: str) -> None:
    """``srst``: the server's latency and packet counts start again; ``crst``: every connection's."""
    if word == "srst":
        server.zk_latency = Latency()
        server.admin_base = (server.stats["zk_requests"], server.stats["zk_frames_out"])
    elif word == "crst":
        for c in server._zk_clients:
            c.reset_stats()


__all__ = ["admin_view", "dir_size", "environment", "fd_counts", "mode_of", "reset", "safe_config"]
