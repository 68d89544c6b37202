"""The pure client session (``zabray.zk.client_session.ClientSession``) driven by hand."""

from __future__ import annotations

from typing import Any

from zabray.zk import client_session as cs
from zabray.zk import messages as zm


class Client:
    def __init__(self, replicas: tuple[int, ...] = (1, 2, 3), timeout_ms: int = 3000) -> None:
        self.core = cs.ClientSession(list(replicas), timeout_ms, now_ms=0)
        self.out: list[cs.ClientAction] = list(self.core.start())

    def feed(self, event: cs.ClientEvent) -> list[cs.ClientAction]:
        acts = self.core.step(event)
        self.out += acts
        return acts

    def last(self, kind: type) -> Any:
        return [a for a in self.out if type(a) is kind][-1]

    def connect(self, session_id: int = 0x77, zxid: int = 5) -> int:
        dial = self.last(cs.Dial)
        self.feed(cs.Dialed(dial.conn))
        req = self.last(cs.SendOp)
        assert type(req.op) is zm.Connect
        self.feed(cs.Received(dial.conn, zm.Reply(0, req.xid, zxid, None, (session_id, 3000))))
        assert self.core.conn == dial.conn
        return int(dial.conn)

    def sends(self, conn: int) -> list[cs.SendOp]:
        return [a for a in self.out if type(a) is cs.SendOp and a.conn == conn and type(a.op) is not zm.Ping]

    def completed(self) -> list[cs.Completed]:
        return [a for a in self.out if type(a) is cs.Completed]


def reply(c: Client, conn: int, send: cs.SendOp, zxid: int, error: str | None = None, value: Any = None) -> None:
    c.feed(cs.Received(conn, zm.Reply(0, send.xid, zxid, zm.ErrorInfo(error, "x") if error else None, value)))


def test_calls_are_pipelined_and_completed_in_issue_order() -> None:
    c = Client()
    conn = c.connect()
    for i in range(3):
        c.feed(cs.Call(i + 1, zm.Create(f"/n{i}")))
    sends = c.sends(conn)[1:]
    assert [type(s.op) for s in sends] == [zm.Create] * 3  # all three in flight at once
    for i, s in enumerate(sends):
        reply(c, conn, s, 10 + i, value=f"/n{i}")
    assert [d.call_id for d in c.completed()] == [1, 2, 3] and c.core.last_zxid == 12


def test_a_refusal_is_retried_in_order_on_the_next_connection() -> None:
    c = Client()
    conn = c.connect()
    c.feed(cs.Call(1, zm.Create("/a")))
    c.feed(cs.Call(2, zm.Create("/b")))
    c.feed(cs.Call(3, zm.GetData("/a")))
    a, b, _ = c.sends(conn)[1:]
    reply(c, conn, a, 6, value="/a")
    reply(c, conn, b, 6, error="NOT_READY")
    assert cs.Hangup(conn) in c.out and c.core.conn is None
    assert [d.call_id for d in c.completed()] == [1]  # 2 and 3 wait, certainly not applied
    conn2 = c.connect()
    assert conn2 != conn
    again = c.sends(conn2)[1:]
    assert [s.op for s in again] == [zm.Create("/b"), zm.GetData("/a")]
    reply(c, conn2, again[0], 7, value="/b")
    reply(c, conn2, again[1], 7, value=(b"", None))
    assert [d.call_id for d in c.completed()] == [1, 2, 3] and all(d.error is None for d in c.completed())


def test_a_lost_connection_fails_what_was_in_flight_as_uncertain_and_the_session_moves() -> None:
    c = Client()
    conn = c.connect()
    c.feed(cs.Call(1, zm.SetData("/a", b"1")))
    c.feed(cs.ConnLost(conn))
    done = c.completed()
    assert len(done) == 1 and done[0].error is not None and done[0].error.code == "CONNECTION_LOSS"
    c.feed(cs.Call(2, zm.GetData("/a")))  # queued while disconnected
    dial = c.last(cs.Dial)
    c.feed(cs.Dialed(dial.conn))
    connect = c.last(cs.SendOp).op
    assert connect.session_id == 0x77 and connect.last_zxid == 5  # it resumes, no older than it saw
    reply(c, dial.conn, c.last(cs.SendOp), 9, value=(0x77, 3000))
    assert c.core.moves == 1 and c.sends(dial.conn)[-1].op == zm.GetData("/a")


