"""Watches of every kind through kazoo on a real 3-replica ensemble, and ephemerals that go with
their session: on close, and on expiry when the client dies without closing."""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest
from kazoo.protocol.states import EventType, WatchedEvent
from kazoo.recipe.cache import TreeCache
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from tests.zkwire import raw
from tests.zkwire.conftest import DyingClient, KazooFactory, wait_until
from zabray.driver.ensemble import Ensemble
from zabray.wire import zkproto as zp

pytestmark = pytest.mark.ray
OBSERVERS = 1  # the shared ensemble: 3 voters and an observer


class Events:
    """A kazoo watch callback that queues what it gets."""

    def __init__(self) -> None:
        self.q: queue.Queue[WatchedEvent] = queue.Queue()

    def __call__(self, ev: WatchedEvent) -> None:
        self.q.put(ev)

    def next(self, timeout: float = 30) -> tuple[str, str]:
        ev = self.q.get(timeout=timeout)
        return ev.type, ev.path

    def pending(self) -> int:
        return self.q.qsize()


def test_one_shot_data_child_and_exists_watches(zk: Ensemble, kazoo: KazooFactory) -> None:
    c, other = kazoo(zk), kazoo(zk)
    c.create("/w", b"0")
    data, child, exist, fence = Events(), Events(), Events(), Events()
    c.get("/w", watch=data)
    c.get_children("/w", watch=child)
    assert c.exists("/w/new", watch=exist) is None  # a watch on a missing node

    other.set("/w", b"1")
    assert data.next() == (EventType.CHANGED, "/w")
    other.create("/w/new", b"")
    assert child.next() == (EventType.CHILD, "/w")
    assert exist.next() == (EventType.CREATED, "/w/new")

    # One-shot: further changes fire nothing. A fresh watch fired after them proves any event
    # they caused would already have arrived (a connection's events come in order).
    other.set("/w", b"2")
    other.create("/w/more", b"")
    other.set("/w/new", b"x")
    c.exists("/w/fence", watch=fence)
    other.create("/w/fence")
    assert fence.next() == (EventType.CREATED, "/w/fence")
    assert data.pending() == child.pending() == exist.pending() == 0


def test_data_and_child_watch_both_fire_on_delete(zk: Ensemble, kazoo: KazooFactory) -> None:
    c, other = kazoo(zk), kazoo(zk)
    c.create("/gone", b"")
    data, child = Events(), Events()
    c.get("/gone", watch=data)
    c.get_children("/gone", watch=child)
    other.delete("/gone")
    assert data.next() == (EventType.DELETED, "/gone")
    assert child.next() == (EventType.DELETED, "/gone")


def test_persistent_and_recursive_watches(zk: Ensemble, kazoo: KazooFactory) -> None:
    c, other = kazoo(zk), kazoo(zk)
    c.create("/pw/a", b"", makepath=True)
    c.create("/rw/a", b"", makepath=True)
    log = raw.EventLog(c)
    raw.call(c, zp.OpCode.ADD_WATCH, zp.PathTypeRequest("/pw", zp.AddWatchMode.PERSISTENT))
    raw.call(c, zp.OpCode.ADD_WATCH, zp.PathTypeRequest("/rw", zp.AddWatchMode.PERSISTENT_RECURSIVE))

    other.set("/pw", b"1")
    other.set("/pw", b"2")  # persistent: fires again
    other.create("/pw/b")
    other.set("/pw/a", b"x")  # a child's data: not the persistent watch's business
    other.create("/pw/a/deep")  # a grandchild: neither
    other.create("/rw/a/deep")
    other.set("/rw/a/deep", b"x")
    other.delete("/rw/a/deep")
    other.set("/rw", b"r")
    got = log.wait_for(7)
    assert got == [("NODE_DATA_CHANGED", "/pw"), ("NODE_DATA_CHANGED", "/pw"), ("NODE_CHILDREN_CHANGED", "/pw"),
                   ("NODE_CREATED", "/rw/a/deep"), ("NODE_DATA_CHANGED", "/rw/a/deep"),
                   ("NODE_DELETED", "/rw/a/deep"), ("NODE_DATA_CHANGED", "/rw")]

    # The watched node itself goes and comes back: the persistent watch stays. A one-shot data
    # watch on the same path is fired by the same event, sent once.
    other.delete("/pw/b")
    other.delete("/pw", recursive=True)
    other.create("/pw")
    one_shot: queue.Queue[WatchedEvent] = queue.Queue()
    c.get("/pw", watch=one_shot.put)
    other.set("/pw", b"both")
    assert log.wait_for(12)[7:] == [("NODE_CHILDREN_CHANGED", "/pw"), ("NODE_CHILDREN_CHANGED", "/pw"),
                                    ("NODE_DELETED", "/pw"), ("NODE_CREATED", "/pw"), ("NODE_DATA_CHANGED", "/pw")]
    assert one_shot.get(timeout=30).type == EventType.CHANGED

    # checkWatches / removeWatches (type ANY = 3): removed, nothing more fires.
    raw.call(c, zp.OpCode.CHECK_WATCHES, zp.PathTypeRequest("/pw", 3))
    raw.call(c, zp.OpCode.REMOVE_WATCHES, zp.PathTypeRequest("/pw", 3))
    from kazoo.exceptions import NoWatcherError
    with pytest.raises(NoWatcherError):
        raw.call(c, zp.OpCode.CHECK_WATCHES, zp.PathTypeRequest("/pw", 3))
    other.set("/pw", b"3")
    other.set("/rw/a", b"fence")
    assert log.wait_for(13)[12:] == [("NODE_DATA_CHANGED", "/rw/a")]


