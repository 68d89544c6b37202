"""The lab's plan, pure: names, addresses, command lines and the routes a partition needs.

Nothing here touches the machine; ``zabray.lab.net`` and ``zabray.lab.nodes`` carry the plan
out. Every name the lab gives a namespace or a link starts with ``zl-<lab name>`` and every
address is in the lab's own /24, so that ``lab down`` can remove exactly what the lab made.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field
from typing import Any

from zabray.errors import ConfigError

DEFAULT_SUBNET = "10.213.0.0/24"
GATEWAY_OCTET = 254
"""The address of the root namespace on the lab's bridge (the operator's, or a client's, machine)."""
MAX_HOSTS = 200
GCS_PORT = 6379
HOST_LABEL = "zabray.io/host"
"""The Ray node label naming a lab host (``h1``...): what identifies a replica's home."""
DISK_MOUNT = "/var/tmp/zabray"
"""Where each host sees its own disk: ``configs/cluster.yaml``'s ``data_dir`` lies under it."""
_NAME = re.compile(r"^[a-z0-9]{1,8}$")


@dataclass(frozen=True, slots=True)
class RaySettings:
    """Ray's own settings, passed to every host's Ray processes as ``RAY_<name>`` variables.

    The GCS declares a node dead after ``health_failures`` missed checks, one every
    ``health_period_ms`` (each given ``health_timeout_ms``); a raylet or worker that cannot
    reach the GCS for ``gcs_reconnect_s`` exits. Ray's defaults are kept unless set."""

    health_period_ms: int = 3000
    health_timeout_ms: int = 10000
    health_failures: int = 5
    health_initial_delay_ms: int = 5000
    gcs_reconnect_s: int = 60
    token: bool = True
    """Token authentication (``RAY_AUTH_MODE=token``), the token in the lab's directory."""

    def env(self, token_path: str) -> dict[str, str]:
        out = {
            "RAY_health_check_period_ms": str(self.health_period_ms),
            "RAY_health_check_timeout_ms": str(self.health_timeout_ms),
            "RAY_health_check_failure_threshold": str(self.health_failures),
            "RAY_health_check_initial_delay_ms": str(self.health_initial_delay_ms),
            "RAY_gcs_rpc_server_reconnect_timeout_s": str(self.gcs_reconnect_s),
            # Replicas are latency-bound servers: Ray's nice-15 workers would starve them
            # (zabray.driver.rayhead.unniced_workers).
            "RAY_worker_niceness": "0",
        }
        if self.token:
            out |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token_path}
        else:
            out["RAY_AUTH_MODE"] = "disabled"
        return out

    def node_death_s(self) -> float:
        """About how long a silent node lives on in the GCS's eyes before it is declared dead."""
        return (self.health_failures * self.health_period_ms + self.health_timeout_ms) / 1000

    def problems(self) -> list[str]:
        out = []
        for name in ("health_period_ms", "health_timeout_ms", "health_failures", "health_initial_delay_ms",
                     "gcs_reconnect_s"):
            if getattr(self, name) < 1:
                out.append(f"{name} must be at least 1, got {getattr(self, name)}")
        return out