def test_watches_are_re_registered_on_a_move_and_may_fire_before_the_connect_reply() -> None:
    c = Client()
    conn = c.connect()
    c.feed(cs.Call(1, zm.GetData("/w", True), watch=True))
    reply(c, conn, c.sends(conn)[-1], 6, value=(b"", None))
    c.feed(cs.ConnLost(conn))
    dial = c.last(cs.Dial)
    c.feed(cs.Dialed(dial.conn))
    connect = c.last(cs.SendOp)
    assert connect.op.watches == zm.Watches(data=("/w",))
    c.feed(cs.Received(dial.conn, zm.WatchFired(0, "data", "/w", "changed", 8)))
    reply(c, dial.conn, connect, 8, value=(0x77, 3000))
    notices = [a for a in c.out if type(a) is cs.Notice]
    assert len(notices) == 1 and notices[0].calls == (1,) and c.core.events == 1
    c.feed(cs.Received(dial.conn, zm.WatchFired(0, "data", "/w", "changed", 9)))
    assert len([a for a in c.out if type(a) is cs.Notice]) == 1 and c.core.events == 1  # one-shot


def test_a_deleted_path_re_registered_twice_fires_each_watch_once() -> None:
    """A moved session's SetWatches tells a deleted path once for its data watch and once for
    its child watch (as ZooKeeper's server does). The first fires both; the second is for no
    watch and is dropped. ``events`` counts Notices, which is what the shell counts as it
    dispatches them: were it to count notifications, the shell would believe a later watch
    event dispatched before it was, and return a reply ahead of it."""
    c = Client()
    conn = c.connect()
    c.feed(cs.Call(1, zm.GetData("/a", True), watch=True))
    c.feed(cs.Call(2, zm.GetChildren("/a", True, stat=True), watch=True))
    reply(c, conn, c.sends(conn)[-2], 6, value=(b"", None))
    reply(c, conn, c.sends(conn)[-1], 6, value=((), None))
    c.feed(cs.ConnLost(conn))
    dial = c.last(cs.Dial)
    c.feed(cs.Dialed(dial.conn))
    connect = c.last(cs.SendOp)
    assert connect.op.watches == zm.Watches(data=("/a",), child=("/a",))
    c.feed(cs.Received(dial.conn, zm.WatchFired(0, "data", "/a", "deleted", 9)))
    c.feed(cs.Received(dial.conn, zm.WatchFired(0, "child", "/a", "deleted", 9)))
    reply(c, dial.conn, connect, 9, value=(0x77, 3000))
    notices = [(n.kind, n.calls) for n in c.out if type(n) is cs.Notice]
    assert notices == [("data", (1,)), ("child", (2,))]
    assert c.core.events == 2


def test_watches_are_re_registered_from_the_newest_reply_not_the_newest_notification() -> None:
    """Deleting /a/x fires the watch on /a/x and the child watch on /a: two notifications at one
    zxid. If the connection breaks between them, the session must re-register /a's watch from a
    zxid below the deletion (the newest reply's), or the new replica deems it already told. It
    still refuses replicas behind the notification it did get."""
    c = Client()
    conn = c.connect(zxid=5)
    c.feed(cs.Call(1, zm.GetData("/a/x", True), watch=True))
    c.feed(cs.Call(2, zm.GetChildren("/a", True, stat=True), watch=True))
    reply(c, conn, c.sends(conn)[-2], 6, value=(b"", None))
    reply(c, conn, c.sends(conn)[-1], 7, value=((), None))
    c.feed(cs.Received(conn, zm.WatchFired(0, "data", "/a/x", "deleted", 9)))
    c.feed(cs.ConnLost(conn))  # /a's child notification, also at 9, never came
    dial = c.last(cs.Dial)
    c.feed(cs.Dialed(dial.conn))
    connect = c.last(cs.SendOp).op
    assert connect.watches == zm.Watches(child=("/a",))
    assert connect.watches_since == 7 and connect.last_zxid == 9


