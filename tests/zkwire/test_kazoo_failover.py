"""A kazoo session across the kill of its replica and of the leader: the same session id, its
ephemerals kept, its watches still firing after each move (kazoo's DataWatch and ChildrenWatch
re-arm themselves; kazoo 2.11 sends no SetWatches); a container emptied after the leader changed
is swept by the new leader. Destructive: its own ensemble."""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NoAuthError
from kazoo.protocol.states import EventType, WatchedEvent
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry
from kazoo.security import make_digest_acl

from tests.zkwire import raw
from tests.zkwire.conftest import ZK_OVERRIDES, DyingClient, KazooFactory, wait_until
from zabray.driver.ensemble import Ensemble
from zabray.wire import zkproto as zp

pytestmark = pytest.mark.ray
log = logging.getLogger(__name__)


def replica_of(ens: Ensemble, c: KazooClient) -> int | None:
    """The replica ``c`` is connected to now (None while it is not connected)."""
    sock = c._connection._socket
    if not c.connected or sock is None:
        return None
    try:
        port = sock.getpeername()[1]
    except OSError:
        return None
    return next((s.sid for s in ens.status() if s.zk_client and s.zk_client[1] == port and s.alive), None)


def hosts_in_order(ens: Ensemble, sids: list[int]) -> str:
    by_sid = {s.sid: s.zk_client for s in ens.status()}
    return ",".join(f"{by_sid[s][0]}:{by_sid[s][1]}" for s in sids if by_sid.get(s))


def test_session_survives_kill_of_its_replica_and_of_the_leader(
        start: Callable[..., Ensemble], kazoo: KazooFactory) -> None:
    ens = start(3, **ZK_OVERRIDES)
    leader = ens.wait_for_leader()
    f, other = [s.sid for s in ens.status() if s.sid != leader]
    # Tried in this order: the follower f first, then the leader.
    c = kazoo(ens, timeout=30.0, hosts=hosts_in_order(ens, [f, leader, other]), randomize_hosts=False,
              auth_data=[("digest", "ops:pw")])
    writer = kazoo(ens, timeout=30.0, hosts=hosts_in_order(ens, [other]))
    wait_until(lambda: replica_of(ens, c) == f, what=f"the client on replica {f}")
    session = c.client_id
    c.create("/guarded", b"", acl=[make_digest_acl("ops", "pw", all=True)])
    c.create("/p", b"0")
    eph = c.create("/p/e-", b"", ephemeral=True, sequence=True)
    # kazoo 2.11 sends no SetWatches: on a lost connection it fires its one-shot watches with
    # EventType.NONE and its watch recipes re-arm on reconnection. So these carry watches across.
    datas: queue.Queue[bytes | None] = queue.Queue()
    kids: queue.Queue[list[str]] = queue.Queue()
    DataWatch(c, "/p", lambda data, stat: datas.put(data))
    ChildrenWatch(c, "/p", lambda children: kids.put(sorted(children)))

    def seen(q: queue.Queue[Any], value: object) -> None:
        while q.get(timeout=60) != value:
            pass  # a re-armed recipe first reports the value it finds again

    seen(datas, b"0")
    seen(kids, [eph[3:]])

    def moved_away_from(sid: int) -> int:
        on: list[int | None] = [None]

        def moved() -> bool:
            on[0] = replica_of(ens, c)  # (it may hop again while an election settles)
            return on[0] not in (None, sid)

        wait_until(moved, timeout=120, what=f"the kazoo client to move off replica {sid}")
        assert on[0] is not None
        return on[0]

    # 1. The client's own replica (a follower) dies.
    ens.kill(f)
    now_on = moved_away_from(f)
    assert c.client_id == session
    assert c.exists(eph) is not None
    writer.set("/p", b"1")
    seen(datas, b"1")
    c.set("/guarded", b"1")  # kazoo sent its digest auth again to its new replica
    with pytest.raises(NoAuthError):
        writer.set("/guarded", b"x")

    # 2. f is back; the leader, which the client is on now, dies.
    ens.restart(f)
    wait_until(lambda: any(s.sid == f and s.alive and s.state == "FOLLOWING" for s in ens.status()),
               timeout=120, what=f"replica {f} to follow again")
    assert now_on == leader, "kazoo tries its hosts in order: it should have moved to the leader"
    raw.create(c, "/box", zp.CreateMode.CONTAINER)
    c.create("/box/only")
    later: queue.Queue[WatchedEvent] = queue.Queue()
    c.exists("/later", watch=later.put)
    # A flood of creates in flight when the leader dies: each either acknowledged (and kept) or
    # failed with ConnectionLoss; of the ones lost with the connection, those that took effect
    # are the earliest (a session's writes apply in order, none after one that did not).
    c.create("/flood")
    # And a client that dies just before the leader: the new leader must expire its session.
    with DyingClient(hosts_in_order(ens, [f, other]), "/orphan") as dying:
        writer.sync("/orphan")  # another client's write: sync before reading it elsewhere
        assert writer.exists("/orphan").ephemeralOwner == dying.session
    flood = [c.create_async(f"/flood/n{i:04d}") for i in range(300)]
    ens.kill(leader)
    moved_away_from(leader)
    outcome = []
    for r in flood:
        try:
            r.get(timeout=60)
            outcome.append("ok")
        except ConnectionLoss:
            outcome.append("lost")
    kept = set(writer.get_children("/flood"))
    log.info("flood across the leader kill: %d acknowledged, %d lost, %d kept", outcome.count("ok"),
             outcome.count("lost"), len(kept))
    assert all(f"n{i:04d}" in kept for i, o in enumerate(outcome) if o == "ok")
    lost = [i for i, o in enumerate(outcome) if o == "lost"]
    if lost:
        assert lost == list(range(lost[0], lost[-1] + 1)), "the lost requests were those in flight, in a row"
        took = [f"n{i:04d}" in kept for i in lost]
        assert took == sorted(took, reverse=True), f"a later write took effect without an earlier one: {took}"
    assert later.get(timeout=60).type == EventType.NONE  # kazoo's word for "connection lost"
    new_leader = ens.wait_for_leader(timeout=120)
    assert new_leader != leader
    assert c.client_id == session
    assert writer.exists(eph) is not None and c.exists(eph) is not None
    c.exists("/later", watch=later.put)  # armed again after the move, on the new replica
    writer.create("/later")
    writer.set("/p", b"2")
    writer.create("/p/k")
    seen(datas, b"2")
    c.set("/guarded", b"2")
    seen(kids, sorted([eph[3:], "k"]))
    ev = later.get(timeout=60)
    assert (ev.type, ev.path) == (EventType.CREATED, "/later")

    wait_until(lambda: writer.exists("/orphan") is None, timeout=60,
               what="the new leader to expire the dead client's session")

    # The new leader sweeps a container emptied after it took over.
    c.delete("/box/only")
    wait_until(lambda: writer.exists("/box") is None, timeout=60, what="the new leader to sweep the container")
    # And the session still ends as a session should: its ephemeral goes when it closes.
    c.stop()
    wait_until(lambda: writer.exists(eph) is None, timeout=60, what="the ephemeral to go with its session")


