"""Every ZooKeeper call kazoo makes, and the 3.8 calls it has no method for (sent through its
own connection, tests/zkwire/raw.py), against a real 3-replica ensemble: answers, Stat fields,
errors as kazoo's exceptions, ACLs and digest auth."""

from __future__ import annotations

import re

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    BadArgumentsError,
    BadVersionError,
    ConnectionLoss,
    InvalidACLError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    ReconfigDisabledError,
)
from kazoo.security import ACL, Id, make_digest_acl, make_digest_acl_credential

from tests.wire.rawclient import RawClient
from tests.zkwire import raw
from tests.zkwire.conftest import KazooFactory, wait_until
from zabray.driver.ensemble import Ensemble
from zabray.wire import zkproto as zp

pytestmark = pytest.mark.ray


def test_create_every_mode_and_read_back(zk: Ensemble, kazoo: KazooFactory) -> None:
    c = kazoo(zk)
    assert c.create("/c", b"root") == "/c"
    with pytest.raises(NodeExistsError):
        c.create("/c")
    with pytest.raises(NoNodeError):
        c.create("/c/missing/child")
    assert c.create("/c/deep/er/node", b"x", makepath=True) == "/c/deep/er/node"
    c.ensure_path("/c/ensured/path")
    assert c.exists("/c/ensured/path") is not None

    path, st = c.create("/c/p2", b"hello", include_data=True)
    assert path == "/c/p2" and st.version == 0 and st.dataLength == 5 and st.numChildren == 0
    assert st.czxid == st.mzxid == st.pzxid and st.czxid > 0 and st.ephemeralOwner == 0
    data, gst = c.get("/c/p2")
    assert data == b"hello" and gst == st

    eph, est = c.create("/c/eph", ephemeral=True, include_data=True)
    assert est.ephemeralOwner == c.client_id[0]
    with pytest.raises(NoChildrenForEphemeralsError):
        c.create("/c/eph/kid")
    with pytest.raises(InvalidACLError):
        c.create("/c/bad-acl", acl=[ACL(31, Id("digest", "no-colon"))])
    with pytest.raises(InvalidACLError):  # (kazoo's create turns an empty ACL into its default)
        c.set_acls("/c", [])

    seqs = [c.create("/c/s-", sequence=True) for _ in range(3)]
    eseq = c.create("/c/e-", ephemeral=True, sequence=True)
    # The suffix is the parent's cversion when created, ten digits.
    base = int(seqs[0][-10:])
    assert [int(s[-10:]) for s in seqs] == [base, base + 1, base + 2] and all(len(s) == len("/c/s-") + 10 for s in seqs)
    assert int(eseq[-10:]) == base + 3
    kids, pst = c.get_children("/c", include_data=True)
    assert sorted(kids) == sorted(["deep", "ensured", "p2", "eph", eseq[3:], *[s[3:] for s in seqs]])
    assert pst.numChildren == len(kids)

    # createContainer and createTTL (kazoo has no method for them): Create2 answers with Stat.
    cont = raw.create(c, "/c/box", zp.CreateMode.CONTAINER, b"b")
    assert cont.path == "/c/box" and cont.stat.ephemeralOwner == 0
    ttl = raw.create(c, "/c/ttl", zp.CreateMode.PERSISTENT_WITH_TTL, b"t", ttl=60_000)
    assert ttl.path == "/c/ttl" and c.get("/c/ttl")[0] == b"t"
    sttl = raw.create(c, "/c/ttls-", zp.CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL, ttl=60_000)
    assert sttl.path.startswith("/c/ttls-") and len(sttl.path) == len("/c/ttls-") + 10
    with pytest.raises(BadArgumentsError):  # TTL znodes only through createTTL
        raw.call(c, zp.OpCode.CREATE2, zp.CreateRequest("/c/bad", b"", raw.OPEN, int(zp.CreateMode.PERSISTENT_WITH_TTL)))

    # getEphemerals and getAllChildrenNumber.
    mine = raw.call(c, zp.OpCode.GET_EPHEMERALS, zp.PathRequest("/c"))
    assert sorted(mine.children) == sorted(["/c/eph", eseq])
    assert raw.call(c, zp.OpCode.GET_ALL_CHILDREN_NUMBER, zp.PathRequest("/c/deep")).totalNumber == 2
    other = kazoo(zk)
    assert raw.call(other, zp.OpCode.GET_EPHEMERALS, zp.PathRequest("/")).children == ()


