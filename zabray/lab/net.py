"""The lab's network, carried out with ``ip`` and ``tc`` (iproute2): namespaces, the bridge,
each host's cable (a veth pair), routes that partition, qdiscs that limit.

Every command names a namespace or link of the lab's own (``zabray.lab.plan``); nothing here
changes a link, address or route the lab did not make. There is no iptables or nft on the
machines this was built on, so partitions are routes inside the hosts' namespaces: a
``blackhole`` route drops what a host sends to an address, as a dead path of a real network does.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from typing import Any

from zabray.lab.errors import LabCommandError, LabPermissionError, LabUnsupportedError
from zabray.lab.plan import LabSpec, clashes, netem_args, tbf_args
from zabray.lab.state import Limit

log = logging.getLogger(__name__)

_CAP_NET_ADMIN = 12
_CAP_SYS_ADMIN = 21


def check_privileges() -> None:
    """``LabPermissionError`` naming what is missing: the ``ip`` and ``tc`` commands, and the
    capabilities to make namespaces and links (CAP_NET_ADMIN) and to mount a host's disk in
    its namespace (CAP_SYS_ADMIN); root has both."""
    missing_tools = [t for t in ("ip", "tc") if shutil.which(t) is None]
    if missing_tools:
        raise LabPermissionError(f"the lab needs iproute2's {' and '.join(missing_tools)} on PATH "
                                 "(Debian: apt-get install iproute2)")
    caps = 0
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    caps = int(line.split()[1], 16)
    except OSError:
        pass
    missing = [n for n, bit in (("CAP_NET_ADMIN", _CAP_NET_ADMIN), ("CAP_SYS_ADMIN", _CAP_SYS_ADMIN))
               if not caps >> bit & 1]
    if missing:
        how = ("run it as root, e.g. with sudo" if os.geteuid() != 0
               else f"this root process lacks {'it' if len(missing) == 1 else 'them'}: a container or setpriv dropped "
               f"{'it' if len(missing) == 1 else 'them'}")
        raise LabPermissionError(f"the lab needs {' and '.join(missing)} to make network namespaces, links "
                                 f"and mounts ({how})")


NETNS_DIR = "/run/netns"


def _outside() -> list[str]:
    """A prefix that runs a command in the machine's own network namespace when this process is
    in another one (a lab host's: a fault injector on host 1), so links are found by name. The
    machine's namespace is reached through the handle ``lab up`` made (``root_handle``): pid 1's
    may not be readable, even by root."""
    try:
        handles = [h for h in os.listdir(NETNS_DIR) if h.startswith("zl-") and h.endswith("-root")]
        if handles and os.stat("/proc/self/ns/net").st_ino != os.stat(f"{NETNS_DIR}/{handles[0]}").st_ino:
            return ["nsenter", f"--net={NETNS_DIR}/{handles[0]}"]
    except OSError:
        pass
    return []


def make_root_handle(spec: LabSpec) -> None:
    """Name the machine's own network namespace (``zl-LAB-root``), for lab commands run from
    inside a lab host; ``ip netns del`` of it later removes only the name."""
    run(["ip", "netns", "attach", spec.root_handle, str(os.getpid())])


def run(argv: list[str], *, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess[str]:
    """Run one command; ``LabCommandError`` quoting it and its error when it fails and ``check``."""
    log.debug("lab: %s", " ".join(argv))
    r = subprocess.run([*_outside(), *argv], capture_output=True, text=True)
    if r.returncode != 0 and check:
        err = (r.stderr or r.stdout).strip().splitlines()
        raise LabCommandError(f"`{' '.join(argv)}` failed: {err[-1] if err else f'exit {r.returncode}'}")
    if r.returncode != 0 and not quiet:
        log.debug("lab: %s: %s", " ".join(argv), r.stderr.strip())
    return r


def _in(ns: str | None, argv: list[str]) -> list[str]:
    return argv if ns is None else ["ip", "netns", "exec", ns, *argv]


# -- what exists ----------------------------------------------------------------------------------

def netns_list() -> set[str]:
    r = run(["ip", "-j", "netns", "list"], check=False)
    try:
        return {str(n["name"]) for n in json.loads(r.stdout or "[]")}
    except ValueError:
        return set()


def link_exists(name: str) -> bool:
    return run(["ip", "link", "show", "dev", name], check=False, quiet=True).returncode == 0


def subnet_clashes(spec: LabSpec) -> list[str]:
    """Routes and addresses of the root namespace, not the lab's, that overlap its subnet."""
    routes = json.loads(run(["ip", "-j", "-4", "route", "show", "table", "all"]).stdout or "[]")
    addrs = json.loads(run(["ip", "-j", "-4", "addr"]).stdout or "[]")
    own = {spec.bridge, *(spec.veth(h) for h in spec.host_ids)}
    return clashes(spec.subnet, routes, addrs, own)


def pids_in(ns: str) -> list[int]:
    r = run(["ip", "netns", "pids", ns], check=False, quiet=True)
    return [int(p) for p in r.stdout.split() if p.isdigit()]


# -- building and removing ------------------------------------------------------------------------

def make_bridge(spec: LabSpec) -> None:
    run(["ip", "link", "add", spec.bridge, "type", "bridge"])
    run(["ip", "addr", "add", f"{spec.gateway_ip}/{spec.prefixlen}", "dev", spec.bridge])
    run(["ip", "link", "set", spec.bridge, "up"])


def make_host(spec: LabSpec, host: int) -> None:
    """Namespace, cable (veth: ``eth0`` inside, the switch port on the bridge), address, up."""
    ns, port = spec.netns(host), spec.veth(host)
    run(["ip", "netns", "add", ns])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    run(["ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "link", "set", port, "master", spec.bridge])
    run(["ip", "link", "set", port, "up"])
    run(["ip", "-n", ns, "addr", "add", f"{spec.ip(host)}/{spec.prefixlen}", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])


def remove(spec: LabSpec) -> list[str]:
    """Delete the lab's namespaces (their cables go with them) and its bridge, those that exist;
    returns what was deleted."""
    gone = []
    have = netns_list()
    if spec.root_handle in have:
        run(["ip", "netns", "del", spec.root_handle], check=False)
    for h in spec.host_ids:
        ns = spec.netns(h)
        if ns in have:
            run(["ip", "netns", "del", ns], check=False)
            gone.append(f"netns {ns}")
        if link_exists(spec.veth(h)):  # a cable whose namespace was never made
            run(["ip", "link", "del", spec.veth(h)], check=False)
            gone.append(f"link {spec.veth(h)}")
    if link_exists(spec.bridge):
        run(["ip", "link", "del", spec.bridge], check=False)
        gone.append(f"bridge {spec.bridge}")
    return gone


# -- the nemesis --------------------------------------------------------------------------------------

def set_cable(spec: LabSpec, host: int, up: bool) -> None:
    """Down: the host's switch port stops passing frames both ways, silently (as a pulled cable
    or a dead switch port: the host does not learn of it, its packets are lost)."""
    run(["ip", "link", "set", spec.veth(host), "up" if up else "down"])


def set_blackholes(spec: LabSpec, host: int, ips: tuple[str, ...] | list[str]) -> None:
    """Make ``ips`` exactly the addresses ``host`` cannot reach (blackhole routes in its namespace)."""
    ns = spec.netns(host)
    run(["ip", "-n", ns, "route", "flush", "type", "blackhole"], check=False, quiet=True)
    for ip in ips:
        run(["ip", "-n", ns, "route", "add", "blackhole", f"{ip}/32"])


def set_limit(spec: LabSpec, host: int, limit: Limit | None) -> None:
    """Shape both directions of the host's cable: its ``eth0`` (what it sends) and its switch
    port (what it receives). ``None`` removes the shaping. A delay needs the netem qdisc."""
    ends = [(spec.netns(host), "eth0"), (None, spec.veth(host))]
    for ns, dev in ends:
        base = ["ip", "netns", "exec", ns, "tc"] if ns else ["tc"]
        run([*base, "qdisc", "del", "dev", dev, "root"], check=False, quiet=True)
        if limit is None:
            continue
        if limit.delay_ms:
            args = netem_args(limit.delay_ms, limit.rate_bps)
        elif limit.rate_bps:
            args = tbf_args(limit.rate_bps)
        else:
            continue
        r = run([*base, "qdisc", "add", "dev", dev, "root", *args], check=False)
        if r.returncode != 0:
            if "unknown" in r.stderr.lower() and args[0] == "netem":
                raise LabUnsupportedError("this kernel has no netem qdisc (sch_netem), so no added latency; "
                                          "a bandwidth limit alone (tbf) works")
            raise LabCommandError(f"`tc qdisc add dev {dev} root {' '.join(args)}` failed: {r.stderr.strip()}")


def probe_netem(spec: LabSpec) -> str:
    """"yes" if the kernel takes a netem qdisc (tried on the lab's own bridge, then removed),
    else why not."""
    r = run(["tc", "qdisc", "add", "dev", spec.bridge, "root", "netem", "delay", "1ms"], check=False, quiet=True)
    if r.returncode == 0:
        run(["tc", "qdisc", "del", "dev", spec.bridge, "root"], check=False)
        return "yes"
    err = r.stderr.strip().splitlines()
    return "no (tc: " + (err[-1].removeprefix("Error: ").rstrip(".") if err else f"exit {r.returncode}") + ")"


def link_state(spec: LabSpec, host: int) -> dict[str, Any]:
    """What the machine says of a host: its port up or not, its blackhole routes, its qdisc."""
    out: dict[str, Any] = {}
    r = run(["ip", "-j", "link", "show", "dev", spec.veth(host)], check=False, quiet=True)
    try:
        out["port_up"] = "UP" in json.loads(r.stdout)[0].get("flags", [])
    except (ValueError, IndexError):
        out["port_up"] = None
    r = run(["ip", "-n", spec.netns(host), "-j", "route", "show", "type", "blackhole"], check=False, quiet=True)
    try:
        out["blackholes"] = [str(x["dst"]) for x in json.loads(r.stdout or "[]")]
    except ValueError:
        out["blackholes"] = []
    r = run(["ip", "netns", "exec", spec.netns(host), "tc", "qdisc", "show", "dev", "eth0"], check=False, quiet=True)
    out["qdisc"] = r.stdout.strip().split("\n")[0] if r.returncode == 0 else ""
    return out
