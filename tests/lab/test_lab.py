"""The lab on real namespaces: hosts with their own IPs, disks and Ray nodes; cuts, partitions,
one-way cuts, bandwidth limits and crashes as the kernel makes them; ``down`` and the clean-up of
a lab left behind by a killed ``lab up``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lab.conftest import need_root
from tests.polling import wait_until
from zabray.lab import Lab, LabPermissionError, LabSpec, LabUnsupportedError
from zabray.lab import net as labnet
from zabray.lab.plan import DISK_MOUNT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
PORT = 8765


def reaches(lab: Lab, src: int | None, dst: int, port: int = PORT) -> bool:
    """Whether a TCP connection from host ``src`` (None: this machine) to ``dst`` opens within 1 s."""
    if src is None:
        try:
            socket.create_connection((lab.ip(dst), port), timeout=1).close()
            return True
        except OSError:
            return False
    code = f"import socket; socket.create_connection(({lab.ip(dst)!r}, {port}), timeout=1).close()"
    return lab.exec(src, [sys.executable, "-c", code], timeout=30).returncode == 0


@pytest.fixture(scope="module")
def servers(lab: Lab) -> object:
    """An HTTP server on every host, serving its disk (what the connectivity tests dial)."""
    procs = []
    for h in lab.spec.host_ids:
        lab.exec(h, ["sh", "-c", f"head -c 3000000 /dev/zero > {DISK_MOUNT}/blob"], check=True)
        procs.append(lab.spawn(h, [sys.executable, "-m", "http.server", str(PORT), "--bind", lab.ip(h),
                                   "--directory", DISK_MOUNT], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL))
    for h in lab.spec.host_ids:
        wait_until(lambda h=h: reaches(lab, None, h), 30, f"host {h}'s server")
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def test_without_privileges_the_lab_says_what_is_missing_in_one_line_and_exits_2() -> None:
    need_root()
    r = subprocess.run(["setpriv", "--bounding-set=-net_admin,-sys_admin", sys.executable, "-m", "zabray.cli.main",
                        "lab", "up", "--name", "zpriv"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r
    assert r.stderr.count("\n") == 1 and "CAP_NET_ADMIN and CAP_SYS_ADMIN" in r.stderr and "Traceback" not in r.stderr
    assert not Path(LabSpec(name="zpriv").dir).exists()


def test_each_host_has_its_ip_its_ray_node_and_a_disk_of_its_own(lab: Lab, servers: object) -> None:
    lab.wait_nodes(lab.spec.host_ids)
    nodes = lab.ray_nodes()
    assert nodes is not None
    live = {n.host: n for n in nodes if n.alive}
    assert sorted(live) == [1, 2, 3] and all(live[h].ip == lab.ip(h) for h in live)
    lab.exec(2, ["sh", "-c", f"echo two > {DISK_MOUNT}/mine"], check=True)
    assert lab.exec(2, ["cat", f"{DISK_MOUNT}/mine"]).stdout == "two\n"
    assert lab.exec(3, ["test", "-e", f"{DISK_MOUNT}/mine"]).returncode != 0
    assert not os.path.exists(f"{DISK_MOUNT}/mine")  # nor does this machine see it
    assert reaches(lab, 1, 3) and reaches(lab, 3, 2) and reaches(lab, None, 1)


def test_a_cut_host_reaches_nothing_and_nothing_reaches_it_until_healed(healed: Lab, servers: object) -> None:
    lab = healed
    lab.cut(2)
    assert not reaches(lab, 1, 2) and not reaches(lab, 2, 3) and not reaches(lab, None, 2)
    assert reaches(lab, 1, 3)
    assert len(labnet.pids_in(lab.spec.netns(2))) > 0  # its processes run on, unaware
    lab.heal()
    wait_until(lambda: reaches(lab, 1, 2) and reaches(lab, 2, 3) and reaches(lab, None, 2), 30, "the healed paths")


def test_partitions_and_oneway_cuts_block_exactly_the_paths_named(healed: Lab, servers: object) -> None:
    lab = healed
    lab.partition([1], [2, 3])
    assert not reaches(lab, 1, 2) and not reaches(lab, 3, 1)
    assert reaches(lab, 2, 3) and reaches(lab, None, 1) and reaches(lab, None, 3)
    assert lab.status()["hosts"][0]["unreachable"] == [lab.ip(2), lab.ip(3)]
    lab.heal()
    wait_until(lambda: reaches(lab, 1, 2) and reaches(lab, 3, 1), 30, "the healed paths")
    lab.oneway([1], [2])
    # Over TCP a one-way loss stalls connections both ways (the handshake's answer is lost).
    assert not reaches(lab, 1, 2) and not reaches(lab, 2, 1)
    assert reaches(lab, 1, 3) and reaches(lab, 2, 3)
    lab.heal()
    wait_until(lambda: reaches(lab, 2, 1), 30, "the healed path")


def _shaped(lab: Lab, host: int) -> tuple[int, int]:
    """(bytes sent, overlimits) of the qdisc on the host's eth0, from ``tc -s``."""
    out = lab.exec(host, ["tc", "-s", "qdisc", "show", "dev", "eth0"], check=True).stdout
    sent = int(out.split("Sent ", 1)[1].split()[0])
    over = int(out.split("overlimits ", 1)[1].split()[0])
    return sent, over


