"""Reconfiguration, differentially: the same reconfig requests through kazoo against a 3-server
Apache ZooKeeper 3.8 ensemble with ``reconfigEnabled=true`` (``standaloneEnabled=false``) and a
3-replica zabray ensemble with ``reconfig_enabled``, both with the superuser ``super:test``: the
same answers (errors by name), the same /zookeeper/config, the same Stat of it, and its watch
firing alike.

The clients use a follower (C) and the role changes and removals name the other follower (T):
changing the leader's role hands the leadership over, which ZooKeeper's servers answer by
dropping every client connection (the request's outcome unknown) while zabray's answer first;
both are ZooKeeper's contract, but not the same answer. What differs by nature is normalised
away: each server's sid and addresses become its part (L for the leader, C, T), and zxids (configuration versions, the Stat's zxids) their rank
among the zxids the run observed, as ``differential.py`` does: zabray's first configuration is a
txn of the ensemble's own (version 1:1) where ZooKeeper's is the first leader's NEWLEADER zxid
(1:0), and both are the lowest version seen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.states import ZnodeStat

from tests.polling import wait_until
from zabray.driver import apache_zk
from zabray.driver.ensemble import Ensemble
from zabray.protocol.membership import Member

pytestmark = [pytest.mark.zookeeper, pytest.mark.ray]

SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # super:test
OBSERVER = "server.100=0.0.0.0:1234:2345:observer;0.0.0.0:3456"  # nobody listens there: it never connects


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[apache_zk.ApacheZooKeeper]:
    if not apache_zk.available():
        pytest.fail("Apache ZooKeeper is not installed: bin/bootstrap installs Debian's zookeeper")
    root = Path(tmp_path_factory.mktemp("apache-reconfig"))
    with apache_zk.ApacheZooKeeper(root, servers=3, tick_ms=200, reconfig=True, super_digest=SUPER_DIGEST) as zk:
        yield zk


@pytest.fixture(scope="module")
def candidate(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    tmp = tmp_path_factory.mktemp("zabray-reconfig")
    ens = Ensemble.start(3, name=f"rdiff-{time.monotonic_ns() % 10**8}", data_dir=str(tmp / "data"),
                         run_dir=str(tmp / "run"), service="zookeeper", trace=False, reconfig_enabled=True,
                         zk_super_digest=SUPER_DIGEST)
    ens.wait_for_leader()
    yield ens
    ens.stop()


def _run(client_server: str, target: int) -> list[Any]:
    """The sequence, on clients of ``client_server``; each step's answer, unnormalised."""
    c = KazooClient(hosts=client_server, timeout=20)
    su = KazooClient(hosts=client_server, timeout=20, auth_data=[("digest", "super:test")])
    c.start(timeout=60)
    su.start(timeout=60)
    out: list[Any] = []
    fired = threading.Event()

    def step(f: Callable[[], Any]) -> Any:
        try:
            got = ("ok", f())
        except KazooException as e:
            got = ("error", type(e).__name__)
        out.append(got)
        return got

    try:
        _, (data, _) = step(lambda: c.get("/zookeeper/config", watch=lambda ev: fired.set()))
        lines = data.decode().splitlines()
        three = next(ln for ln in lines if ln.startswith(f"server.{target}="))
        step(lambda: c.reconfig(joining=OBSERVER, leaving=None, new_members=None))  # NoAuth
        step(lambda: su.reconfig(joining=OBSERVER, leaving=None, new_members=None))
        out.append(("watch fired", fired.wait(10)))
        _, (data, _) = step(lambda: (c.sync("/"), c.get("/zookeeper/config"))[1])
        version = int(data.decode().splitlines()[-1].split("=")[1], 16)
        step(lambda: su.reconfig(joining=None, leaving="100", new_members=None, from_config=version + 1))
        step(lambda: su.reconfig(joining=None, leaving="100", new_members=None, from_config=version))
        step(lambda: su.reconfig(joining="some thing", leaving=None, new_members=None))
        step(lambda: su.reconfig(joining=three.replace(":participant;", ":observer;"), leaving=None,
                                 new_members=None))
        step(lambda: su.reconfig(joining=three, leaving=None, new_members=None))
        step(lambda: su.reconfig(joining="server.8=127.0.0.1:1:2;3,server.9=127.0.0.1:4:5;6",
                                 leaving=str(target), new_members=None))  # 2 of 4 voters synced: no quorum
        step(lambda: su.reconfig(joining=None, leaving=str(target), new_members=None))
        step(lambda: (c.sync("/"), c.get("/zookeeper/config"))[1])
    finally:
        for k in (c, su):
            k.stop()
            k.close()
    return out


