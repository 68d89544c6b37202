"""The four-letter words, side by side: a 3-server Apache ZooKeeper 3.8 (the oracle) and a
3-replica zabray ensemble get the same kazoo session (on the leader: a data watch, a child
watch, an ephemeral), then every word is asked of the leader and of a follower of each. The
answers must have ZooKeeper's lines in ZooKeeper's order, ZooKeeper's keys, and the same values
wherever the two can agree (the session's watches and ephemerals, its negotiated timeout and
last operation, the machine's own facts in ``envi``); counters, latencies, ports and times are
compared by their form only.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from zabray.driver import apache_zk
from zabray.driver.ensemble import Ensemble
from zabray.wire import four_letter

pytestmark = [pytest.mark.zookeeper, pytest.mark.ray]

WORDS = ("ruok", "isro", "srvr", "stat", "cons", "conf", "envi", "mntr", "wchs", "wchc", "wchp", "dump", "dirs")
_CONN = re.compile(r"^ /127\.0\.0\.1:\d+\[[01]\]\(queued=\d+,recved=\d+,sent=\d+(,sid=0x[0-9a-f]+,lop=[A-Z]+,est=\d+,"
                   r"to=\d+(,lcxid=0x[0-9a-f]+)?,lzxid=0x[0-9a-f]+,lresp=\d+,llat=\d+,minlat=\d+,avglat=\d+,"
                   r"maxlat=\d+)?\)$")


class Side:
    """One system's answers: ``words[role][word]``, and the session id of the test's client."""

    def __init__(self, leader: tuple[str, int], follower: tuple[str, int]) -> None:
        self.addr = {"leader": leader, "follower": follower}
        self.words: dict[str, dict[str, str]] = {}
        self.session = 0

    def ask(self) -> None:
        for role, (host, port) in self.addr.items():
            self.words[role] = {w: apache_zk.four_letter(host, port, w, timeout=10.0) for w in WORDS}


def _use(host: str, port: int) -> tuple[KazooClient, int]:
    c = KazooClient(hosts=f"{host}:{port}", timeout=10.0)
    c.start(timeout=60)
    c.create("/w", b"x")
    c.get("/w", watch=lambda e: None)
    c.get_children("/", watch=lambda e: None)  # fired by the next create: not in wchs afterwards
    c.create("/e", b"", ephemeral=True)
    c.exists("/nope", watch=lambda e: None)  # a data watch on a missing node
    return c, c.client_id[0]


@pytest.fixture(scope="module")
def sides(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    root = Path(tmp_path_factory.mktemp("4lw"))
    zk = apache_zk.ApacheZooKeeper(root / "apache", servers=3, jvm_flags=("-Dreadonlymode.enabled=true",))
    ens = Ensemble.start(3, name=f"4lw-{os.getpid()}-{time.monotonic_ns() % 10**8}", data_dir=str(root / "data"),
                         run_dir=str(root / "run"), service="zookeeper", trace=False, zk_four_letter_words="*",
                         zk_min_session_timeout_ms=4000, zk_max_session_timeout_ms=40000)
    clients: list[KazooClient] = []
    try:
        zk.start()
        lead = zk.host_in_mode("leader").split(":")
        follow = zk.host_in_mode("follower").split(":")
        apache = Side((lead[0], int(lead[1])), (follow[0], int(follow[1])))
        leader = ens.wait_for_leader()
        addrs = {s.sid: s.zk_client for s in ens.status()}
        ours = Side(addrs[leader], next(a for s, a in sorted(addrs.items()) if s != leader))  # type: ignore[arg-type]
        for side in (apache, ours):
            c, side.session = _use(*side.addr["leader"])
            clients.append(c)
            side.ask()
        yield apache, ours
    finally:
        for c in clients:
            c.stop()
            c.close()
        zk.stop()
        ens.stop()


def _labels(text: str) -> list[str]:
    """Each line's label: what comes before ': ', '=' or a tab (the whole line otherwise)."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^([^=\t:]*?)(: |=|\t|:$)", line)
        out.append(m[1] if m else line)
    return out


def _by_session(text: str, session: int) -> str:
    return text.replace(f"0x{session:x}", "0xSESSION")


def _groups(text: str) -> dict[str, list[str]]:
    """wchc/wchp: each heading and its tab-indented lines, sorted (ZooKeeper's come from hash sets)."""
    out: dict[str, list[str]] = {}
    head = ""
    for line in text.splitlines():
        if line.startswith("\t"):
            out[head].append(line)
        elif line:
            head = line
            out[head] = []
    return {h: sorted(v) for h, v in out.items()}


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_fixed_answers_and_line_layouts_match(sides: tuple[Side, Side], role: str) -> None:
    apache, ours = (s.words[role] for s in sides)
    assert ours["ruok"] == apache["ruok"] == "imok"
    assert ours["isro"] == apache["isro"] == "rw"
    for w in ("srvr", "stat"):
        # the same lines in the same order (a leader's last one: its proposal sizes); the
        # connection lines of stat are checked below
        assert ([x for x in _labels(ours[w]) if not x.startswith(" /")]
                == [x for x in _labels(apache[w]) if not x.startswith(" /")]), (w, ours[w], apache[w])
        assert re.search(rf"^Mode: {role}$", ours[w], re.M), ours[w]
        assert ours[w].endswith("\n") and apache[w].endswith("\n")
    assert [ln for ln in _labels(ours["dirs"])] == _labels(apache["dirs"])
    # every connection line in stat and cons has ZooKeeper's form
    for text in (ours["stat"], ours["cons"], apache["stat"], apache["cons"]):
        for line in text.splitlines():
            if line.startswith(" /"):
                assert _CONN.match(line), line


