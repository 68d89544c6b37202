"""The ZooKeeper service's properties, checked as the simulator runs (on top of Zab's, in
``zabray.sim.checker``).

A reference ``DataTree`` applies the global delivery order ``G`` as it grows; from it the checker
knows, for every zxid, the tree digest, each txn's result, and each path's state and the watch
events it fires. Against that:
- every replica's tree equals the reference tree at the replica's last zxid;
- each session's calls complete in issue order, and its writes take effect in that order: a
  write reported (ok or a txn error) is the session's own txn at the zxid it was told;
- a read shows exactly the reference state at its zxid, never older than what the session saw;
- a watch fires at most once, only after a change it watches, and before any reply that shows
  that change (so none is lost when the session moves);
- ephemerals vanish exactly when their session's close commits; sequential names never repeat;
- a request reported NOT_READY (certainly not applied) never shows up in the history.
Read-only sessions (a replica cut off from its quorum, ``zabray.zk.read_only``) are held to the
same read rules, so one never sees a write that was not committed, nor state older than what it
already saw (its own acknowledged writes included); on top, only a read-only connection may
answer NOT_READ_ONLY, such a write never shows up in the history, and a client may change
sessions only away from a local (read-only) one.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid, fmt
from zabray.sim.checker import Checker
from zabray.tree import DataTree, EventType, OpCode, Result, Stat
from zabray.zk.messages import (
    Check,
    ClientOp,
    CloseSession,
    Create,
    Delete,
    ErrorInfo,
    Exists,
    GetChildren,
    GetData,
    Multi,
    SetData,
    Sync,
)

_WRITES = (Create, Delete, SetData, Check, Multi, Sync, CloseSession)
_DATA = (EventType.CREATED, EventType.DELETED, EventType.CHANGED)
_CHILD = (EventType.CHILD, EventType.DELETED)
# Errors a write may get without a txn: refused, fate unknown, or the session is gone.
_NO_TXN = ("NOT_READY", "NOT_READ_ONLY", "CONNECTION_LOSS", "SESSION_EXPIRED")
_REFUSED = ("NOT_READY", "NOT_READ_ONLY")  # certainly not applied


@dataclass
class _View:
    """What the checker knows of one client's session."""

    session_id: int = 0
    last_call: int = 0
    max_zxid: int = 0
    last_write: int = 0
    regs: dict[tuple[str, str], int] = field(default_factory=dict)  # watch -> zxid it was set at
    gone: bool = False
    read_only: bool = False  # the session's current connection is read-only
    local: bool = False  # the session is local to a read-only replica (the quorum never had it)


@dataclass(frozen=True, slots=True)
class _PathState:
    zxid: int
    stat: Stat | None
    data: bytes | None
    kids: tuple[str, ...]