def test_a_bandwidth_limit_shapes_what_the_host_sends(healed: Lab, servers: object) -> None:
    lab = healed
    lab.limit(3, "20mbit")
    assert "tbf" in labnet.link_state(lab.spec, 3)["qdisc"]
    import urllib.request

    with urllib.request.urlopen(f"http://{lab.ip(3)}:{PORT}/blob", timeout=60) as r:
        assert len(r.read()) == 3_000_000
    sent, over = _shaped(lab, 3)
    assert sent >= 3_000_000 and over > 0  # the token bucket ran dry: the limit held the transfer back
    lab.unlimit(3)
    assert "tbf" not in labnet.link_state(lab.spec, 3)["qdisc"]


def test_added_latency_needs_netem_and_says_so_where_the_kernel_lacks_it(healed: Lab) -> None:
    lab = healed
    if lab.state.capabilities["netem"] == "yes":
        lab.limit(2, delay_ms=20)
        assert "netem" in labnet.link_state(lab.spec, 2)["qdisc"]
    else:
        with pytest.raises(LabUnsupportedError, match="no netem qdisc"):
            lab.limit(2, delay_ms=20)
        assert lab.state.limit_of(2) is None


def test_a_crashed_host_loses_its_processes_and_comes_back_with_its_disk(healed: Lab) -> None:
    lab = healed
    lab.wait_nodes(lab.spec.host_ids)
    lab.exec(2, ["sh", "-c", f"echo kept > {DISK_MOUNT}/marker"], check=True)
    before = {n.host: n.node_id for n in lab.ray_nodes() or [] if n.alive}
    assert lab.crash(2) > 0
    assert labnet.pids_in(lab.spec.netns(2)) == []
    lab.revive(2)
    after = {n.host: n.node_id for n in lab.ray_nodes() or [] if n.alive}
    assert after[2] != before[2]  # a new Ray node, at the same address, with the same label
    assert lab.exec(2, ["cat", f"{DISK_MOUNT}/marker"]).stdout == "kept\n"


def test_a_lab_left_behind_by_a_killed_up_is_cleaned_by_the_next_up_and_down_leaves_nothing() -> None:
    need_root()
    spec = LabSpec(name="zleft", hosts=1, subnet="10.213.251.0/24")
    up = subprocess.Popen([sys.executable, "-m", "zabray.cli.main", "lab", "up", "--name", "zleft", "--hosts", "1",
                           "--subnet", spec.subnet], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: labnet.pids_in(spec.netns(1)), 60, "the first lab's host to run something")
    finally:
        up.send_signal(signal.SIGKILL)
        up.wait()
    left = labnet.pids_in(spec.netns(1))
    with Lab.up(spec) as lab:
        assert not any(p in labnet.pids_in(spec.netns(1)) for p in left)
        assert lab.ray_nodes() is not None
    assert spec.netns(1) not in labnet.netns_list()
    assert spec.root_handle not in labnet.netns_list()
    assert not labnet.link_exists(spec.bridge) and not labnet.link_exists(spec.veth(1))
    assert not Path(spec.dir).exists() and not os.path.exists(spec.ray_temp(1))
    with pytest.raises(LabPermissionError.__mro__[1], match="no lab named 'zleft'"):
        Lab.down("zleft")
