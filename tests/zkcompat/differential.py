"""A differential harness: one seeded sequence of kazoo operations against two ZooKeeper servers.

The oracle is Apache ZooKeeper 3.8; the candidate is whatever speaks ZooKeeper's protocol
(zabray, or a second Apache ZooKeeper to prove the harness itself raises no false alarm).
Every answer is normalised before comparing, as etcd's zetcd cross-checker does:

- zxids (czxid, mzxid, pzxid) become their rank among all zxids the run observed, so two
  servers agree when they order their transactions alike, whatever numbers they use;
- times are reduced to ``ctime == mtime`` (wall clocks differ);
- ephemeral owners become the index of the session that owns them;
- errors become ZooKeeper's error names; children are sorted.

Watch events are recorded per session; after every operation every session syncs and drains
kazoo's callback queue, so each event is attributed to the operation that fired it.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.states import Callback, ZnodeStat
from kazoo.security import ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, make_digest_acl

PATHS = ["/d", "/d/a", "/d/b", "/d/a/x", "/d/a/y", "/d/c", "/e"]
DATA = [b"", b"v", b"value-2", b"x" * 100]
VERSIONS = [-1, -1, 0, 1, 2, 5]
USERS = [("alice", "pw1"), ("bob", "pw2")]


ACL_CHOICES: list[list[ACL] | None] = [
    None,  # kazoo's default: open
    list(OPEN_ACL_UNSAFE),
    list(READ_ACL_UNSAFE),
    [make_digest_acl("alice", "pw1", all=True)],
    [make_digest_acl("bob", "pw2", read=True, write=True), make_digest_acl("alice", "pw1", all=True)],
]


@dataclass(frozen=True)
class Op:
    """One step: ``kind`` and its arguments, run on session ``s``."""

    s: int
    kind: str
    args: tuple[Any, ...]


def generate(seed: int, n: int, sessions: int = 2) -> list[Op]:
    """The seeded operation sequence (independent of results, so both servers get the same)."""
    rng = random.Random(seed)
    ops: list[Op] = []
    kinds = ["create"] * 6 + ["set"] * 4 + ["delete"] * 3 + ["get"] * 3 + ["exists"] * 2 + [
        "children"] * 2 + ["multi"] * 2 + ["get_acls", "set_acls", "auth", "auth", "sync"]
    for _ in range(n):
        s = rng.randrange(sessions)
        k = rng.choice(kinds)
        p = rng.choice(PATHS)
        if k == "create":
            args: tuple[Any, ...] = (p, rng.choice(DATA), _acl_key(rng, p), rng.random() < 0.3,
                                     rng.random() < 0.3, rng.random() < 0.5)
        elif k == "set":
            args = (p, rng.choice(DATA), rng.choice(VERSIONS))
        elif k == "delete":
            args = (p, rng.choice(VERSIONS))
        elif k in ("get", "exists", "children"):
            args = (p, rng.random() < 0.5)
        elif k == "multi":
            sub = []
            for _ in range(rng.randint(2, 4)):
                q = rng.choice(PATHS)
                sub.append(rng.choice([("create", q, rng.choice(DATA)), ("delete", q, rng.choice(VERSIONS)),
                                       ("set", q, rng.choice(DATA), rng.choice(VERSIONS)),
                                       ("check", q, rng.choice(VERSIONS))]))
            args = (tuple(sub),)
        elif k == "get_acls":
            args = (p,)
        elif k == "set_acls":
            args = (p, _acl_key(rng, p), rng.choice(VERSIONS))
        elif k == "auth":
            args = rng.choice(USERS)
        else:
            args = (p,)
        if rng.random() < 0.02:
            k, args = "reopen", ()
        ops.append(Op(s, k, args))
    return ops


def _acl_key(rng: random.Random, path: str) -> int:
    """Mostly open; read-only only on leaves, so no subtree is locked for the rest of the run."""
    leaf = path.count("/") >= 3 or path == "/e"
    return rng.choices(range(len(ACL_CHOICES)), weights=[10, 3, 2 if leaf else 0, 3, 3])[0]


def _acl_list(key: int) -> list[ACL] | None:
    return ACL_CHOICES[key]


@dataclass
class _Session:
    client: KazooClient
    index: int
    events: list[tuple[str, str]] = field(default_factory=list)


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
        c.start(timeout=self.timeout)
        self.owners[c.client_id[0]] = index
        return _Session(c, index)

    def close(self) -> None:
        for s in self.sessions:
            s.client.stop()
            s.client.close()

    def _watch(self, sess: _Session) -> Any:
        def fire(ev: Any) -> None:
            sess.events.append((ev.type, ev.path))
        return fire

    def _drain(self) -> list[list[tuple[str, str]]]:
        out = []
        for sess in self.sessions:
            sess.client.sync("/")
            done = threading.Event()
            sess.client.handler.dispatch_callback(Callback("drain", done.set, ()))
            if not done.wait(self.timeout):
                raise TimeoutError("kazoo's callback queue did not drain")
            out.append(sess.events)
            sess.events = []
        return out

    def run(self, ops: list[Op]) -> list[Any]:
        """One normalisable record per op: (answer, events seen by each session after it)."""
        out = []
        for op in ops:
            out.append((self._one(op), self._drain()))
        return out

    def _one(self, op: Op) -> Any:
        sess = self.sessions[op.s]
        c = sess.client
        a = op.args
        try:
            match op.kind:
                case "create":
                    path, data, acl, eph, seq, with_stat = a
                    r = c.create(path, data, acl=_acl_list(acl), ephemeral=eph, sequence=seq, include_data=with_stat)
                    return ("ok", r)
                case "set":
                    return ("ok", c.set(a[0], a[1], version=a[2]))
                case "delete":
                    return ("ok", c.delete(a[0], version=a[1]))
                case "get":
                    return ("ok", c.get(a[0], watch=self._watch(sess) if a[1] else None))
                case "exists":
                    return ("ok", c.exists(a[0], watch=self._watch(sess) if a[1] else None))
                case "children":
                    return ("ok", sorted(c.get_children(a[0], watch=self._watch(sess) if a[1] else None)))
                case "multi":
                    t = c.transaction()
                    for sub in a[0]:
                        match sub:
                            case ("create", q, d):
                                t.create(q, d)
                            case ("delete", q, v):
                                t.delete(q, version=v)
                            case ("set", q, d, v):
                                t.set_data(q, d, version=v)
                            case ("check", q, v):
                                t.check(q, v)
                    return ("ok", t.commit())
                case "get_acls":
                    return ("ok", c.get_acls(a[0]))
                case "set_acls":
                    return ("ok", c.set_acls(a[0], _acl_list(a[1]) or list(OPEN_ACL_UNSAFE), version=a[2]))
                case "auth":
                    c.add_auth("digest", f"{a[0]}:{a[1]}")
                    return ("ok", None)
                case "sync":
                    return ("ok", c.sync(a[0]))
                case "reopen":
                    c.stop()
                    c.close()
                    self.sessions[op.s] = self._open(self.next_index)
                    self.next_index += 1
                    return ("ok", None)
        except KazooException as e:
            return ("error", type(e).__name__)
        raise AssertionError(f"unknown op {op.kind}")


def normalise(records: list[Any], owners: dict[int, int]) -> list[Any]:
    """Replace zxids by their rank among all observed zxids, times by ctime==mtime, owners by index."""
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
            return ("stat", rank[x.czxid], rank[x.mzxid], rank[x.pzxid], x.ctime == x.mtime, x.version,
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