class ZkChecker:
    def __init__(self, base: Checker) -> None:
        self.base = base
        self.ref = DataTree()
        self.done = 0  # G entries applied to the reference tree
        self.digests: dict[int, str] = {0: self.ref.digest()}
        self.results: dict[int, Result] = {}
        # A fresh tree is not empty: ZooKeeper's /zookeeper subtree is there from the start.
        self.hist: dict[str, list[_PathState]] = {}
        todo = ["/"]
        while todo:
            p = todo.pop()
            kids = tuple(self.ref.children(p))
            data, stat = self.ref.get(p)
            self.hist[p] = [_PathState(0, stat, data, kids)]
            todo += [("" if p == "/" else p) + "/" + k for k in kids]
        self.fires: dict[tuple[str, str], list[int]] = {}
        self.applied_tags: set[bytes] = set()
        self.refused_tags: dict[bytes, str] = {}
        self.seq_paths: set[str] = set()
        self.views: dict[int, _View] = {}
        self.checked: dict[int, int] = {}  # replica -> last zxid whose tree was compared

    def _fail(self, prop: str, detail: str) -> None:
        self.base._fail(prop, detail)

    # -- the reference tree ----------------------------------------------------------------------

    def advance(self) -> None:
        G = self.base.G
        ref = self.ref
        while self.done < len(G):
            z = G[self.done][0]
            self.done += 1
            result = ref.apply(Txn(Zxid(z), self.base.G_values[z]))
            if result is None:
                continue
            self.results[z] = result
            self.digests[z] = ref.digest()
            for ch in result.changes:
                p = ch.path
                stat = ref.exists(p)
                data = ref.get(p)[0] if stat is not None else b""
                kids = tuple(ref.children(p)) if stat is not None else ()
                self.hist.setdefault(p, []).append(_PathState(z, stat, data, kids))
                if ch.event in _DATA:
                    self.fires.setdefault(("data", p), []).append(z)
                if ch.event in _CHILD:
                    self.fires.setdefault(("child", p), []).append(z)
                if ch.event in (EventType.CREATED, EventType.CHANGED) and data:
                    self.applied_tags.add(data)
                    why = self.refused_tags.get(data)
                    if why is not None:
                        self._fail("refusal", f"{why} was refused (NOT_READY/NOT_READ_ONLY) yet applied at {fmt(z)}")
                if ch.event is EventType.CREATED and stat is not None and stat.ephemeral_owner and \
                        stat.ephemeral_owner not in ref.sessions():
                    self._fail("ephemerals", f"{p} created at {fmt(z)} for session "
                               f"0x{stat.ephemeral_owner:x}, which is not live")
            if result.ok and result.op == OpCode.CLOSE_SESSION:
                sid = result.session_id
                left = ref.ephemerals(sid)
                if left or sid in ref.sessions():
                    self._fail("ephemerals", f"session 0x{sid:x} closed at {fmt(z)} but keeps {left}")

    def replica_tree(self, replica: int, tree: DataTree) -> None:
        """``replica``'s tree must equal the reference tree at its last zxid."""
        z = tree.last_zxid
        if self.checked.get(replica) == z:
            return
        self.checked[replica] = z
        self.advance()
        want = self.digests.get(z)
        if want is None:
            self._fail("tree agreement", f"replica {replica}'s tree is at {fmt(z)}, which nobody delivered")
        elif tree.digest() != want:
            self._fail("tree agreement", f"replica {replica}'s tree at {fmt(z)} differs from the committed prefix")

    def replica_restarted(self, replica: int) -> None:
        self.checked.pop(replica, None)

    def _state(self, path: str, z: int) -> _PathState | None:
        h = self.hist.get(path)
        if not h:
            return None
        i = bisect_right([s.zxid for s in h], z)
        return h[i - 1] if i else None

    # -- sessions ---------------------------------------------------------------------------------

    def view(self, client: int) -> _View:
        v = self.views.get(client)
        if v is None:
            v = self.views[client] = _View()
        return v

    def connected(self, client: int, session_id: int, read_only: bool = False) -> None:
        self.advance()
        v = self.view(client)
        if v.session_id and v.session_id != session_id and not v.local:
            self._fail("sessions", f"client {client}'s session changed from 0x{v.session_id:x} to 0x{session_id:x}")
        v.session_id = session_id
        v.read_only = read_only
        v.local = read_only and self.ref.session_timeout(session_id) is None

    def session_over(self, client: int) -> None:
        v = self.view(client)
        v.gone = True
        v.regs.clear()

    def completed(self, client: int, call_id: int, op: ClientOp, watch: bool, tag: bytes,
                  zxid: int, error: ErrorInfo | None, value: Any) -> None:
        self.advance()
        v = self.view(client)
        what = f"client {client} call {call_id} ({type(op).__name__})"
        if call_id <= v.last_call:
            self._fail("session order", f"{what} completed after call {v.last_call}")
        v.last_call = call_id
        if error is not None and error.code in _REFUSED:
            if error.code == "NOT_READ_ONLY" and not v.read_only:
                self._fail("read-only", f"{what} was told NOT_READ_ONLY on a read-write connection")
            if tag:
                if tag in self.applied_tags:
                    self._fail("refusal", f"{what} was reported {error.code} yet applied")
                self.refused_tags[tag] = what
            return
        if error is not None and error.code == "SESSION_EXPIRED" and v.session_id:
            # Told only once the session's close is committed (the replica delivered it first).
            if self.ref.session_timeout(v.session_id) is not None:
                self._fail("sessions", f"{what} was told SESSION_EXPIRED while session 0x{v.session_id:x} is live")
        if type(op) is CloseSession and v.local and error is None:
            return  # a local session closes on its replica alone: nothing is committed
        if isinstance(op, _WRITES):
            self._write(v, what, op, zxid, error, value)
        elif error is None or error.code == "NO_NODE":
            self._read(v, what, op, zxid, error, value)
        if error is None or error.code == "NO_NODE" or isinstance(op, _WRITES) and error.code not in _NO_TXN:
            if type(op) is not CloseSession:  # a closed session hears nothing, not even its own close
                self._watches_before(v, what, zxid)
            v.max_zxid = max(v.max_zxid, zxid)
            if error is None and watch and isinstance(op, (GetData, Exists, GetChildren)):
                key = ("child" if type(op) is GetChildren else "data", op.path)
                v.regs.setdefault(key, zxid)

    def _write(self, v: _View, what: str, op: ClientOp, zxid: int, error: ErrorInfo | None, value: Any) -> None:
        if error is not None and error.code in _NO_TXN:
            return
        res = self.results.get(zxid)
        if res is None or res.session_id != v.session_id:
            self._fail("acknowledged", f"{what} told {'ok' if error is None else error.code} at {fmt(zxid)}, "
                       f"which is not this session's txn in the committed history")
            return
        if zxid <= v.last_write:
            self._fail("session order", f"{what} took effect at {fmt(zxid)}, after a later one at {fmt(v.last_write)}")
        v.last_write = zxid
        if error is None:
            if not res.ok or res.value != value:
                self._fail("acknowledged", f"{what} told {value!r:.60} at {fmt(zxid)}, the txn did {res.value!r:.60}")
            if type(op) is Create and op.sequential:
                if value in self.seq_paths:
                    self._fail("sequence", f"sequential name {value} given twice")
                self.seq_paths.add(value)
        elif res.ok or res.error is None or res.error.code != error.code:
            self._fail("acknowledged", f"{what} told {error.code} at {fmt(zxid)}, the txn says {res.error}")

    def _read(self, v: _View, what: str, op: ClientOp, zxid: int, error: ErrorInfo | None, value: Any) -> None:
        if zxid < v.max_zxid:
            self._fail("read freshness", f"{what} read at {fmt(zxid)} after the session saw {fmt(v.max_zxid)}")
        path = op.path  # type: ignore[union-attr]
        st = self._state(path, zxid)
        stat = st.stat if st is not None else None
        if error is not None:
            if stat is not None:
                self._fail("read", f"{what} got NO_NODE for {path} at {fmt(zxid)}, where it exists")
            return
        if type(op) is Exists:
            ok = value == stat
        elif stat is None or st is None:
            ok = False
        elif type(op) is GetData:
            ok = tuple(value) == (st.data, stat)
        elif op.stat:  # type: ignore[union-attr]
            ok = (tuple(value[0]), value[1]) == (st.kids, stat)
        else:
            ok = tuple(value) == st.kids
        if not ok:
            self._fail("read", f"{what} of {path} at {fmt(zxid)} returned {value!r:.80}, "
                       f"the committed state there is {st!r:.80}")

    def _watched(self, key: tuple[str, str], z: int) -> tuple[Stat | None, int]:
        """What a watch looks at, at ``z``: the znode's stat (data/exists watches) or its
        existence and pzxid (child watches)."""
        st = self._state(key[1], z)
        stat = st.stat if st is not None else None
        if key[0] == "child":
            return (None, stat.pzxid) if stat is not None else (None, -1)
        return stat, 0

    def _watches_before(self, v: _View, what: str, zxid: int) -> None:
        """A reply at ``zxid`` must come after every watch whose target differs there from when
        it was set. (A node created and deleted again while the session moved leaves nothing to
        see, and ZooKeeper's SetWatches rightly does not fire for it.)"""
        for key, z0 in v.regs.items():
            zs = self.fires.get(key)
            if not zs or zs[-1] <= z0:
                continue
            i = bisect_right(zs, z0)
            if i < len(zs) and zs[i] <= zxid and self._watched(key, z0) != self._watched(key, zxid):
                self._fail("watch", f"{what} answered at {fmt(zxid)} before the {key[0]} watch on {key[1]} "
                           f"(set at {fmt(z0)}) fired for the change at {fmt(zs[i])}")
                return

    def notice(self, client: int, kind: str, path: str, zxid: int) -> None:
        self.advance()
        v = self.view(client)
        z0 = v.regs.pop((kind, path), None)
        if z0 is None:
            self._fail("watch", f"client {client}'s {kind} watch on {path} fired, but none was set (fired twice?)")
            return
        zs = self.fires.get((kind, path), [])
        i = bisect_right(zs, z0)
        if not (i < len(zs) and zs[i] <= zxid):
            self._fail("watch", f"client {client}'s {kind} watch on {path} (set at {fmt(z0)}) fired at "
                       f"{fmt(zxid)} with no change in between")
        v.max_zxid = max(v.max_zxid, zxid)

    def sessions_gone(self, session_ids: list[int]) -> None:
        """Sessions whose clients vanished long ago: expired, their ephemerals with them."""
        self.advance()
        live = self.ref.sessions()
        for sid in session_ids:
            if sid in live or self.ref.ephemerals(sid):
                self._fail("expiry", f"session 0x{sid:x}, silent for longer than its timeout, is still live "
                           f"with ephemerals {self.ref.ephemerals(sid)}")
                return
