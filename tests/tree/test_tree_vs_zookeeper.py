"""The tree against Apache ZooKeeper 3.8 itself: one script of operations (ACLs, auth, containers,
sequential names, ZooKeeper's own znodes, a multi failing halfway, the 3.8 reads, quotas, null
data, path characters) run on both, every answer compared: error codes, paths, data, ACLs and
Stats (zxids and times by their relations, not their values). TTL znodes are left out: the oracle runs without
extendedTypesEnabled."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tree_harness import Leader

from tests.wire.rawclient import RawClient
from zabray.driver import apache_zk
from zabray.tree import Check as TCheck
from zabray.tree import Delete as TDelete
from zabray.tree import SetData as TSetData
from zabray.tree import (
    Stat,
    ZooKeeperError,
    authenticate,
    create_op,
    create_session,
    delete,
    multi,
    set_acl,
    set_data,
)
from zabray.tree import ops as tops
from zabray.wire import zkproto as zp

pytestmark = pytest.mark.zookeeper

OPEN = ((31, "world", "anyone"),)
BOB_ACL = ((1, "world", "anyone"), (31, "auth", ""))
W = zp.OpCode

QUOTA_Q = "/zookeeper/quota/q"
# (kind, args...) — one client; "auth" adds a digest identity to it.
SCRIPT: list[tuple[Any, ...]] = [
    ("exists", "/"), ("get", "/zookeeper"), ("get", "/zookeeper/config"), ("acl", "/zookeeper/config"),
    ("count", "/"), ("children2", "/"),
    ("create", W.CREATE, "/zookeeper", b"", OPEN, 0), ("delete", "/zookeeper/quota", -1),
    ("create", W.CREATE, "/zookeeper/config/x", b"", OPEN, 0), ("set", "/zookeeper/config", b"x", -1),
    ("create", W.CREATE2, "/a", b"data", OPEN, 0), ("create", W.CREATE, "/a/s-", b"", OPEN, 2),
    ("create", W.CREATE2, "/a/s-", b"", OPEN, 3), ("create", W.CREATE, "/a/e", b"", OPEN, 1),
    ("create", W.CREATE, "/a/e/x", b"", OPEN, 0), ("delete", "/a/s-0000000000", -1),
    ("children2", "/a"), ("get", "/a"), ("set", "/a", b"v2", 0), ("set", "/a", b"v3", 0),
    ("delete", "/a", -1), ("create", W.CREATE, "/b", b"", (), 0), ("create", W.CREATE, "/b", b"", BOB_ACL, 0),
    ("create", W.CREATE, "/b", b"", ((31, "digest", "nocolon"),), 0),
    ("auth", b"bob:secret"), ("create", W.CREATE2, "/b", b"", BOB_ACL, 0), ("acl", "/b"),
    ("create", W.CREATE_CONTAINER, "/c", b"", OPEN, 0), ("create", W.CREATE2, "/c/x", b"", OPEN, 0),
    ("delete", "/c/x", -1), ("get", "/c"), ("setacl", "/b", OPEN, 5), ("setacl", "/b", BOB_ACL, 0),
    ("multi", [("create", "/m", b""), ("check", "/b", 0), ("set", "/m", b"x", 7), ("delete", "/a/e", -1)]),
    ("multi", [("create", "/m", b""), ("set", "/m", b"x", 0), ("delete", "/a/e", -1)]),
    ("get", "/m"), ("count", "/"), ("ephemerals", "/a"), ("ephemerals", "/"),
    ("create", W.CREATE, "/", b"", OPEN, 2), ("delete", "/", -1), ("delete", "/nope/x", -1),
    # Quotas, as zkCli's setquota makes them: the server keeps the stats znode's count and bytes.
    ("create", W.CREATE, "/q", b"hello", OPEN, 0), ("create", W.CREATE, "/q/a", b"1", OPEN, 0),
    ("create", W.CREATE, "/q/b", b"2", OPEN, 0), ("create", W.CREATE, "/zookeeper/quota/q", b"", OPEN, 0),
    ("create", W.CREATE, f"{QUOTA_Q}/zookeeper_limits", b"count=5,bytes=-1", OPEN, 0),
    ("create", W.CREATE, f"{QUOTA_Q}/zookeeper_stats", b"count=0,bytes=0", OPEN, 0),
    ("get", f"{QUOTA_Q}/zookeeper_stats"),
    ("set", "/q/a", b"11", -1), ("create", W.CREATE, "/q/a/c", b"xyz", OPEN, 0), ("delete", "/q/b", -1),
    ("multi", [("create", "/q/m", b""), ("set", "/q/m", b"abcd", 0)]), ("get", f"{QUOTA_Q}/zookeeper_stats"),
    # a quota deeper down takes its subtree's changes over; a stats value keeps keys it does not know
    ("create", W.CREATE, f"{QUOTA_Q}/a", b"", OPEN, 0),
    ("create", W.CREATE, f"{QUOTA_Q}/a/zookeeper_limits", b"count=-1,bytes=10", OPEN, 0),
    ("create", W.CREATE, f"{QUOTA_Q}/a/zookeeper_stats", b"", OPEN, 0),
    ("create", W.CREATE, "/q/a/d", b"12345", OPEN, 0),
    ("get", f"{QUOTA_Q}/a/zookeeper_stats"), ("get", f"{QUOTA_Q}/zookeeper_stats"),
    ("set", f"{QUOTA_Q}/zookeeper_stats", b"count=1,bytes=2=;countHardLimit=9", -1),
    ("create", W.CREATE, "/q/e", b"", OPEN, 0), ("get", f"{QUOTA_Q}/zookeeper_stats"),
    ("delete", f"{QUOTA_Q}/a/zookeeper_limits", -1), ("create", W.CREATE, "/q/a/f", b"x", OPEN, 0),
    ("get", f"{QUOTA_Q}/a/zookeeper_stats"), ("get", f"{QUOTA_Q}/zookeeper_stats"),
    # null data (a Java client's null, zkCli's create with no data): read back as null, 0 bytes long
    ("create", W.CREATE2, "/n", None, OPEN, 0), ("get", "/n"), ("set", "/n", b"x", -1), ("set", "/n", None, -1),
    ("get", "/n"), ("exists", "/n"), ("create", W.CREATE, "/e", b"", OPEN, 0), ("get", "/e"),
    ("multi", [("create", "/mn", None), ("set", "/mn", None, 0)]), ("get", "/mn"),
    ("set", "/q/a/d", None, -1), ("create", W.CREATE, "/q/n", None, OPEN, 0), ("get", "/q/a/d"),
    ("get", f"{QUOTA_Q}/zookeeper_stats"), ("delete", "/q/a/d", -1), ("get", f"{QUOTA_Q}/zookeeper_stats"),
    # path characters: ZooKeeper judges a path's UTF-16 units, so a character beyond U+FFFF (two
    # surrogates) is refused like the private use area; a sequential create after them shows the
    # parent's counter counted the same creates
    *(("create", W.CREATE, f"/u-{c}", b"", OPEN, 0)
      for c in ("\u00e9\u2603", "\U0001d11e", "\ue000", "\uf8ff", "\uf900", "\ud7ff", "\uffef", "\ufff0")),
    ("create", W.CREATE, "/u-", b"", OPEN, 2), ("children2", "/"),
    # an expected version below -1 is just one no znode has: BAD_VERSION, not BAD_ARGUMENTS
    ("set", "/n", b"v", -2), ("set", "/n", b"v", -(2**31)), ("delete", "/n", -2), ("setacl", "/n", OPEN, -2),
    ("multi", [("check", "/n", -2)]), ("multi", [("set", "/n", b"v", -5), ("delete", "/e", -1)]), ("get", "/n"),
]
# Steps run again after a second client without bob's identity takes over.
ANON_SCRIPT: list[tuple[Any, ...]] = [
    ("acl", "/b"), ("get", "/b"), ("set", "/b", b"x", -1), ("create", W.CREATE, "/b/y", b"", OPEN, 0),
    ("delete", "/b/nope", -1), ("setacl", "/b", OPEN, -1), ("exists", "/b"),
    ("multi", [("check", "/b", -1)]),
]


def norm_stat(st: Any) -> tuple[Any, ...]:
    """What must match: counters, sizes, whether ephemeral, and how the zxids relate."""
    return (
        st.version, st.cversion, st.aversion, st.ephemeral_owner != 0 if isinstance(st, Stat) else st.ephemeralOwner != 0,
        st.data_length if isinstance(st, Stat) else st.dataLength,
        st.num_children if isinstance(st, Stat) else st.numChildren,
        st.czxid == st.mzxid, st.czxid == st.pzxid, st.czxid == 0,
    )


def norm_acl(acl: Any) -> tuple[tuple[int, str, str], ...]:
    return tuple((a.perms, a.id.scheme, a.id.id) if isinstance(a, zp.ACL) else a for a in acl)


def zk_acl(acl: tuple[tuple[int, str, str], ...]) -> tuple[zp.ACL, ...]:
    return tuple(zp.ACL(p, zp.Id(s, i)) for p, s, i in acl)


class ZkSide:
    def __init__(self, port: int) -> None:
        self.c = RawClient(port)

    def run(self, step: tuple[Any, ...]) -> tuple[Any, ...]:
        kind, *a = step
        c = self.c
        if kind == "auth":
            hdr, _ = c.call(W.AUTH, zp.AuthPacket(0, "digest", a[0]), xid=zp.Xid.AUTH)
            return (zp.Err(hdr.err).name,)
        if kind == "create":
            hdr, rec = c.call(a[0], zp.CreateRequest(a[1], a[2], zk_acl(a[3]), a[4]))
        elif kind == "delete":
            hdr, rec = c.call(W.DELETE, zp.PathVersionRequest(a[0], a[1]))
        elif kind == "set":
            hdr, rec = c.call(W.SET_DATA, zp.SetDataRequest(a[0], a[1], a[2]))
        elif kind == "setacl":
            hdr, rec = c.call(W.SET_ACL, zp.SetACLRequest(a[0], zk_acl(a[1]), a[2]))
        elif kind in ("get", "exists", "children2"):
            op = {"get": W.GET_DATA, "exists": W.EXISTS, "children2": W.GET_CHILDREN2}[kind]
            hdr, rec = c.call(op, zp.PathWatchRequest(a[0], False))
        elif kind in ("acl", "count", "ephemerals"):
            op = {"acl": W.GET_ACL, "count": W.GET_ALL_CHILDREN_NUMBER, "ephemerals": W.GET_EPHEMERALS}[kind]
            hdr, rec = c.call(op, zp.PathRequest(a[0]))
        else:
            ops: list[tuple[int, zp.Record]] = []
            for k, *b in a[0]:
                if k == "create":
                    ops.append((W.CREATE, zp.CreateRequest(b[0], b[1], zk_acl(OPEN), 0)))
                elif k == "check":
                    ops.append((W.CHECK, zp.PathVersionRequest(b[0], b[1])))
                elif k == "set":
                    ops.append((W.SET_DATA, zp.SetDataRequest(b[0], b[1], b[2])))
                else:
                    ops.append((W.DELETE, zp.PathVersionRequest(b[0], b[1])))
            hdr, rec = c.call(W.MULTI, zp.MultiRequest(tuple(ops)))
            assert isinstance(rec, zp.MultiResponse)
            return ("multi", tuple(zp.Err(err).name for _, err, _ in rec.results))
        err = zp.Err(hdr.err).name
        if err != "OK":
            return (err,)
        match rec:
            case zp.PathResponse(path=p):
                return ("OK", p)
            case zp.Create2Response(path=p, stat=st):
                return ("OK", p, norm_stat(st))
            case zp.StatResponse(stat=st):
                return ("OK", norm_stat(st))
            case zp.GetDataResponse(data=d, stat=st):
                return ("OK", d, norm_stat(st))
            case zp.Children2Response(children=ch, stat=st):
                return ("OK", sorted(ch or ()), norm_stat(st))
            case zp.GetACLResponse(acl=acl, stat=st):
                return ("OK", norm_acl(acl or ()), norm_stat(st))
            case zp.CountResponse(totalNumber=n):
                return ("OK", n)
            case zp.ChildrenResponse(children=ch):
                return ("OK", sorted(ch or ()))
        return ("OK",)


class TreeSide:
    def __init__(self) -> None:
        self.ld = Leader()
        self.auth: tuple[tuple[str, str], ...] = (("ip", "127.0.0.1"),)
        self.sid = 1
        assert self.ld.write(create_session(self.sid, 10000, time_ms=1)).ok

    def run(self, step: tuple[Any, ...]) -> tuple[Any, ...]:
        kind, *a = step
        t, kw = self.ld.tree, {"session_id": self.sid, "time_ms": 2, "auth": self.auth}
        try:
            if kind == "auth":
                self.auth += authenticate("digest", a[0])
                return ("OK",)
            if kind == "create":
                op = create_op(a[0], a[1], a[2], a[3], a[4])
                return self._write(tops.encode_request(tops.Request(self.sid, 2, op, self.auth)))
            if kind == "delete":
                return self._write(delete(a[0], a[1], **kw))
            if kind == "set":
                return self._write(set_data(a[0], a[1], a[2], **kw))
            if kind == "setacl":
                return self._write(set_acl(a[0], a[1], a[2], **kw))
            if kind == "multi":
                ops: list[Any] = []
                for k, *b in a[0]:
                    ops.append({"create": lambda b: create_op(W.CREATE, b[0], b[1], OPEN, 0),
                                "check": lambda b: TCheck(b[0], b[1]), "set": lambda b: TSetData(*b),
                                "delete": lambda b: TDelete(*b)}[k](b))
                r = self.ld.write(multi(ops, **kw))
                return ("multi", r.op_errors(len(ops)))
            if kind == "exists":
                st = t.exists(a[0])
                return ("NO_NODE",) if st is None else ("OK", norm_stat(st))
            if kind == "get":
                d, st = t.get(a[0], self.auth)
                return ("OK", d, norm_stat(st))
            if kind == "children2":
                ch, st = t.children2(a[0], self.auth)
                return ("OK", ch, norm_stat(st))
            if kind == "acl":
                acl, st = t.get_acl(a[0], self.auth)
                return ("OK", acl, norm_stat(st))
            if kind == "count":
                return ("OK", t.all_children_number(a[0], self.auth))
            return ("OK", t.get_ephemerals(self.sid, a[0]))
        except ZooKeeperError as e:
            return (e.code,)

    def _write(self, request: bytes) -> tuple[Any, ...]:
        r = self.ld.write(request)
        if r.error is not None:
            return (r.error.code,)
        v = r.value
        if isinstance(v, tuple):
            return ("OK", v[0], norm_stat(v[1]))
        if isinstance(v, Stat):
            return ("OK", norm_stat(v))
        return ("OK",) if v is None else ("OK", v)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[apache_zk.ApacheZooKeeper]:
    if not apache_zk.available():
        pytest.fail("Apache ZooKeeper is not installed: bin/bootstrap installs Debian's zookeeper")
    with apache_zk.ApacheZooKeeper(Path(tmp_path_factory.mktemp("apache-zk-tree"))) as zk:
        yield zk


def test_tree_answers_as_zookeeper_does(oracle: apache_zk.ApacheZooKeeper) -> None:
    zk, tree = ZkSide(oracle.client_ports[0]), TreeSide()
    try:
        for i, step in enumerate(SCRIPT):
            assert tree.run(step) == zk.run(step), f"step {i}: {step}"
        # the ephemeral owner's identity: getEphemerals only for the owning session
        zk2 = ZkSide(oracle.client_ports[0])
        tree.auth, tree.sid = (("ip", "127.0.0.1"),), 2
        assert tree.ld.write(create_session(2, 10000, time_ms=3)).ok
        try:
            for i, step in enumerate(ANON_SCRIPT):
                assert tree.run(step) == zk2.run(step), f"anonymous step {i}: {step}"
        finally:
            zk2.c.close()
    finally:
        zk.c.close()