def test_pings_keep_a_quiet_session_alive_and_silence_moves_it() -> None:
    c = Client(timeout_ms=3000)
    conn = c.connect()
    c.feed(cs.ClientTick(1100))
    ping = c.last(cs.SendOp)
    assert type(ping.op) is zm.Ping
    c.feed(cs.ClientTick(1500))
    reply(c, conn, ping, 5)
    c.feed(cs.ClientTick(3400))
    assert c.core.conn == conn
    c.feed(cs.ClientTick(3600))  # nothing heard for two thirds of the timeout
    assert c.core.conn is None and cs.Hangup(conn) in c.out


def test_a_request_never_sent_in_time_is_reported_not_ready() -> None:
    c = Client(replicas=(1,))
    c.feed(cs.Call(1, zm.Create("/a")))
    dial = c.last(cs.Dial)
    c.feed(cs.ConnLost(dial.conn))
    t = 0
    while not c.completed():
        t += 1000
        c.feed(cs.ClientTick(t))
        for d in [a for a in c.out if type(a) is cs.Dial and a.conn > dial.conn]:
            dial = d
            c.feed(cs.ConnLost(d.conn))
    done = c.completed()[0]
    assert done.error is not None and done.error.code == "NOT_READY" and t >= c.core.op_timeout_ms


def test_an_expiry_fails_everything_and_ends_the_session() -> None:
    c = Client()
    conn = c.connect()
    c.feed(cs.Call(1, zm.Exists("/a")))
    c.feed(cs.Received(conn, zm.SessionEnded(0, 0x77, 9)))
    assert c.core.expired and cs.SessionOver(True) in c.out
    assert c.completed()[0].error.code == "SESSION_EXPIRED"  # type: ignore[union-attr]
    c.feed(cs.Call(2, zm.Exists("/a")))
    assert c.completed()[-1].error.code == "SESSION_EXPIRED"  # type: ignore[union-attr]


def test_an_eager_client_sends_calls_behind_its_connect_and_loses_them_with_it() -> None:
    """``eager`` (the Java client's Netty socket): calls issued before the session exists go out
    right behind the connect; if that connect fails, their fate is unknown: CONNECTION_LOSS."""
    c = Client()
    c.core.eager = True
    c.feed(cs.Call(1, zm.Create("/a")))
    c.feed(cs.Call(2, zm.GetData("/a")))
    dial = c.last(cs.Dial)
    c.feed(cs.Dialed(dial.conn))
    sent = c.sends(dial.conn)
    assert [type(s.op) for s in sent] == [zm.Connect, zm.Create, zm.GetData]
    c.feed(cs.Received(dial.conn, zm.Reply(0, sent[0].xid, 3, zm.ErrorInfo("NOT_READY", "x"), None)))
    assert [(d.call_id, d.error.code if d.error else None) for d in c.completed()] == [
        (1, "CONNECTION_LOSS"), (2, "CONNECTION_LOSS")]
    # The next connect succeeds: later calls go out behind it and complete in order.
    c.feed(cs.Call(3, zm.Create("/b")))
    dial = c.last(cs.Dial)
    c.feed(cs.Dialed(dial.conn))
    connect, create = c.sends(dial.conn)
    c.feed(cs.Received(dial.conn, zm.Reply(0, connect.xid, 4, None, (0x77, 3000))))
    reply(c, dial.conn, create, 5, value="/b")
    assert [d.call_id for d in c.completed()] == [1, 2, 3] and c.completed()[-1].error is None
