"""The pure ZooKeeper service (``zabray.zk.ZkService``) driven by hand: one replica whose
"core" commits every submitted request at once, so each test controls exactly when."""

from __future__ import annotations

from typing import Any

from zabray.protocol.messages import Txn
from zabray.tree import DataTree
from zabray.zk import ZkService
from zabray.zk import messages as zm


class Harness:
    def __init__(self, leading: bool = True) -> None:
        self.tree = DataTree()
        self.svc = ZkService(1, self.tree, now_ms=1000)
        self.zxid = 0
        self.held: list[zm.SubmitTxn] = []  # submitted, not yet committed
        self.out: list[zm.ServiceAction] = []
        self.feed(zm.RoleChanged(True, leading))

    def feed(self, event: zm.ServiceEvent) -> list[zm.ServiceAction]:
        acts = self.svc.step(event)
        self.out += acts
        self.held += [a for a in acts if type(a) is zm.SubmitTxn]
        return acts

    def commit(self, n: int | None = None) -> None:
        """Commit the first ``n`` held requests in one core step (all by default)."""
        batch, self.held = self.held[:n], self.held[len(self.held[:n]):] if n is not None else []
        results = []
        for a in batch:
            self.zxid += 1
            value = self.tree.prepare(a.request, self.zxid)
            results.append((a.rid, self.zxid, self.tree.apply(Txn(self.zxid, value))))
        for _, _, r in results:
            self.feed(zm.TxnDelivered(r))
        for rid, z, r in results:
            self.feed(zm.TxnCommitted(rid, z, r))
        self.feed(zm.StepEnd())

    def session(self, conn: int = 1) -> int:
        self.feed(zm.ClientRequest(conn, 1, zm.Connect(0, 4000, 0)))
        self.commit()
        rep = self.replies(conn)[-1]
        assert rep.error is None
        return int(rep.value[0])

    def replies(self, conn: int) -> list[zm.Reply]:
        return [a for a in self.out if type(a) is zm.Reply and a.conn == conn]

    def sent(self, conn: int) -> list[Any]:
        return [a for a in self.out if getattr(a, "conn", None) == conn]


def test_a_read_behind_a_write_waits_for_it_and_replies_leave_in_issue_order() -> None:
    h = Harness()
    h.session()
    h.feed(zm.ClientRequest(1, 2, zm.Create("/a", b"x")))
    h.feed(zm.ClientRequest(1, 3, zm.GetData("/a")))
    assert [r.xid for r in h.replies(1)] == [1]  # the read waits behind the write
    h.commit()
    reps = h.replies(1)
    assert [r.xid for r in reps] == [1, 2, 3]
    assert reps[1].value == "/a" and reps[2].value[0] == b"x" and reps[2].zxid == reps[1].zxid


def test_a_write_behind_a_read_is_held_until_the_read_ran() -> None:
    h = Harness()
    h.session()
    h.feed(zm.ClientRequest(1, 2, zm.Create("/a", b"x")))
    h.feed(zm.ClientRequest(1, 3, zm.Exists("/a")))
    h.feed(zm.ClientRequest(1, 4, zm.Delete("/a")))
    assert len(h.held) == 1  # the delete is not submitted while the read waits
    h.commit()
    assert len(h.held) == 1
    h.commit()
    reps = h.replies(1)
    assert [r.xid for r in reps] == [1, 2, 3, 4]
    assert reps[2].value is not None and reps[3].error is None  # the read saw /a before the delete


def test_a_watch_fires_once_and_before_the_reply_to_a_later_read() -> None:
    h = Harness()
    h.session(1)
    h.session(2)
    h.feed(zm.ClientRequest(1, 2, zm.Exists("/w", watch=True)))
    h.feed(zm.ClientRequest(2, 2, zm.Create("/w", b"1")))
    h.commit()
    h.feed(zm.ClientRequest(1, 3, zm.GetData("/w")))
    h.feed(zm.ClientRequest(2, 3, zm.SetData("/w", b"2")))
    h.commit()
    seq = [(type(a).__name__, getattr(a, "xid", None)) for a in h.sent(1)]
    fired = [a for a in h.sent(1) if type(a) is zm.WatchFired]
    assert len(fired) == 1 and fired[0].event == "created" and fired[0].path == "/w"
    assert seq.index(("WatchFired", None)) < seq.index(("Reply", 3))


def test_a_refused_write_refuses_everything_after_it_on_the_connection() -> None:
    h = Harness()
    h.session()
    h.feed(zm.ClientRequest(1, 2, zm.Create("/a")))
    h.feed(zm.ClientRequest(1, 3, zm.Create("/b")))
    first, second = h.held
    h.held = [first]
    h.feed(zm.TxnFailed(second.rid, "no leader is established", uncertain=False))
    h.feed(zm.StepEnd())
    h.feed(zm.ClientRequest(1, 4, zm.GetData("/a")))
    h.commit()
    reps = {r.xid: r for r in h.replies(1)}
    assert reps[2].error is None
    assert reps[3].error is not None and reps[3].error.code == "NOT_READY"
    assert reps[4].error is not None and reps[4].error.code == "NOT_READY"  # nothing overtakes the refusal
    assert not h.held


def test_connects_are_refused_by_a_replica_behind_the_session_or_not_serving() -> None:
    h = Harness()
    sid = h.session()
    h.feed(zm.ClientRequest(2, 1, zm.Connect(sid, 4000, h.zxid + 5)))
    assert h.replies(2)[-1].error.code == "BEHIND"  # type: ignore[union-attr]
    h.feed(zm.RoleChanged(False, False))
    assert zm.CloseConn(1) in h.out  # a replica leaving broadcast drops its sessions' connections
    h.feed(zm.ClientRequest(3, 1, zm.Connect(sid, 4000, 0)))
    assert h.replies(3)[-1].error.code == "NOT_READY"  # type: ignore[union-attr]