@dataclass(frozen=True, slots=True)
class LabSpec:
    """What ``lab up`` builds: ``hosts`` namespaces on a bridge in ``subnet`` (a /24), host i at
    .i, the root namespace at .254; Ray's head on host 1."""

    name: str = "lab"
    hosts: int = 3
    subnet: str = DEFAULT_SUBNET
    root: str = "/var/tmp/zabray-lab"
    """The lab's own directory: ``<root>/<name>/`` holds its state file, token and hosts' disks."""
    cpus: int = 1
    """CPUs each host's Ray node offers (zabray's actors ask for none)."""
    object_store_mb: int = 100
    ray: RaySettings = field(default_factory=RaySettings)

    def __post_init__(self) -> None:
        problems = []
        if not _NAME.match(self.name):
            problems.append(f"lab name {self.name!r}: use 1 to 8 lowercase letters or digits "
                            "(it goes into network interface names, 15 characters at most)")
        if isinstance(self.hosts, bool) or not isinstance(self.hosts, int) or not 1 <= self.hosts <= MAX_HOSTS:
            problems.append(f"hosts must be between 1 and {MAX_HOSTS}, got {self.hosts!r}")
        try:
            net = ipaddress.ip_network(self.subnet, strict=True)
        except ValueError as e:
            problems.append(f"subnet {self.subnet!r}: {e}")
        else:
            if net.version != 4 or net.prefixlen != 24 or not net.is_private:
                problems.append(f"subnet {self.subnet!r} must be a private IPv4 /24, e.g. {DEFAULT_SUBNET}")
        if self.cpus < 1:
            problems.append(f"cpus must be at least 1, got {self.cpus}")
        if self.object_store_mb < 80:
            problems.append(f"object_store_mb must be at least 80 (Ray's minimum is 75 MiB), got {self.object_store_mb}")
        problems += self.ray.problems()
        if problems:
            raise ConfigError("; ".join(problems))

    # -- names and addresses ----------------------------------------------------------------------

    @property
    def host_ids(self) -> list[int]:
        return list(range(1, self.hosts + 1))

    def check_host(self, host: int) -> int:
        if isinstance(host, bool) or not isinstance(host, int) or host not in self.host_ids:
            raise ConfigError(f"no host {host!r} in lab {self.name!r} (hosts are 1..{self.hosts})")
        return host

    @property
    def bridge(self) -> str:
        return f"zl-{self.name}"

    @property
    def root_handle(self) -> str:
        """The lab's name for the machine's own network namespace (``zabray.lab.net._outside``)."""
        return f"zl-{self.name}-root"

    def netns(self, host: int) -> str:
        return f"zl-{self.name}-h{host}"

    def veth(self, host: int) -> str:
        """The root namespace's end of host ``host``'s cable (the switch port); the host's end is
        ``eth0`` inside its namespace."""
        return f"zl-{self.name}-{host}"

    def ip(self, host: int) -> str:
        net = ipaddress.ip_network(self.subnet)
        return str(net.network_address + host)

    @property
    def gateway_ip(self) -> str:
        return str(ipaddress.ip_network(self.subnet).network_address + GATEWAY_OCTET)

    @property
    def prefixlen(self) -> int:
        return ipaddress.ip_network(self.subnet).prefixlen

    @property
    def head_address(self) -> str:
        return f"{self.ip(1)}:{GCS_PORT}"

    def host_of_ip(self, ip: str) -> int | None:
        return next((h for h in self.host_ids if self.ip(h) == ip), None)

    # -- directories ------------------------------------------------------------------------------

    @property
    def dir(self) -> str:
        return f"{self.root.rstrip('/')}/{self.name}"

    @property
    def state_file(self) -> str:
        return f"{self.dir}/state.json"

    @property
    def token_file(self) -> str:
        return f"{self.dir}/auth_token"

    def disk(self, host: int) -> str:
        """Host ``host``'s disk, seen inside the host at ``DISK_MOUNT``."""
        return f"{self.dir}/h{host}/disk"

    def log_file(self, host: int) -> str:
        return f"{self.dir}/h{host}/node.log"

    def ray_temp(self, host: int) -> str:
        """Ray's temp dir of the host: short, since Ray's unix sockets live under it (108 bytes)."""
        return f"/tmp/zl-{self.name}-h{host}"

    # -- Ray --------------------------------------------------------------------------------------

    def ray_start(self, host: int, ray_bin: str) -> list[str]:
        """``ray start --block`` for host ``host``: the head on host 1, the others joining it; the
        node's IP, its own temp dir, a label and a resource naming the host."""
        self.check_host(host)
        argv = [ray_bin, "start", "--block", f"--node-ip-address={self.ip(host)}",
                f"--temp-dir={self.ray_temp(host)}", "--disable-usage-stats", "--include-log-monitor=false", f"--num-cpus={self.cpus}",
                f"--object-store-memory={self.object_store_mb * 1024 * 1024}",
                f"--resources={json.dumps({host_resource(host): 1})}",
                f"--labels={json.dumps({HOST_LABEL: host_label(host)})}"]
        if host == 1:
            argv += ["--head", f"--port={GCS_PORT}", "--include-dashboard=false"]
        else:
            argv += [f"--address={self.head_address}"]
        return argv

    def env(self) -> dict[str, str]:
        """What every process of the lab's Ray (nodes and drivers) needs in its environment."""
        return self.ray.env(self.token_file) | {"RAY_ADDRESS": self.head_address}

    # -- the nemesis's routes ----------------------------------------------------------------------

    def partition_routes(self, groups: list[list[int]]) -> dict[int, list[str]]:
        """Per host, the addresses it must not reach so that ``groups`` cannot talk to each other
        (hosts no group names form one more group)."""
        groups = self.check_groups(groups)
        out: dict[int, list[str]] = {h: [] for h in self.host_ids}
        for g in groups:
            for h in g:
                out[h] += [self.ip(o) for o in self.host_ids if o not in g]
        return {h: sorted(set(v), key=_ip_key) for h, v in out.items() if v}

    def oneway_routes(self, src: list[int], dst: list[int]) -> dict[int, list[str]]:
        """Per host of ``src``, the addresses of ``dst`` it must not reach (``dst`` still sends to
        ``src``; over TCP that stalls both ways, as an asymmetric failure of a real network does)."""
        for h in [*src, *dst]:
            self.check_host(h)
        if set(src) & set(dst):
            raise ConfigError(f"one-way partition: hosts {sorted(set(src) & set(dst))} are on both sides")
        if not src or not dst:
            raise ConfigError("one-way partition needs hosts on both sides")
        return {h: [self.ip(d) for d in sorted(set(dst))] for h in sorted(set(src))}

    def check_groups(self, groups: list[list[int]]) -> list[list[int]]:
        flat = [h for g in groups for h in g]
        for h in flat:
            self.check_host(h)
        twice = sorted({h for h in flat if flat.count(h) > 1})
        if twice:
            raise ConfigError(f"partition groups must be disjoint: host(s) {twice} appear twice")
        rest = [h for h in self.host_ids if h not in flat]
        out = [sorted(g) for g in groups if g] + ([rest] if rest else [])
        if len(out) < 2:
            raise ConfigError("a partition needs at least two groups of hosts")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "hosts": self.hosts, "subnet": self.subnet, "root": self.root, "cpus": self.cpus,
                "object_store_mb": self.object_store_mb,
                "ray": {k: getattr(self.ray, k) for k in RaySettings.__slots__}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LabSpec:
        return cls(name=d["name"], hosts=int(d["hosts"]), subnet=d["subnet"], root=d["root"],
                   cpus=int(d.get("cpus", 1)), object_store_mb=int(d.get("object_store_mb", 100)),
                   ray=RaySettings(**d.get("ray", {})))