def test_a_rolling_restart_keeps_every_replica_where_clients_dial_it(
        start: Callable[..., Ensemble], kazoo: KazooFactory) -> None:
    """An operator restarts each replica in turn. Clients keep the connect string they were
    given at the start, as ZooKeeper's clients do, so each replica must listen where it did
    (the config's ports are 0: picked at the first start, then kept)."""
    ens = start(3, **ZK_OVERRIDES)
    ens.wait_for_leader()
    hosts = ens.connect_string()
    before = {s.sid: (s.zk_client, s.client) for s in ens.status()}
    c = kazoo(ens, timeout=30.0, hosts=hosts)
    session = c.client_id
    c.create("/r", b"-")
    for sid in sorted(before):
        ens.kill(sid)
        ens.restart(sid)
        wait_until(lambda: all(s.alive and s.state in ("LEADING", "FOLLOWING") for s in ens.status()),
                   timeout=120, what=f"every replica in broadcast after replica {sid}'s restart")
        # kazoo reconnects within the session, if the replicas are where its hosts say
        KazooRetry(max_tries=-1, deadline=60)(c.set, "/r", str(sid).encode())
    assert {s.sid: (s.zk_client, s.client) for s in ens.status()} == before
    assert ens.connect_string() == hosts
    assert c.client_id == session
    for zk_addr, _ in before.values():  # each replica alone, at its first address
        assert zk_addr is not None
        one = kazoo(ens, hosts=f"{zk_addr[0]}:{zk_addr[1]}")
        one.sync("/r")
        assert one.get("/r")[0] == str(max(before)).encode()