def test_moving_session_re_registers_watches_and_missed_changes_fire_at_once() -> None:
    h = Harness()
    sid = h.session(1)
    h.session(2)
    h.feed(zm.ClientRequest(2, 2, zm.Create("/m", b"0")))
    h.commit()
    seen = h.zxid
    h.feed(zm.ConnClosed(1))
    h.feed(zm.ClientRequest(2, 3, zm.SetData("/m", b"1")))
    h.commit()
    h.feed(zm.ClientRequest(3, 1, zm.Connect(sid, 4000, seen, zm.Watches(data=("/m",), exist=("/n",)))))
    fired = [a for a in h.sent(3) if type(a) is zm.WatchFired]
    assert [(f.path, f.event) for f in fired] == [("/m", "changed")]
    h.feed(zm.ClientRequest(2, 4, zm.Create("/n")))
    h.commit()
    fired = [a for a in h.sent(3) if type(a) is zm.WatchFired]
    assert [(f.path, f.event) for f in fired] == [("/m", "changed"), ("/n", "created")]


def test_the_leader_expires_a_silent_session_and_its_ephemerals_with_it() -> None:
    h = Harness()
    quiet = h.session(1)
    busy = h.session(2)
    h.feed(zm.ClientRequest(1, 2, zm.Create("/e", ephemeral=True)))
    h.commit()
    h.feed(zm.ConnClosed(1))
    for t in range(1, 12):  # 5.5 s of ticks; the busy session is heard on every one
        h.feed(zm.SessionsAlive((busy,)))
        h.feed(zm.ServiceTick(1000 + 500 * t))
        h.commit()
    assert quiet not in h.tree.sessions() and busy in h.tree.sessions()
    assert h.tree.exists("/e") is None


def test_a_new_leader_gives_every_live_session_a_full_timeout() -> None:
    h = Harness(leading=False)
    sid = h.session(1)
    h.feed(zm.ServiceTick(100_000))  # a follower never expires anything
    assert not h.held
    h.feed(zm.RoleChanged(True, True))
    h.feed(zm.ServiceTick(103_000))
    assert not h.held
    h.feed(zm.ServiceTick(104_500))
    h.commit()
    assert sid not in h.tree.sessions()


def test_requests_sent_behind_a_connect_wait_for_its_session() -> None:
    """The Java client's Netty socket sends queued requests right behind its ConnectRequest.
    ZooKeeper stops reading until the session exists; here they wait, then run in order."""
    h = Harness()
    h.feed(zm.ClientRequest(1, 0, zm.Connect(0, 4000, 0)))
    h.feed(zm.ClientRequest(1, 2, zm.Create("/a", b"x", ephemeral=True)))
    h.feed(zm.ClientRequest(1, 3, zm.GetData("/a")))
    assert h.replies(1) == [] and len(h.held) == 1  # only the session's creation is submitted
    h.commit()
    reps = h.replies(1)
    assert [r.xid for r in reps] == [0] and reps[0].error is None and len(h.held) == 1
    sid = reps[0].value[0]
    h.commit()
    reps = h.replies(1)
    assert [r.xid for r in reps] == [0, 2, 3] and all(r.error is None for r in reps)
    assert reps[2].value[0] == b"x" and h.tree.get("/a")[1].ephemeral_owner == sid


def test_requests_behind_a_failed_connect_are_answered_as_without_a_session() -> None:
    h = Harness()
    h.feed(zm.ClientRequest(1, 0, zm.Connect(0, 4000, 0)))
    h.feed(zm.ClientRequest(1, 2, zm.GetData("/")))
    (connect,) = h.held
    h.held = []
    h.feed(zm.TxnFailed(connect.rid, "no leader is established", uncertain=False))
    h.feed(zm.StepEnd())
    reps = h.replies(1)
    assert [(r.xid, r.error.code if r.error else None) for r in reps] == [(0, "NOT_READY"), (2, "NOT_READY")]


def test_a_request_with_a_null_field_is_bad_arguments_naming_the_field() -> None:
    # jute encodes null strings: a Create whose path is null, or a GetData of a null path, is the
    # client's mistake, answered BAD_ARGUMENTS as ZooKeeper answers it, before the tree runs.
    h = Harness()
    h.session()
    h.feed(zm.ClientRequest(1, 2, zm.Create(None, b"x")))  # type: ignore[arg-type]
    h.feed(zm.ClientRequest(1, 3, zm.GetData(None)))  # type: ignore[arg-type]
    h.commit()
    bad = [r for r in h.replies(1) if r.xid in (2, 3)]
    assert [(r.xid, r.error.code if r.error else None) for r in bad] == [(2, "BAD_ARGUMENTS"), (3, "BAD_ARGUMENTS")]
    assert all(r.error is not None and "path is NoneType" in r.error.message for r in bad)
    assert "/a" not in h.tree.children("/")


def test_an_exception_inside_the_tree_is_a_bug_not_a_client_error(monkeypatch: Any) -> None:
    # A well-typed request that makes the tree raise is zabray's bug: it leaves the service
    # (the replica's shell logs it with its stack and closes the connection), never a reply.
    from zabray.tree import ops

    def broken(*args: Any, **kwargs: Any) -> bytes:
        raise KeyError("a bug")

    monkeypatch.setattr(ops, "set_data", broken)
    h = Harness()
    h.session()
    try:
        h.feed(zm.ClientRequest(1, 2, zm.SetData("/", b"x", -1)))
    except KeyError:
        pass
    else:
        raise AssertionError("the tree's KeyError was turned into a reply")
    assert not [r for r in h.replies(1) if r.xid == 2]