def test_set_delete_exists_versions(zk: Ensemble, kazoo: KazooFactory) -> None:
    c = kazoo(zk)
    c.create("/v", b"0")
    st = c.set("/v", b"1")
    assert st.version == 1 and st.dataLength == 1 and st.mzxid > st.czxid
    with pytest.raises(BadVersionError):
        c.set("/v", b"x", version=0)
    assert c.set("/v", b"2", version=1).version == 2
    with pytest.raises(NoNodeError):
        c.set("/nope", b"")
    assert c.get("/v")[0] == b"2"

    c.create("/v/kid")
    with pytest.raises(NotEmptyError):
        c.delete("/v")
    with pytest.raises(BadVersionError):
        c.delete("/v/kid", version=3)
    c.delete("/v/kid", version=0)
    assert c.exists("/v/kid") is None
    with pytest.raises(NoNodeError):
        c.delete("/v/kid")
    pst = c.exists("/v")
    assert pst is not None and pst.numChildren == 0 and pst.cversion == 2 and pst.pzxid > pst.mzxid
    c.delete("/v", version=2)
    with pytest.raises(NoNodeError):
        c.get("/v")
    with pytest.raises(NoNodeError):
        c.get_children("/v")
    # sync answers with the path and orders later reads after everything before it.
    assert c.sync("/") == "/"


def test_transactions(zk: Ensemble, kazoo: KazooFactory) -> None:
    c = kazoo(zk)
    c.create("/tx", b"")
    t = c.transaction()
    t.create("/tx/a", b"a")
    t.create("/tx/s-", b"", sequence=True)
    t.set_data("/tx", b"top", version=0)
    t.check("/tx", 1)
    t.delete("/tx/a")
    res = t.commit()
    assert res[0] == "/tx/a" and res[1].startswith("/tx/s-") and res[2].version == 1 and res[3] is True
    assert res[4] is True
    assert c.get_children("/tx") == [res[1][4:]]
    res_ok = res

    # Fails half-way: nothing applied, each op's own result.
    t = c.transaction()
    t.create("/tx/b", b"b")
    t.set_data("/tx", b"never", version=7)
    t.delete("/tx/missing")
    res = t.commit()
    assert isinstance(res[0], Exception) and type(res[0]).__name__ == "RolledBackError"
    assert isinstance(res[1], BadVersionError)
    assert type(res[2]).__name__ == "RuntimeInconsistency"
    assert c.exists("/tx/b") is None and c.get("/tx")[0] == b"top"
    # A failed multi changed nothing, not even the parent's cversion that names sequential nodes.
    t = c.transaction()
    t.create("/tx/s-", b"", sequence=True)
    t.check("/tx", 99)
    assert isinstance(t.commit()[1], BadVersionError)
    assert c.create("/tx/s-", b"", sequence=True) == f"/tx/s-{int(res_ok[1][-10:]) + 1:010d}"  # creations name them

    # multiRead: per-op results, a missing node its own error.
    mr = raw.call(c, zp.OpCode.MULTI_READ, zp.MultiRequest(((zp.OpCode.GET_DATA, zp.PathWatchRequest("/tx", False)),
                                                            (zp.OpCode.GET_CHILDREN, zp.PathWatchRequest("/tx", False)),
                                                            (zp.OpCode.GET_DATA, zp.PathWatchRequest("/no", False)))))
    (t0, e0, r0), (t1, e1, r1), (t2, e2, _) = mr.results
    assert r0.data == b"top" and list(r1.children) == c.get_children("/tx")
    assert t2 == zp.OpCode.ERROR and e2 == zp.Err.NO_NODE


def test_acls_and_digest_auth(zk: Ensemble, kazoo: KazooFactory) -> None:
    owner = kazoo(zk, auth_data=[("digest", "alice:secret")])
    acl = make_digest_acl("alice", "secret", all=True)
    read_all = ACL(1, Id("world", "anyone"))
    owner.create("/acl", b"guarded", acl=[acl, read_all])
    acls, st = owner.get_acls("/acl")
    assert acls == [acl, read_all] and st.aversion == 0

    stranger = kazoo(zk)
    assert stranger.get("/acl")[0] == b"guarded"  # world may read
    with pytest.raises(NoAuthError):
        stranger.set("/acl", b"mine")
    with pytest.raises(NoAuthError):
        stranger.create("/acl/kid")
    with pytest.raises(NoAuthError):
        stranger.set_acls("/acl", [ACL(31, Id("world", "anyone"))])
    stranger.add_auth("digest", "alice:secret")
    stranger.set("/acl", b"now mine")

    st = owner.set_acls("/acl", [acl], version=0)
    assert st.aversion == 1
    with pytest.raises(BadVersionError):
        owner.set_acls("/acl", [acl], version=0)
    third = kazoo(zk)
    with pytest.raises(NoAuthError):
        third.get("/acl")
    third.add_auth("digest", "alice:wrong")
    with pytest.raises(NoAuthError):
        third.get("/acl")
    # The "auth" scheme: whichever ids the creating connection authenticated with.
    owner.create("/acl-auth", b"", acl=[ACL(31, Id("auth", ""))])
    assert owner.get_acls("/acl-auth")[0] == [ACL(31, Id("digest", make_digest_acl_credential("alice", "secret")))]
    with pytest.raises(NoAuthError):
        third.get("/acl-auth")

    who = raw.call(stranger, zp.OpCode.WHO_AM_I)
    schemes = {(i.authScheme, i.user) for i in who.clientInfo}
    assert ("digest", "alice") in schemes and any(s == "ip" for s, _ in schemes)


