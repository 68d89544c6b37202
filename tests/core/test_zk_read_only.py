"""Read-only mode in the pure ZooKeeper service: a replica that has looked for a leader for the
grace period serves read-only sessions from its tree (reads yes, writes NOT_READ_ONLY), refuses
clients that did not ask for read-only and sessions that saw more than it has, and closes every
connection the moment it follows or leads again."""

from __future__ import annotations

from tests.core.test_zk_service_core import Harness
from zabray.tree import DataTree
from zabray.zk import ZkService
from zabray.zk import messages as zm

GRACE = 2000


def _partitioned(enabled: bool = True) -> tuple[Harness, int]:
    """A replica that served (a session made /a = "x"), then lost its quorum and is looking.
    Returns it and the global session."""
    h = Harness()
    h.tree = DataTree()
    h.svc = ZkService(1, h.tree, now_ms=1000, read_only_after_ms=GRACE if enabled else None)
    h.feed(zm.RoleChanged(True, True))
    sid = h.session(1)
    h.feed(zm.ClientRequest(1, 2, zm.Create("/a", b"x")))
    h.commit()
    h.feed(zm.RoleChanged(False, False, True))  # lost the quorum: looking
    assert zm.CloseConn(1) in h.out  # its sessions are dropped, as ZooKeeper drops them
    return h, sid


def _connect(h: Harness, conn: int, read_only: bool = True, session: int = 0, last_zxid: int = 0) -> zm.Reply:
    h.feed(zm.ClientRequest(conn, 1, zm.Connect(session, 4000, last_zxid, read_only=read_only)))
    return h.replies(conn)[-1]


def test_after_the_grace_period_read_only_clients_may_read_but_not_write() -> None:
    h, _ = _partitioned()
    h.feed(zm.ServiceTick(1000 + GRACE - 1))
    assert _connect(h, 2).error.code == "NOT_READY"  # still in the grace period
    h.feed(zm.ServiceTick(1000 + GRACE))
    assert h.svc.read_only_serving
    assert _connect(h, 3, read_only=False).error.code == "NOT_READY"  # did not ask for read-only
    rep = _connect(h, 4)
    assert rep.error is None and rep.value[2] is True  # a read-only session, local to this replica
    assert rep.value[0] not in h.tree.sessions()
    h.feed(zm.ClientRequest(4, 2, zm.GetData("/a")))
    h.feed(zm.ClientRequest(4, 3, zm.GetChildren("/")))
    assert h.replies(4)[-2].value[0] == b"x" and "a" in h.replies(4)[-1].value
    writes = [zm.Create("/b", b""), zm.SetData("/a", b"y", -1), zm.Delete("/a", -1), zm.Sync("/"),
              zm.Check("/a", 0), zm.Multi((zm.Create("/c", b""),)), zm.SetACL("/a", ((31, "world", "anyone"),), -1)]
    for i, w in enumerate(writes):
        h.feed(zm.ClientRequest(4, 10 + i, w))
    assert [r.error.code for r in h.replies(4)[-len(writes):]] == ["NOT_READ_ONLY"] * len(writes)
    assert not h.held  # nothing reached the core
    assert h.tree.get("/a")[0] == b"x"


def test_sessions_resume_only_if_known_and_never_behind() -> None:
    h, sid = _partitioned()
    h.feed(zm.ServiceTick(1000 + GRACE))
    rep = _connect(h, 2, session=sid, last_zxid=h.tree.last_zxid)
    assert rep.error is None and rep.value[:1] == (sid,) and rep.value[2] is True  # a global session goes on
    assert _connect(h, 3, session=0x7777).error.code == "SESSION_EXPIRED"
    assert _connect(h, 4, last_zxid=h.tree.last_zxid + 1).error.code == "BEHIND"  # it saw more: elsewhere


def test_a_silent_local_session_expires_and_one_that_pings_lives() -> None:
    h, _ = _partitioned()
    h.feed(zm.ServiceTick(1000 + GRACE))
    quiet = _connect(h, 2).value[0]
    busy = _connect(h, 3).value[0]
    for t in range(1000 + GRACE + 1000, 1000 + GRACE + 6000, 1000):
        h.feed(zm.ClientRequest(3, -2, zm.Ping()))
        h.feed(zm.ServiceTick(t))
    assert zm.SessionEnded(2, quiet, h.tree.last_zxid) in h.out
    assert busy in h.svc.ro.local and quiet not in h.svc.ro.local
    h.feed(zm.ClientRequest(3, 5, zm.CloseSession()))  # a local session may close itself
    assert h.replies(3)[-1].error is None and busy not in h.svc.ro.local


def test_following_again_closes_every_read_only_connection() -> None:
    h, sid = _partitioned()
    h.feed(zm.ServiceTick(1000 + GRACE))
    local = _connect(h, 2).value[0]
    h.feed(zm.RoleChanged(False, False, False))  # found a leader: syncing with it
    assert zm.CloseConn(2) in h.out and not h.svc.read_only_serving and not h.svc.ro.local
    assert _connect(h, 3).error.code == "NOT_READY"
    h.feed(zm.RoleChanged(True, False))  # serving again: the local session is unknown here
    assert _connect(h, 4, session=local).error.code == "SESSION_EXPIRED"
    assert _connect(h, 5, session=sid).error is None  # the global one is not


def test_read_only_mode_is_off_unless_configured() -> None:
    h, _ = _partitioned(enabled=False)
    h.feed(zm.ServiceTick(1000 + 10 * GRACE))
    assert not h.svc.read_only_serving and _connect(h, 2).error.code == "NOT_READY"
    h, _ = _partitioned()
    h.feed(zm.RoleChanged(False, False, False))  # not looking (syncing with a leader): no grace runs
    h.feed(zm.ServiceTick(1000 + 10 * GRACE))
    assert not h.svc.read_only_serving