def test_datawatch_and_childrenwatch_recipes(zk: Ensemble, kazoo: KazooFactory) -> None:
    c, other = kazoo(zk), kazoo(zk)
    c.create("/rcp", b"v0")
    datas: queue.Queue[Any] = queue.Queue()
    kids: queue.Queue[list[str]] = queue.Queue()
    DataWatch(c, "/rcp", lambda data, stat: datas.put((data, stat.version if stat else None)))
    ChildrenWatch(c, "/rcp", lambda children: kids.put(sorted(children)))
    assert datas.get(timeout=30) == (b"v0", 0) and kids.get(timeout=30) == []
    other.set("/rcp", b"v1")
    assert datas.get(timeout=30) == (b"v1", 1)
    other.create("/rcp/x")
    assert kids.get(timeout=30) == ["x"]
    other.create("/rcp/y")
    assert kids.get(timeout=30) == ["x", "y"]
    other.delete("/rcp", recursive=True)
    assert datas.get(timeout=30) == (None, None)


def test_ephemerals_go_with_a_closed_session(zk: Ensemble, kazoo: KazooFactory) -> None:
    owner, watcher = kazoo(zk), kazoo(zk)
    watcher.ensure_path("/eph")
    owner.create("/eph/mine", b"", ephemeral=True)
    seq = owner.create("/eph/s-", b"", ephemeral=True, sequence=True)
    gone = Events()
    assert watcher.exists("/eph/mine", watch=gone) is not None
    owner.stop()
    assert gone.next() == (EventType.DELETED, "/eph/mine")
    assert watcher.get_children("/eph") == [] and watcher.exists(seq) is None


def test_ephemerals_go_when_a_dead_clients_session_expires(zk: Ensemble, kazoo: KazooFactory) -> None:
    watcher = kazoo(zk)
    with DyingClient(zk.connect_string(), "/exp/owned") as dying:
        watcher.sync("/exp/owned")  # another client's write: sync before reading it elsewhere
        st = watcher.exists("/exp/owned")
        assert st is not None and st.ephemeralOwner == dying.session
        gone = Events()
        watcher.exists("/exp/owned", watch=gone)
    assert gone.next(timeout=60) == (EventType.DELETED, "/exp/owned")
    wait_until(lambda: watcher.exists("/exp/owned") is None, what="the expired session's ephemeral to go")
    # Resuming the expired session (right password): told it expired, kazoo makes a new one.
    late = kazoo(zk, client_id=(dying.session, dying.password))
    assert late.client_id[0] != dying.session


def test_kazoo_on_an_observer(zk: Ensemble, kazoo: KazooFactory) -> None:
    obs = next(s for s in zk.status() if s.observer)
    assert obs.zk_client is not None
    c = kazoo(zk, hosts=f"{obs.zk_client[0]}:{obs.zk_client[1]}")
    other = kazoo(zk)
    st = c.create("/obs", b"o", ephemeral=True, include_data=True)[1]
    assert st.ephemeralOwner == c.client_id[0]
    changed = Events()
    c.get("/obs", watch=changed)
    other.set("/obs", b"p")
    assert changed.next() == (EventType.CHANGED, "/obs")
    assert c.get("/obs")[0] == b"p"
    assert "Mode: observer" in c.command(b"srvr")


