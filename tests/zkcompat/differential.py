"""A differential harness: one seeded sequence of kazoo operations against two ZooKeeper servers.

The oracle is Apache ZooKeeper 3.8; the candidate is whatever speaks ZooKeeper's protocol
(zabray, or a second Apache ZooKeeper to prove the harness itself raises no false alarm).
Every answer is normalised before comparing, as etcd's zetcd cross-checker does:

- zxids (czxid, mzxid, pzxid) become their rank among all zxids the run observed, so two
  servers agree when they order their transactions alike, whatever numbers they use;
- times are reduced to what holds whatever the clock: ``ctime == mtime`` for a znode never
  set, ``mtime >= ctime`` once set (wall clocks differ, and two writes may share a millisecond);
- ephemeral owners become the index of the session that owns them;
- errors become ZooKeeper's error names; children, ephemerals and whoAmI's ids are sorted
  (ZooKeeper promises no order: they come from Java hash sets).

Below kazoo's callbacks, every frame a session receives is recorded as it is read: each watch
event (type, path), and each reply's error code and body length (a missing or extra field in
any answer shows up, even where kazoo would not notice). After every operation every session
syncs, so each event and reply is attributed to the operation that caused it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.serialization import Watch, ZnodeStat
from kazoo.security import ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Id, make_digest_acl

from tests.zkcompat import kazoo_extra as kx

PATHS = ["/d", "/d/a", "/d/b", "/d/a/x", "/d/a/y", "/d/c", "/e", "/k", "/k/a", "/k/a/b"]
READ_PATHS = PATHS + ["/", "/zookeeper", "/zookeeper/quota", "/nope/x"]
# Paths kazoo would normalise: sent raw, the server must judge them as ZooKeeper does. Not the
# empty path: every client refuses it, and ZooKeeper's own answer to it (MARSHALLINGERROR) is an
# exception in its request-metrics code, not a rule a server could follow.
RAW_PATHS = ["/d/", "d", "/d//a", "/d/./a", "/d/../a", "/d/a\u0000", "/zookeeper/q", "/d/a/"]
# Characters no znode's path may hold (not beyond U+FFFF: ZooKeeper echoes those as surrogates).
BAD_CHAR_PATHS = ["/d/\ue000", "/d/a\u0001", "/d/\ufff0"]
TX_DATA = [b"", b"v", b"value-2", b"x" * 100]  # kazoo's transactions refuse None before sending
DATA = [*TX_DATA, None]  # None: ZooKeeper's null, which kazoo's create and set send as such
VERSIONS = [-1, -1, 0, 1, 2, 5, -2]  # -2: no znode has it (BAD_VERSION, as any other mismatch)
USERS = [("alice", "pw1"), ("bob", "pw2")]
TTL_MS = 3_600_000  # long enough never to expire during a run (the sweeps are off anyway)

ACL_CHOICES: list[list[ACL] | None] = [
    None,  # kazoo's default: open
    list(OPEN_ACL_UNSAFE),
    list(READ_ACL_UNSAFE),
    [make_digest_acl("alice", "pw1", all=True)],
    [make_digest_acl("bob", "pw2", read=True, write=True), make_digest_acl("alice", "pw1", all=True)],
    [ACL(31, Id("auth", ""))],  # the requester's digest ids; INVALID_ACL without one
    [ACL(31, Id("ip", "127.0.0.1"))],
    [ACL(31, Id("ip", "10.0.0.0/8"))],  # nobody here: leaves only
    [ACL(31, Id("bogus", "x"))],  # INVALID_ACL
    [ACL(31, Id("world", "anyone")), ACL(31, Id("world", "anyone"))],  # duplicates dropped
]
_ACL_WEIGHTS = [12, 3, 2, 3, 3, 2, 1, 1, 1, 1]
_LEAF_ONLY = {2, 7}

# createContainer 19, createTTL 21 (flags 5/6), create/create2 with every flag value, right or wrong.
RAW_CREATES = [(19, 4), (19, 4), (19, 0), (19, 2), (19, 5), (21, 5), (21, 6), (21, 0), (1, 4), (15, 5), (1, 7),
               (15, 1), (15, 3)]


@dataclass(frozen=True)
class Op:
    """One step: ``kind`` and its arguments, run on session ``s``."""

    s: int
    kind: str
    args: tuple[Any, ...]


_KINDS = (["create"] * 8 + ["create_raw"] * 2 + ["set"] * 4 + ["delete"] * 3 + ["delete_child"] * 2
          + ["get"] * 3 + ["exists"] * 2 + ["children"] * 3 + ["multi"] * 3
          + ["get_acls", "set_acls", "set_acls", "auth", "sync", "count", "ephemerals", "whoami",
             "multi_read", "add_watch", "add_watch", "watches", "get_raw", "raw_path"])


def generate(seed: int, n: int, sessions: int = 2) -> list[Op]:
    """The seeded operation sequence (independent of results, so both servers get the same)."""
    rng = random.Random(seed)
    ops: list[Op] = []
    for _ in range(n):
        s = rng.randrange(sessions)
        k = rng.choice(_KINDS)
        p = rng.choice(PATHS)
        rp = rng.choice(READ_PATHS)
        args: tuple[Any, ...]
        if k == "create":
            args = (p, rng.choice(DATA), _acl_key(rng, p), rng.random() < 0.25, rng.random() < 0.3,
                    rng.random() < 0.5)
        elif k == "create_raw":
            op, flags = rng.choice(RAW_CREATES)
            path = rng.choice(RAW_PATHS) if rng.random() < 0.2 else p
            # Not createTTL with a plain mode and a negative ttl: ZooKeeper 3.8 accepts that and logs
            # a CreateTTLTxn its own apply cannot carry out (TTL.toEphemeralOwner(-1) throws).
            ttl = rng.choice([TTL_MS, TTL_MS, 0] + ([-1] if flags in (5, 6) else [])) if op == 21 else None
            args = (op, path, rng.choice(DATA), _acl_key(rng, p), flags, ttl)
        elif k == "set":
            args = (p, rng.choice(DATA), rng.choice(VERSIONS))
        elif k == "delete":
            args = (p, rng.choice(VERSIONS))
        elif k == "delete_child":
            args = (rng.choice(["/d", "/d/a", "/k", "/"]), rng.randrange(100), rng.choice([-1, -1, 0]))
        elif k in ("get", "exists"):
            args = (rp, rng.random() < 0.5)
        elif k == "children":
            args = (rp, rng.random() < 0.5, rng.random() < 0.5)
        elif k == "multi":
            sub = []
            for _ in range(rng.randint(2, 4)):
                q = rng.choice(PATHS)
                sub.append(rng.choice([("create", q, rng.choice(TX_DATA), rng.random() < 0.2, rng.random() < 0.2),
                                       ("delete", q, rng.choice(VERSIONS)),
                                       ("set", q, rng.choice(TX_DATA), rng.choice(VERSIONS)),
                                       ("check", q, rng.choice(VERSIONS))]))
            args = (tuple(sub),)
        elif k == "get_acls":
            args = (rp,)
        elif k == "set_acls":
            args = (p, _acl_key(rng, p), rng.choice(VERSIONS))
        elif k == "auth":
            # One digest identity per session slot: ZooKeeper expands an ("auth", "") ACL into its
            # connection's ids in Java hash-set order, which no server could be expected to copy.
            args = USERS[s % len(USERS)]
        elif k == "count":
            args = (rp,)
        elif k == "ephemerals":
            args = (rng.choice(["/", "", "/d", "/d/a", "/e", "/x"]),)
        elif k == "multi_read":
            args = (tuple((rng.choice(["get", "children"]), rng.choice(READ_PATHS))
                          for _ in range(rng.randint(1, 3))),)
        elif k == "add_watch":
            args = (rng.choice(READ_PATHS[:11]), rng.random() < 0.5)
        elif k == "watches":
            # removeWatches only: 3.8.0's checkWatches answers OK when any *other* session
            # watches the path (WatchManager.containsWatcher ignores the watcher), a bug zabray
            # does not copy. Watcher types 1..3 only: 3.8 has no others (it answers 4 and 5, 3.9's
            # persistent types, MARSHALLINGERROR), while zabray serves them as 3.9 does.
            args = ("remove", rp, rng.choice([1, 2, 3]))
        elif k == "get_raw":
            args = (rng.choice(RAW_PATHS),)
        elif k == "raw_path":  # exists, delete and sync each judge a path their own way
            args = (rng.choice(["exists", "delete", "sync"]), rng.choice(RAW_PATHS + BAD_CHAR_PATHS),
                    rng.choice(VERSIONS))
        else:  # whoami, sync
            args = (p,)
        if rng.random() < 0.02:
            k, args = "reopen", ()
        ops.append(Op(s, k, args))
    return ops


def _acl_key(rng: random.Random, path: str) -> int:
    """Mostly open; read-only or locked only on leaves, so no subtree is locked for the whole run."""
    leaf = path.count("/") >= 3 or path == "/e"
    weights = [0 if (i in _LEAF_ONLY and not leaf) else w for i, w in enumerate(_ACL_WEIGHTS)]
    return rng.choices(range(len(ACL_CHOICES)), weights=weights)[0]


def _acl_list(key: int) -> list[ACL] | None:
    return ACL_CHOICES[key]


@dataclass
class _Session:
    client: KazooClient
    index: int
    frames: list[tuple[Any, ...]] = field(default_factory=list)


def _record_frames(sess: _Session) -> None:
    """Record every watch event and reply ``sess`` reads, in order, as the connection reads it."""
    conn = sess.client._connection
    read_header = conn._read_header

    def recording(timeout: float) -> Any:
        header, buf, offset = read_header(timeout)
        if header.xid == -1:
            w, _ = Watch.deserialize(buf, offset)
            sess.frames.append(("event", w.type, w.state, w.path))
        elif header.xid != -2:  # pings come when they come
            sess.frames.append(("reply", header.err, len(buf) - offset))
        return header, buf, offset

    conn._read_header = recording


class Runner:
    """Runs an op sequence against one server (connect string ``hosts``) and records answers."""

    def __init__(self, hosts: str, sessions: int = 2, timeout: float = 20.0) -> None:
        self.hosts = hosts
        self.timeout = timeout
        self.owners: dict[int, int] = {}
        self.sessions = [self._open(i) for i in range(sessions)]
        self.next_index = sessions

    def _open(self, index: int) -> _Session:
        c = KazooClient(hosts=self.hosts, timeout=self.timeout)
        sess = _Session(c, index)
        _record_frames(sess)
        c.start(timeout=self.timeout)
        sess.frames.clear()
        self.owners[c.client_id[0]] = index
        return sess

    def close(self) -> None:
        for s in self.sessions:
            s.client.stop()
            s.client.close()

    def _drain(self) -> list[list[tuple[Any, ...]]]:
        out = []
        syncs = [sess.client.sync_async("/") for sess in self.sessions]
        for r in syncs:
            r.get(timeout=self.timeout)
        for sess in self.sessions:
            out.append(sess.frames)
            sess.frames = []
        return out

    def run(self, ops: list[Op]) -> list[Any]:
        """One normalisable record per op: (answer, frames seen by each session after it)."""
        out = []
        for op in ops:
            answer = self._one(op)
            frames = self._drain()
            if op.kind == "reopen":
                # A closing session's ephemerals go in the order of a Java hash set in ZooKeeper
                # (DataTree.killSession): the events they fire are compared as a set.
                frames = [sorted(f for f in fs if f[0] == "event") + [f for f in fs if f[0] != "event"]
                          for fs in frames]
            out.append((answer, frames))
        return out

    def _one(self, op: Op) -> Any:
        try:
            return ("ok", self._do(op))
        except KazooException as e:
            return ("error", type(e).__name__)

    def _do(self, op: Op) -> Any:
        sess = self.sessions[op.s]
        c = sess.client
        a = op.args
        t = self.timeout
        watch = (lambda ev: None) if len(a) > 1 and a[1] is True else None
        match op.kind:
            case "create":
                path, data, acl, eph, seq, with_stat = a
                return c.create(path, data, acl=_acl_list(acl), ephemeral=eph, sequence=seq, include_data=with_stat)
            case "create_raw":
                code, path, data, acl, flags, ttl = a
                return kx.call(c, kx.create(code, path, data, _acl_list(acl) or OPEN_ACL_UNSAFE, flags, ttl), t)
            case "set":
                return c.set(a[0], a[1], version=a[2])
            case "delete":
                return c.delete(a[0], version=a[1])
            case "delete_child":
                kids = sorted(c.get_children(a[0]))
                if not kids:
                    return None
                child = (a[0].rstrip("/") + "/" + kids[a[1] % len(kids)])
                return child, c.delete(child, version=a[2])
            case "get":
                return c.get(a[0], watch=watch)
            case "exists":
                return c.exists(a[0], watch=watch)
            case "children":
                r = c.get_children(a[0], watch=watch, include_data=a[2])
                return (sorted(r[0]), r[1]) if a[2] else sorted(r)
            case "multi":
                tx = c.transaction()
                for sub in a[0]:
                    match sub:
                        case ("create", q, d, eph, seq):
                            tx.create(q, d, ephemeral=eph, sequence=seq)
                        case ("delete", q, v):
                            tx.delete(q, version=v)
                        case ("set", q, d, v):
                            tx.set_data(q, d, version=v)
                        case ("check", q, v):
                            tx.check(q, v)
                return tx.commit()
            case "get_acls":
                return c.get_acls(a[0])
            case "set_acls":
                return c.set_acls(a[0], _acl_list(a[1]) or list(OPEN_ACL_UNSAFE), version=a[2])
            case "auth":
                c.add_auth("digest", f"{a[0]}:{a[1]}")
                return None
            case "sync":
                return c.sync(a[0])
            case "count":
                return kx.call(c, kx.all_children_number(a[0]), t)
            # Both answers are a Java hash set's iteration order in ZooKeeper (the session's
            # ephemerals, the connection's auth ids): no order is promised, so compare them sorted.
            case "ephemerals":
                return _sorted_answer(kx.call(c, kx.ephemerals(a[0]), t))
            case "whoami":
                return _sorted_answer(kx.call(c, kx.who_am_i(), t))
            case "multi_read":
                return kx.call(c, kx.multi_read(a[0]), t)
            case "add_watch":
                return kx.call(c, kx.add_watch(a[0], a[1]), t)
            case "watches":
                req = kx.check_watches if a[0] == "check" else kx.remove_watches
                return kx.call(c, req(a[1], a[2]), t)
            case "get_raw":
                return kx.call(c, kx.get_data_raw(a[0]), t)
            case "raw_path":
                kind, path, version = a
                req = {"exists": lambda: kx.exists_raw(path), "delete": lambda: kx.delete_raw(path, version),
                       "sync": lambda: kx.sync_raw(path)}[kind]()
                return kx.call(c, req, t)
            case "reopen":
                c.stop()
                c.close()
                self.sessions[op.s] = self._open(self.next_index)
                self.next_index += 1
                return None
        raise AssertionError(f"unknown op {op.kind}")


def _sorted_answer(r: Any) -> Any:
    """(items, unread bytes) with the items sorted; an unparseable answer as it is."""
    return (sorted(r[0]), r[1]) if len(r) == 2 else r


def normalise(records: list[Any], owners: dict[int, int]) -> list[Any]:
    """Replace zxids by their rank among all observed zxids, times by clock-free facts, owners by index."""
    zxids: set[int] = set()

    def collect(x: Any) -> None:
        if isinstance(x, ZnodeStat):
            zxids.update((x.czxid, x.mzxid, x.pzxid))
        elif isinstance(x, (list, tuple)):
            for y in x:
                collect(y)

    collect(records)
    rank = {z: i for i, z in enumerate(sorted(zxids))}

    def norm(x: Any) -> Any:
        if isinstance(x, ZnodeStat):
            # Clock-free facts only: a never-set znode has mtime == ctime, a set one mtime >= ctime
            # (two writes within one millisecond may share a time on either server).
            times = x.ctime == x.mtime if x.version == 0 else x.mtime >= x.ctime
            return ("stat", rank[x.czxid], rank[x.mzxid], rank[x.pzxid], times, x.version,
                    x.cversion, x.aversion, owners.get(x.ephemeralOwner, x.ephemeralOwner), x.dataLength,
                    x.numChildren)
        if isinstance(x, Exception):
            return ("error", type(x).__name__)
        if isinstance(x, (list, tuple)):
            return tuple(norm(y) for y in x)
        if isinstance(x, ACL):
            return ("acl", x.perms, x.id.scheme, x.id.id)
        return x

    return [norm(r) for r in records]


def first_difference(ops: list[Op], oracle: list[Any], candidate: list[Any]) -> str | None:
    """None when both normalised runs agree; else the first differing op and both answers."""
    for i, (o, c) in enumerate(zip(oracle, candidate, strict=True)):
        if o != c:
            return f"op #{i} {ops[i]}:\n  oracle:    {o}\n  candidate: {c}"
    return None


def run_normalised(hosts: str, ops: list[Op], sessions: int = 2) -> list[Any]:
    r = Runner(hosts, sessions)
    try:
        return normalise(r.run(ops), r.owners)
    finally:
        r.close()


# -- read-only mode --------------------------------------------------------------------------------


class Servers(Protocol):
    """A 3-server system the read-only scenario can stop and start, server by server (0-based)."""

    def address(self, i: int) -> str: ...
    def stop(self, i: int) -> None: ...
    def start(self, i: int) -> None: ...


def _until(what: str, cond: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = cond()
        except (KazooException, OSError):
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.1)


def _outcome(call: Callable[[], Any]) -> Any:
    from kazoo.handlers.threading import KazooTimeoutError

    try:
        return ("ok", call())
    except (KazooException, KazooTimeoutError) as e:
        return ("error", type(e).__name__)


def read_only_scenario(servers: Servers, n: int = 3,
                       java: Callable[[str], list[str]] | None = None) -> list[tuple[Any, ...]]:
    """What clients and four-letter words show of read-only mode, as comparable records: server
    0 is left alone (the others stopped), serves read-only sessions once it has looked for a
    quorum long enough, then rejoins one when they start again. kazoo's ``read_only=True``
    client (and the Java client's ``canBeReadOnly`` through ``java(address)``, whose printed
    lines are recorded) must see the same on both systems: reads served, every kind of write
    NOT_READONLY, a plain client refused, and a move back to read-write, where writes work."""
    from kazoo.client import KazooState

    out: list[tuple[Any, ...]] = []
    hosts = ",".join(servers.address(i) for i in range(n))
    rw = KazooClient(hosts=hosts, timeout=10.0)
    rw.start(timeout=60)
    try:
        rw.ensure_path("/ro")
        rw.set("/ro", b"v1")
        rw.ensure_path("/ro/c")
    finally:
        rw.stop()
        rw.close()
    for i in range(n):  # every server has it before the others go
        c = KazooClient(hosts=servers.address(i), timeout=10.0)
        c.start(timeout=60)
        try:
            c.sync("/ro")
            _until(f"server {i} to have /ro", lambda c=c: c.get("/ro")[0] == b"v1", 30)  # type: ignore[misc]
        finally:
            c.stop()
            c.close()
    for i in range(1, n):
        servers.stop(i)
    host, port = servers.address(0).split(":")
    out.append(("isro", _until("isro to answer ro", lambda: four_letter_ro(host, int(port)), 60)))
    srvr = four_letter_text(host, int(port), "srvr")
    out.append(("srvr", [ln for ln in srvr.splitlines() if ln.startswith(("Mode:", "READ-ONLY"))]))
    mntr = dict(ln.split("\t", 1) for ln in four_letter_text(host, int(port), "mntr").splitlines() if "\t" in ln)
    out.append(("mntr", mntr.get("zk_server_state")))
    plain = KazooClient(hosts=servers.address(0), timeout=10.0)
    out.append(("plain client", _outcome(lambda: plain.start(timeout=8))))
    plain.stop()
    plain.close()
    ro = KazooClient(hosts=hosts, timeout=10.0, read_only=True)
    states: list[str] = []
    ro.add_listener(lambda s: states.append(str(s)))
    ro.start(timeout=60)
    try:
        out.append(("ro state", str(ro.client_state)))
        out.append(("get", _outcome(lambda: ro.get("/ro")[0])))
        out.append(("children", _outcome(lambda: ro.get_children("/ro"))))
        out.append(("exists", _outcome(lambda: ro.exists("/nope"))))
        for name, call in (("create", lambda: ro.create("/ro/x")), ("set", lambda: ro.set("/ro", b"v2")),
                           ("delete", lambda: ro.delete("/ro/c")), ("sync", lambda: ro.sync("/ro")),
                           ("ephemeral", lambda: ro.create("/ro/e", ephemeral=True)),
                           ("transaction", lambda: _commit(ro))):
            out.append((name, _outcome(call)))
        if java is not None:
            out.append(("java", tuple(java(servers.address(0)))))
        for i in range(1, n):
            servers.start(i)
        _until("the read-only client to be read-write again", lambda: ro.client_state == "CONNECTED", 120)
        out.append(("moved", str(ro.client_state), KazooState.LOST in states))
        out.append(("write after", _outcome(lambda: ro.create("/ro/after", b"w"))))
        out.append(("read after", _outcome(lambda: ro.get("/ro/after")[0])))
    finally:
        ro.stop()
        ro.close()
    return out


def _commit(c: KazooClient) -> Any:
    t = c.transaction()
    t.create("/ro/t")
    return t.commit()


def four_letter_text(host: str, port: int, word: str) -> str:
    from zabray.driver.apache_zk import four_letter

    return four_letter(host, port, word, timeout=5.0)


def four_letter_ro(host: str, port: int) -> str | None:
    text = four_letter_text(host, port, "isro")
    return text if text == "ro" else None