def _normalise(records: list[Any], initial: str, parts: dict[int, str]) -> list[Any]:
    """Servers 1-3 (sids and addresses) as their parts, zxids as their rank among those observed."""
    addr: dict[str, str] = {}
    for ln in initial.splitlines():
        if ln.startswith("server."):
            key, _, spec = ln.partition("=")
            sid = int(key.split(".")[1])
            m = Member.parse(sid, spec)
            addr[f"server.{sid}="] = f"server.{parts[sid]}="
            addr[f"{m.host}:{m.quorum_port}:{m.election_port}"] = f"ADDR-{parts[sid]}"
            addr[f"{m.client_host}:{m.client_port}"] = f"CLIENT-{parts[sid]}"
    zxids: set[int] = set()

    def text_of(data: bytes) -> list[str]:
        lines = data.decode().splitlines()
        for ln in lines:
            if ln.startswith("version="):
                zxids.add(int(ln.split("=")[1], 16))
        return lines

    def collect(x: Any) -> None:
        if isinstance(x, ZnodeStat):
            zxids.update((x.czxid, x.mzxid, x.pzxid))
        elif isinstance(x, bytes):
            text_of(x)
        elif isinstance(x, (list, tuple)):
            for y in x:
                collect(y)

    collect(records)
    rank = {z: i for i, z in enumerate(sorted(zxids))}

    def norm(x: Any) -> Any:
        if isinstance(x, ZnodeStat):
            return ("stat", rank[x.czxid], rank[x.mzxid], rank[x.pzxid], x.version, x.cversion, x.aversion,
                    x.ephemeralOwner, x.numChildren)
        if isinstance(x, bytes):
            out = []
            for ln in text_of(x):
                if ln.startswith("version="):
                    out.append(f"version=#{rank[int(ln.split('=')[1], 16)]}")
                    continue
                for a, token in addr.items():
                    ln = ln.replace(a, token)
                out.append(ln)
            return tuple(sorted(out))  # (by part, not by sid: the sids of the parts differ)
        if isinstance(x, (list, tuple)):
            return tuple(norm(y) for y in x)
        return x

    return [norm(r) for r in records]


def _parts(leader: int) -> dict[int, str]:
    c, t = sorted({1, 2, 3} - {leader})
    return {leader: "L", c: "C", t: "T"}


def test_the_same_reconfigurations_get_the_same_answers(oracle: apache_zk.ApacheZooKeeper,
                                                       candidate: Ensemble) -> None:
    zk_hosts = oracle.hosts.split(",")
    zk_parts = _parts(zk_hosts.index(oracle.host_in_mode("leader")) + 1)
    zb_hosts = candidate.connect_string().split(",")
    zb_parts = _parts(candidate.wait_for_leader())
    side = {part: sid for sid, part in zk_parts.items()}
    expected = _run(zk_hosts[side["C"] - 1], side["T"])
    side = {part: sid for sid, part in zb_parts.items()}
    got = _run(zb_hosts[side["C"] - 1], side["T"])
    want = _normalise(expected, expected[0][1][0].decode(), zk_parts)
    have = _normalise(got, got[0][1][0].decode(), zb_parts)
    for i, (w, h) in enumerate(zip(want, have, strict=True)):
        assert w == h, f"step {i}:\n  ZooKeeper: {w}\n  zabray:    {h}"
    # And it did something: the observer came and went, the configuration has servers 1 and 2 only.
    assert [r[0] for r in expected] == ["ok", "error", "ok", "watch fired", "ok", "error", "ok", "error", "ok",
                                        "ok", "error", "ok", "ok"]
    final = want[-1][1][0]
    assert [ln.split("=")[0] for ln in final] == ["server.C", "server.L", "version"]


def _zkcli_facts(hosts: str) -> tuple[tuple[Any, ...], str]:
    """zkCli's own reconfig and config commands, and what they print (by structure); and the
    whole of what it printed, to show when the structures differ."""
    from tests.zkcompat.clients import zkcli

    out = zkcli(hosts, "config", f"reconfig -add {OBSERVER}", "addauth digest super:test",
                f"reconfig -add {OBSERVER}", "config -c", "reconfig -remove 100 -v 1", "reconfig -remove 100",
                "config")
    blocks = out.split("version=")
    return (
        "Insufficient permission" in out or "KeeperErrorCode = NoAuth" in out,  # before addauth
        out.count(OBSERVER),  # in the answer to the add (zkCli prints the new configuration)
        "version No is not valid" in out,  # zkCli's words for BadVersion
        len(blocks) - 1,  # configurations printed: config, add, remove, config
        sum(1 for ln in out.splitlines() if ln.count(":") >= 3 and " " in ln and ln.split()[0].isalnum()
            and all(c in "0123456789abcdef" for c in ln.split()[0])),  # config -c: "<hex> host:port,..."
    ), out


def test_zkcli_reconfig_and_config_print_alike(oracle: apache_zk.ApacheZooKeeper, candidate: Ensemble) -> None:
    expected, printed = _zkcli_facts(oracle.hosts)
    assert expected == (True, 1, True, 4, 1), printed  # (what ZooKeeper's zkCli shows, pinned)
    # The test above removed a replica: as an operator would, wait until it has stopped, so that
    # zkCli does not pick it from the connect string while it stops (its requests would see a
    # ConnectionLoss, as they would on a ZooKeeper server being removed).
    wait_until(lambda: all(s.sid in (*s.voters, *s.observers) for s in candidate.status()), 60,
               "the replica the reconfiguration removed to stop")
    got, printed = _zkcli_facts(candidate.connect_string())
    assert got == expected, printed