def test_a_short_idle_session_on_a_follower_stays_alive(zk: Ensemble, kazoo: KazooFactory) -> None:
    # Its pings reach a follower only; the follower must tell the leader, or the leader expires it.
    leader = zk.wait_for_leader()
    follower = next(s for s in zk.status() if s.sid != leader and not s.observer)
    assert follower.zk_client is not None
    states: list[str] = []
    idle = kazoo(zk, timeout=2.0, hosts=f"{follower.zk_client[0]}:{follower.zk_client[1]}")
    idle.add_listener(states.append)
    session = idle.client_id
    eph = idle.create("/idle", b"", ephemeral=True)
    busy = kazoo(zk)
    until = time.monotonic() + 3 * idle._session_timeout / 1000
    i = 0
    while time.monotonic() < until:  # three session timeouts of other work, the idle one only pinging
        i += 1
        busy.set("/", str(i).encode())
    assert "LOST" not in states and idle.client_id == session
    assert busy.exists(eph) is not None


def test_treecache_mirrors_a_changing_tree(zk: Ensemble, kazoo: KazooFactory) -> None:
    # kazoo's TreeCache keeps a copy of a subtree from data, child and exists watches alone.
    c, other = kazoo(zk), kazoo(zk)
    c.create("/tc/keep", b"k", makepath=True)
    cache = TreeCache(c, "/tc")
    faults: list[Exception] = []
    cache.listen_fault(faults.append)
    cache.start()
    try:
        for i in range(20):
            other.create(f"/tc/n{i}", str(i).encode())
            other.create(f"/tc/n{i}/kid", b"")
        for i in range(0, 20, 2):
            other.set(f"/tc/n{i}", b"even")
        for i in range(0, 20, 3):
            other.delete(f"/tc/n{i}", recursive=True)

        def mirror(path: str) -> dict[str, bytes]:
            got = cache.get_data(path)
            if got is None:
                return {}
            out = {path: got.data}
            for kid in cache.get_children(path) or ():
                out.update(mirror(f"{path}/{kid}"))
            return out

        def actual(path: str) -> dict[str, bytes]:
            out = {path: other.get(path)[0]}
            for kid in other.get_children(path):
                out.update(actual(f"{path}/{kid}"))
            return out

        truth = actual("/tc")
        assert len(truth) == 1 + 1 + 2 * 13
        wait_until(lambda: mirror("/tc") == truth, what="the TreeCache to mirror /tc")
        assert not faults
    finally:
        cache.close()


def test_set_watches_fires_what_the_client_missed(zk: Ensemble, kazoo: KazooFactory) -> None:
    # What a moving ZooKeeper client sends after reconnecting (kazoo 2.11 never does: sent raw).
    c, other = kazoo(zk), kazoo(zk)
    for p in ("/sw/data", "/sw/gone", "/sw/kids", "/sw/quiet"):
        c.create(p, b"", makepath=True)
    seen = c.last_zxid
    other.set("/sw/data", b"x")
    other.delete("/sw/gone")
    other.create("/sw/born")
    other.create("/sw/kids/k")
    log = raw.EventLog(c)
    raw.call(c, zp.OpCode.SET_WATCHES, zp.SetWatches(
        seen, ("/sw/data", "/sw/gone", "/sw/quiet"), ("/sw/born", "/sw/unborn"), ("/sw/kids", "/sw/quiet")))
    assert sorted(log.wait_for(4)) == [("NODE_CHILDREN_CHANGED", "/sw/kids"), ("NODE_CREATED", "/sw/born"),
                                       ("NODE_DATA_CHANGED", "/sw/data"), ("NODE_DELETED", "/sw/gone")]
    # The watches on what did not change were set, and fire later, once.
    other.create("/sw/quiet/k")
    other.create("/sw/unborn")
    other.set("/sw/quiet", b"q")
    assert sorted(log.wait_for(7)[4:]) == [("NODE_CHILDREN_CHANGED", "/sw/quiet"), ("NODE_CREATED", "/sw/unborn"),
                                           ("NODE_DATA_CHANGED", "/sw/quiet")]