def host_label(host: int) -> str:
    return f"h{host}"


def host_resource(host: int) -> str:
    return f"zabray-host-{host}"


def _ip_key(ip: str) -> int:
    return int(ipaddress.ip_address(ip))


def parse_groups(text: list[str]) -> list[list[int]]:
    """``["1", "2,3"]`` -> ``[[1], [2, 3]]``; a ``ConfigError`` names a bad group."""
    out = []
    for g in text:
        try:
            out.append([int(x) for x in g.split(",") if x.strip()])
        except ValueError:
            raise ConfigError(f"bad host group {g!r}: use host numbers separated by commas, e.g. 1,2") from None
    return out


def parse_rate(text: str) -> int:
    """A rate as tc writes it (``10mbit``, ``500kbit``, ``1gbit``, ``2mbps``) in bits per second."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?)(bit|bps)?\s*", text.lower())
    if not m:
        raise ConfigError(f"bad rate {text!r}: use e.g. 10mbit, 500kbit or 1gbit")
    value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    if m.group(3) == "bps":
        value *= 8
    if value < 8000:
        raise ConfigError(f"rate {text!r} is below 8kbit; tc cannot shape that slowly")
    return int(value)


def tbf_args(rate_bps: int) -> list[str]:
    """``tc qdisc ... tbf`` parameters for ``rate_bps``: a bucket of at least 10 ms of traffic
    (and of two 64 KiB segments: GSO sends whole super-packets), a queue of 200 ms."""
    burst = max(rate_bps // 8 // 100, 2 * 65536)
    return ["tbf", "rate", f"{rate_bps}bit", "burst", str(burst), "latency", "200ms"]


def netem_args(delay_ms: float, rate_bps: int | None) -> list[str]:
    args = ["netem", "delay", f"{delay_ms:g}ms"]
    if rate_bps:
        args += ["rate", f"{rate_bps}bit"]
    return args


def clashes(subnet: str, routes: list[dict[str, Any]], addrs: list[dict[str, Any]], own: set[str]) -> list[str]:
    """What of the machine's (root namespace's) routes and addresses overlaps ``subnet``, from
    ``ip -j -4 route`` and ``ip -j -4 addr``; the lab's own links (``own``) and the default
    route do not count. Non-empty: the lab must not use that subnet."""
    net = ipaddress.ip_network(subnet)
    out = []
    for r in routes:
        dst, dev = str(r.get("dst", "")), str(r.get("dev", ""))
        if dst in ("default", "") or dev in own:
            continue
        try:
            other = ipaddress.ip_network(dst if "/" in dst else f"{dst}/32", strict=False)
        except ValueError:
            continue
        if other.version == 4 and net.overlaps(other):
            out.append(f"route {dst} dev {dev}")
    for link in addrs:
        if str(link.get("ifname", "")) in own:
            continue
        for a in link.get("addr_info", []):
            try:
                ip = ipaddress.ip_address(str(a.get("local", "")))
            except ValueError:
                continue
            if ip in net:
                out.append(f"address {ip} on {link.get('ifname')}")
    return out
