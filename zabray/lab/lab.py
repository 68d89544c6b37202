"""``Lab``: a lab of hosts on this machine, its state file, and its nemesis.

A lab is ``hosts`` network namespaces on a bridge, each a host with its own IP, its own disk
and its own Ray node (host 1 runs the head). The root namespace sits on the bridge too, at .254:
a process there reaches every host's ports (clients, kazoo, ZooKeeper), and a Ray driver there
joins the lab's cluster through host 1's Ray node (Ray attaches a driver to a node on the same
machine, the head first), so it shares host 1's fate under the nemesis. ``exec`` runs a command
on any host, as on a real cluster one would log in to it.

Every change is recorded in ``<root>/<name>/state.json`` before it is made, so that ``down``,
and the next ``up`` after a killed process, remove exactly what the lab made.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from zabray.lab import net, nodes
from zabray.lab.errors import LabCommandError, LabNotUpError, LabUnsupportedError
from zabray.lab.plan import DISK_MOUNT, LabSpec, parse_rate
from zabray.lab.state import LabState, Limit

log = logging.getLogger(__name__)
DEFAULT_ROOT = LabSpec().root


def _state_path(name: str, root: str) -> Path:
    return Path(root) / name / "state.json"


class Lab:
    """A handle on a lab that is up. ``Lab.up(...)`` builds one, ``Lab.find(name)`` finds one."""

    def __init__(self, state: LabState) -> None:
        self._state = state

    @property
    def spec(self) -> LabSpec:
        return self._state.spec

    @property
    def state(self) -> LabState:
        return self._state

    # -- life ---------------------------------------------------------------------------------------

    @classmethod
    def up(cls, spec: LabSpec | None = None, *, wait: float = 300.0, **kw: Any) -> Lab:
        """Build the lab (``LabSpec`` fields as keywords: ``Lab.up(hosts=3)``), cleaning first a
        lab of the same name left behind, and wait until every host's Ray node has joined."""
        spec = spec or LabSpec(**kw)
        net.check_privileges()
        path = Path(spec.state_file)
        if path.exists():
            log.warning("lab %s: found a lab of this name left behind; removing it first", spec.name)
            cls.down(spec.name, spec.root)
        problems = net.subnet_clashes(spec)
        if problems:
            raise LabCommandError(f"subnet {spec.subnet} is in use on this machine ({'; '.join(problems)}); "
                                  "pick another one with --subnet, e.g. 10.213.7.0/24")
        busy = sorted(n for n in net.netns_list() if n in {spec.root_handle, *(spec.netns(h) for h in spec.host_ids)})
        busy += [x for x in [spec.bridge, *(spec.veth(h) for h in spec.host_ids)] if net.link_exists(x)]
        if busy:
            raise LabCommandError(f"{', '.join(busy)} exist but no lab state file {path} says the lab made them: "
                                  "remove them by hand (ip netns del / ip link del) or pick another --name")
        made = not os.path.isdir(DISK_MOUNT)
        os.makedirs(spec.dir, exist_ok=True)
        lab = cls(LabState(spec, os.getpid(), time.time(), mountpoint_made=made))
        lab._save()  # before anything is made: a killed `up` leaves this record behind
        try:
            os.makedirs(DISK_MOUNT, exist_ok=True)
            fd = os.open(spec.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
            net.make_root_handle(spec)
            net.make_bridge(spec)
            for h in spec.host_ids:
                net.make_host(spec, h)
                os.makedirs(spec.disk(h), exist_ok=True)
            lab._update(capabilities={"netem": net.probe_netem(spec), "tbf": "yes", "partitions": "blackhole routes"})
            for h in spec.host_ids:
                nodes.start_node(spec, h)
                if h == 1:  # the others join the head; its GCS must answer first
                    lab.wait_nodes([1], wait)
            if wait:
                lab.wait_nodes(spec.host_ids, wait)
        except BaseException:
            cls.down(spec.name, spec.root)
            raise
        return lab

    @classmethod
    def find(cls, name: str = "lab", root: str = DEFAULT_ROOT) -> Lab:
        """The lab ``name`` that is up here, from its state file; ``LabNotUpError`` if none."""
        path = _state_path(name, root)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise LabNotUpError(f"no lab named {name!r} is up here (no {path}); `zabray lab up` builds one") from None
        return cls(LabState.from_json(text, str(path)))

    @classmethod
    def down(cls, name: str = "lab", root: str = DEFAULT_ROOT, keep_data: bool = False) -> list[str]:
        """Remove everything lab ``name`` made: its processes, namespaces, links, Ray temp dirs
        and (unless ``keep_data``) its directory with the hosts' disks. Returns what it removed."""
        net.check_privileges()
        path = _state_path(name, root)
        if not path.exists():
            raise LabNotUpError(f"no lab named {name!r} is up here (no {path})")
        state = LabState.from_json(path.read_text(), str(path))
        spec = state.spec
        gone = []
        have = net.netns_list()
        for h in spec.host_ids:
            if spec.netns(h) in have:
                n = nodes.kill_host(spec, h)
                if n:
                    gone.append(f"{n} process(es) of host {h}")
        gone += net.remove(spec)
        for h in spec.host_ids:
            if os.path.isdir(spec.ray_temp(h)):
                shutil.rmtree(spec.ray_temp(h), ignore_errors=True)
                gone.append(spec.ray_temp(h))
        if state.mountpoint_made:
            with contextlib.suppress(OSError):
                os.rmdir(DISK_MOUNT)  # only if empty: something else may have come to use it
        if keep_data:
            path.unlink()
        else:
            shutil.rmtree(spec.dir, ignore_errors=True)
            gone.append(spec.dir)
            with contextlib.suppress(OSError):
                os.rmdir(spec.root)  # only if no other lab lives there
        return gone

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        Lab.down(self.spec.name, self.spec.root)

    # -- state ---------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(Path(self.spec.dir) / "lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                path = Path(self.spec.state_file)
                if path.exists():  # another process's nemesis may have changed it
                    self._state = LabState.from_json(path.read_text(), str(path))
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _save(self) -> None:
        path = Path(self.spec.state_file)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self._state.to_json())
        os.replace(tmp, path)

    def _update(self, **changes: Any) -> None:
        self._state = replace(self._state, **changes)
        self._save()

    # -- running things on hosts -------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """What a Ray driver needs to join the lab's cluster: ``RAY_ADDRESS``, the token, Ray's settings."""
        return dict(self.spec.env())

    def exec(self, host: int, argv: list[str], *, env: dict[str, str] | None = None, timeout: float | None = None,
             capture: bool = True, check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on ``host`` (its network, its disk, the lab's Ray in its environment)."""
        self.spec.check_host(host)
        return nodes.exec_on(self.spec, host, argv, env=env, timeout=timeout, capture=capture, check=check)

    def spawn(self, host: int, argv: list[str], *, env: dict[str, str] | None = None,
              **popen: Any) -> subprocess.Popen[Any]:
        self.spec.check_host(host)
        return nodes.spawn_on(self.spec, host, argv, env=env, **popen)

    def ip(self, host: int) -> str:
        return self.spec.ip(self.spec.check_host(host))

    def ray_nodes(self) -> list[nodes.RayNode] | None:
        return nodes.ray_nodes(self.spec)

    def wait_nodes(self, hosts: list[int], timeout: float = 120.0, *, new_since: frozenset[str] | set[str] = frozenset()) -> None:
        """Until each of ``hosts`` has a live Ray node that the head knows, other than the nodes
        ``new_since`` names (``LabCommandError`` after ``timeout``, naming the hosts still
        missing and where their node logs are)."""
        deadline = time.monotonic() + timeout
        missing = list(hosts)
        while True:
            seen = self.ray_nodes()
            if seen is not None:
                live = {n.host for n in seen if n.alive and n.node_id not in new_since}
                missing = [h for h in hosts if h not in live]
                if not missing:
                    return
            if time.monotonic() > deadline:
                raise LabCommandError(f"lab {self.spec.name}: host(s) {missing} have no live Ray node after "
                                      f"{timeout:.0f} s (see {', '.join(self.spec.log_file(h) for h in missing)})")
            time.sleep(0.5)

    # -- the nemesis ---------------------------------------------------------------------------------

    def cut(self, host: int) -> None:
        """Cut ``host`` off from everything (its cable's switch port down): nothing it sends
        arrives, nothing reaches it. Its processes run on, unaware."""
        self.spec.check_host(host)
        with self._locked():
            self._state = self._state.with_cut(host, True)
            self._save()
            net.set_cable(self.spec, host, up=False)

    def reconnect(self, host: int) -> None:
        """Plug ``host`` back in (undo ``cut``)."""
        self.spec.check_host(host)
        with self._locked():
            if host not in self._state.crashed:
                net.set_cable(self.spec, host, up=True)
            self._state = self._state.with_cut(host, False)
            self._save()

    def partition(self, *groups: list[int]) -> None:
        """Groups of hosts that cannot reach each other (both ways): ``lab.partition([1], [2, 3])``;
        hosts no group names form one more group. Replaces any partition in force."""
        routes = self.spec.partition_routes([list(g) for g in groups])
        what = " | ".join(",".join(map(str, g)) for g in self.spec.check_groups([list(g) for g in groups]))
        self._block(routes, what, replace_all=True)

    def oneway(self, src: list[int], dst: list[int]) -> None:
        """What ``src`` sends to ``dst`` is lost (added to what is blocked already)."""
        routes = self.spec.oneway_routes(list(src), list(dst))
        self._block(routes, f"{','.join(map(str, src))} -> {','.join(map(str, dst))}", replace_all=False)

    def _block(self, routes: dict[int, list[str]], what: str, replace_all: bool) -> None:
        with self._locked():
            base = self._state.healed() if replace_all else self._state
            self._state = base.with_blocked(routes, what)
            self._save()
            for h in self.spec.host_ids:
                net.set_blackholes(self.spec, h, self._state.blocked_of(h))

    def heal(self) -> None:
        """Undo every partition, one-way cut and ``cut`` (crashed hosts stay crashed, limits stay)."""
        with self._locked():
            self._state = self._state.healed()
            for h in list(self._state.cut):
                if h not in self._state.crashed:
                    net.set_cable(self.spec, h, up=True)
                self._state = self._state.with_cut(h, False)
            self._save()
            for h in self.spec.host_ids:
                net.set_blackholes(self.spec, h, ())

    def limit(self, host: int, rate: str | int | None = None, delay_ms: float | None = None) -> None:
        """Limit ``host``'s bandwidth both ways (``rate``: bits/s or ``"10mbit"``; tc's tbf) and,
        where the kernel has netem, add ``delay_ms`` each way. ``None`` for both: no limit."""
        self.spec.check_host(host)
        bps = parse_rate(rate) if isinstance(rate, str) else rate
        if delay_ms is not None and delay_ms > 0 and self._state.capabilities.get("netem") != "yes":
            raise LabUnsupportedError(f"this kernel has no netem qdisc, so no added latency "
                                      f"({self._state.capabilities.get('netem', 'not probed')}); "
                                      "a bandwidth limit alone (tbf) works")
        lim = Limit(bps, delay_ms if delay_ms else None) if (bps or delay_ms) else None
        with self._locked():
            net.set_limit(self.spec, host, lim)
            self._state = self._state.with_limit(host, lim)
            self._save()

    def unlimit(self, host: int) -> None:
        self.limit(host, None, None)

    def crash(self, host: int) -> int:
        """Power ``host`` off: every process in it killed (its Ray node too), its cable down. Its
        disk stays. Returns how many processes were killed."""
        self.spec.check_host(host)
        with self._locked():
            self._state = self._state.with_crashed(host, True)
            self._save()
            net.set_cable(self.spec, host, up=False)
            n = nodes.kill_host(self.spec, host)
            shutil.rmtree(self.spec.ray_temp(host), ignore_errors=True)  # a reboot empties /tmp
        return n

    def revive(self, host: int, wait: float = 120.0) -> None:
        """Power ``host`` back on with its disk: its cable up again (unless it is also ``cut``),
        its Ray node started and joined to the head (a new Ray node: a new node id)."""
        self.spec.check_host(host)
        # The GCS takes its health checks' time to see the old node dead: wait for a new one.
        old = {n.node_id for n in self.ray_nodes() or [] if n.host == host}
        with self._locked():
            if host not in self._state.crashed:
                raise LabCommandError(f"host {host} is not crashed")
            if host not in self._state.cut:
                net.set_cable(self.spec, host, up=True)
            nodes.start_node(self.spec, host)
            self._state = self._state.with_crashed(host, False)
            self._save()
        if wait:
            self.wait_nodes([host], wait, new_since=old)

    # -- observation ---------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Per host: address, cable, partition routes, limit, processes, Ray node; and the lab's
        head address, capabilities and Ray settings."""
        s = self._state
        ray_nodes = self.ray_nodes()
        hosts = []
        for h in self.spec.host_ids:
            link = net.link_state(self.spec, h)
            lim = s.limit_of(h)
            live = [n for n in ray_nodes or [] if n.host == h and n.alive]
            hosts.append({
                "host": h, "ip": self.spec.ip(h), "netns": self.spec.netns(h),
                "cable": "crashed" if h in s.crashed else ("cut" if h in s.cut else "up"),
                "port_up": link["port_up"], "unreachable": list(s.blocked_of(h)),
                "limit": None if lim is None else {"rate_bps": lim.rate_bps, "delay_ms": lim.delay_ms},
                "processes": len(net.pids_in(self.spec.netns(h))),
                "ray_node": (live[0].node_id if live else None) if ray_nodes is not None else "unknown",
            })
        return {"name": self.spec.name, "subnet": self.spec.subnet, "head": self.spec.head_address,
                "gateway": self.spec.gateway_ip, "dir": self.spec.dir, "partition": s.partition,
                "capabilities": s.capabilities, "ray": self.spec.to_dict()["ray"],
                "node_death_s": self.spec.ray.node_death_s(), "hosts": hosts}