def test_unimplemented_and_bad_requests(zk: Ensemble, kazoo: KazooFactory) -> None:
    c = kazoo(zk)
    with pytest.raises(ReconfigDisabledError):  # as from ZooKeeper 3.8 with its defaults
        c.reconfig(joining=None, leaving="3", new_members=None)
    with pytest.raises(BadArgumentsError):
        raw.call(c, zp.OpCode.ADD_WATCH, zp.PathTypeRequest("/", 5))
    assert c.exists("/") is not None  # the session carries on


def test_container_goes_when_emptied(zk: Ensemble, kazoo: KazooFactory) -> None:
    c = kazoo(zk)
    raw.create(c, "/box", zp.CreateMode.CONTAINER)
    c.create("/box/a")
    c.create("/box/b", ephemeral=True)
    c.delete("/box/a")
    assert c.exists("/box") is not None  # not empty yet
    c.delete("/box/b")
    wait_until(lambda: c.exists("/box") is None, what="the emptied container to be swept")
    # A container never given a child stays (ZooKeeper's rule).
    raw.create(c, "/box2", zp.CreateMode.CONTAINER)
    c.create("/marker")
    c.sync("/")
    assert c.exists("/box2") is not None


def test_ttl_node_expires(zk: Ensemble, kazoo: KazooFactory) -> None:
    c = kazoo(zk)
    raw.create(c, "/ttl-short", zp.CreateMode.PERSISTENT_WITH_TTL, ttl=300)
    wait_until(lambda: c.exists("/ttl-short") is None, what="the TTL znode to expire")


def test_sessions_passwords_and_bad_auth(zk: Ensemble, kazoo: KazooFactory) -> None:
    c = kazoo(zk)
    eph = c.create("/pw-owned", b"", ephemeral=True)
    sid, password = c.client_id
    assert len(password) == 16
    # A resume with the wrong password is told its session expired; kazoo starts a new one.
    wrong = kazoo(zk, client_id=(sid, bytes(16)))
    assert wrong.client_id[0] != sid
    assert wrong.exists(eph).ephemeralOwner == sid and c.exists(eph) is not None

    # An unknown auth scheme: AUTH_FAILED, that connection only.
    bad = kazoo(zk)
    with pytest.raises(AuthFailedError):
        bad.add_auth("nonsense", "x")
    assert c.get("/")[1].numChildren >= 1
    assert "zookeeper" in c.get_children("/")


def test_session_timeout_is_clamped_to_the_configured_range(zk: Ensemble) -> None:
    # kazoo keeps the timeout it asked for, so read the negotiated one off a bare handshake.
    port = next(s.zk_client for s in zk.status() if s.zk_client)[1]
    for asked, negotiated in ((200, 1000), (5000, 5000), (600_000, 60000)):  # zk_min/max_session_timeout_ms
        raw_client = RawClient(port, timeout_ms=asked)
        try:
            assert raw_client.session.timeOut == negotiated
        finally:
            raw_client.close()


def test_four_letter_words_and_frame_limits(zk: Ensemble, kazoo: KazooFactory) -> None:
    c: KazooClient = kazoo(zk)
    assert c.command(b"ruok") == "imok"
    c.create("/latency", b"")
    srvr = c.command(b"srvr")
    assert "Mode:" in srvr
    lat = re.search(r"Latency min/avg/max: (\d+)/([\d.]+)/(\d+)\n", srvr)  # ms, receipt to reply
    assert lat is not None and int(lat[1]) <= float(lat[2]) <= int(lat[3]), srvr
    # ZooKeeper's default jute.maxbuffer: a 1,000,000-byte value fits, a larger frame drops
    # that connection only (kazoo sees ConnectionLoss and resumes the same session).
    session = c.client_id
    c.create("/big", b"x" * 1_000_000)
    assert len(c.get("/big")[0]) == 1_000_000
    with pytest.raises(ConnectionLoss):
        c.set("/big", b"y" * 1_100_000)
    wait_until(lambda: c.connected, what="kazoo to reconnect")
    assert c.client_id == session and c.get("/big")[0][:1] == b"x"


def test_pipelined_requests_answer_in_order_and_reads_see_earlier_writes(zk: Ensemble, kazoo: KazooFactory) -> None:
    # Hundreds of requests in flight on one connection: each read must see every write issued
    # before it on the same session (ZooKeeper's FIFO client order), replies in issue order.
    c = kazoo(zk)
    c.create("/pipe", b"")
    pending = []
    for i in range(150):
        pending.append(("create", i, c.create_async(f"/pipe/n{i}", str(i).encode())))
        pending.append(("set", i, c.set_async("/pipe", str(i).encode())))
        pending.append(("get", i, c.get_async("/pipe")))
        pending.append(("exists", i, c.exists_async(f"/pipe/n{i}")))
        pending.append(("children", i, c.get_children_async("/pipe")))
    for kind, i, res in pending:
        value = res.get(timeout=60)
        if kind == "get":
            assert value[0] == str(i).encode() and value[1].version == i + 1
        elif kind == "exists":
            assert value is not None and value.dataLength == len(str(i))
        elif kind == "children":
            assert len(value) == i + 1