def test_the_sessions_connection_in_cons_matches(sides: tuple[Side, Side]) -> None:
    def session_line(side: Side) -> dict[str, str]:
        line = next(ln for ln in side.words["leader"]["cons"].splitlines() if f"sid=0x{side.session:x}" in ln)
        return dict(kv.split("=") for kv in line.split("(", 1)[1].rstrip(")").split(","))

    a, z = session_line(sides[0]), session_line(sides[1])
    assert list(a) == list(z)
    for key in ("lop", "to", "lcxid", "queued"):
        assert a[key] == z[key], (key, a, z)


def test_envi_lists_zookeepers_lines_first_in_its_order(sides: tuple[Side, Side]) -> None:
    a = [ln.split("=", 1) for ln in sides[0].words["leader"]["envi"].splitlines()[1:]]
    z = [ln.split("=", 1) for ln in sides[1].words["leader"]["envi"].splitlines()[1:]]
    assert sides[1].words["leader"]["envi"].splitlines()[0] == "Environment:"
    assert [k for k, _ in z[: len(a)]] == [k for k, _ in a]
    av, zv = dict(a), dict(z)
    for k in ("host.name", "os.name", "os.arch", "os.version", "user.name", "user.home"):  # the same machine
        assert zv[k] == av[k], k
    assert all(zv[k] == "<NA>" for k in zv if k.startswith("java."))
    assert re.match(r"\d+MB$", zv["os.memory.total"]) and re.match(r"\d+MB$", zv["os.memory.max"])
    # kazoo reads the version from here; it must parse as the oracle's does
    assert zv["zookeeper.version"].split("-")[0] == av["zookeeper.version"].split("-")[0] == four_letter.ZK_VERSION


def test_conf_has_zookeepers_keys_in_order_and_the_membership(sides: tuple[Side, Side]) -> None:
    for role in ("leader", "follower"):
        a = sides[0].words[role]["conf"].splitlines()
        z = sides[1].words[role]["conf"].splitlines()
        zk_keys = [ln.split("=")[0] for ln in z if not ln.startswith("zabray.")]
        assert zk_keys == [ln.split("=")[0] for ln in a], (z, a)
        for lines in (a, z):
            servers = [ln for ln in lines if ln.startswith("server.")]
            assert len(servers) == 3 and all(re.match(r"server\.\d=[\w.]+:\d+:\d+:participant$", s) for s in servers)
            assert lines[-1] == "version=0"
        assert not any(re.search("secret|digest|password|jaas", ln, re.I) for ln in z)


def test_mntr_names_zookeepers_keys(sides: tuple[Side, Side]) -> None:
    for role in ("leader", "follower"):
        a = dict(ln.split("\t", 1) for ln in sides[0].words[role]["mntr"].splitlines())
        z = dict(ln.split("\t", 1) for ln in sides[1].words[role]["mntr"].splitlines())
        assert list(z)[:2] == list(a)[:2] == ["zk_version", "zk_server_state"]
        assert set(z) <= set(a), f"keys ZooKeeper does not have: {sorted(set(z) - set(a))}"
        for k in ("zk_server_state", "zk_peer_state", "zk_ephemerals_count", "zk_global_sessions",
                  "zk_local_sessions", "zk_quorum_size"):
            assert z[k] == a[k], (role, k, z[k], a[k])
        if role == "leader":
            for k in ("zk_learners", "zk_synced_followers", "zk_synced_observers", "zk_pending_syncs"):
                assert z[k] == a[k], (k, z[k], a[k])
        # the data and child watches of the session live on the leader
        assert z["zk_watch_count"] == a["zk_watch_count"], (role, z["zk_watch_count"], a["zk_watch_count"])


def test_watch_words_and_dump_agree_once_session_ids_are_named(sides: tuple[Side, Side]) -> None:
    a, z = sides
    for role in ("leader", "follower"):
        assert z.words[role]["wchs"] == a.words[role]["wchs"], (role, z.words[role]["wchs"], a.words[role]["wchs"])
        for w in ("wchc", "wchp"):
            za, aa = (_by_session(side.words[role][w], side.session) for side in (z, a))
            assert _groups(za) == _groups(aa) and za.endswith("\n\n") == aa.endswith("\n\n"), (role, w, za, aa)
    dates = re.compile(r"expire at .*:$", re.M)
    for role in ("leader", "follower"):
        za = dates.sub("expire at DATE:", _by_session(z.words[role]["dump"], z.session))
        aa = dates.sub("expire at DATE:", _by_session(a.words[role]["dump"], a.session))
        # ZooKeeper's NIO connection sets (per-connection idle deadlines) have no counterpart
        aa = aa.split("Connections dump:")[0] + "Connections dump:\n"
        assert za == aa, (role, za, aa)
