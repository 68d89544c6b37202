"""SASL in the pure ZooKeeper service: a DIGEST-MD5 exchange over a connection's SASL requests
gives it ("sasl", user), which ``sasl:`` ACLs and the ``auth`` scheme then see; a failure is
AUTH_FAILED and closes the connection; GSSAPI and an ensemble without SASL are refused."""

from __future__ import annotations

from puresasl.client import SASLClient

from tests.core.test_zk_service_core import Harness
from zabray.tree import DataTree
from zabray.zk import ZkService
from zabray.zk import messages as zm

USERS = {"jaasuser": "jaas_password", "super": "super_secret"}
ALL = 31


def _harness(users: dict[str, str] | None = USERS) -> Harness:
    h = Harness()
    h.tree = DataTree(sasl_acls=users is not None)
    h.svc = ZkService(1, h.tree, now_ms=1000, sasl_users=users)
    h.feed(zm.RoleChanged(True, True))
    return h


def _login(h: Harness, conn: int, user: str, password: str, first_xid: int = 10) -> zm.Reply:
    """Drive pure-sasl's client over the service; the last reply."""
    c = SASLClient(host="zk-sasl-md5", service="zookeeper", mechanism="DIGEST-MD5", username=user, password=password)
    challenge, xid = None, first_xid
    while True:
        token = c.process(challenge)
        if c.complete and not token:
            return h.replies(conn)[-1]
        h.feed(zm.ClientRequest(conn, xid, zm.Sasl(token or b"", "nonce-for-conn")))
        rep = h.replies(conn)[-1]
        if rep.error is not None:
            return rep
        challenge, xid = rep.value, xid + 1


def test_a_digest_md5_login_grants_the_sasl_id_and_sasl_acls_follow_it() -> None:
    h = _harness()
    h.session(1)
    assert _login(h, 1, "jaasuser", "jaas_password").error is None
    h.feed(zm.ClientRequest(1, 20, zm.WhoAmI()))
    assert ("sasl", "jaasuser") in h.replies(1)[-1].value
    h.feed(zm.ClientRequest(1, 21, zm.Create("/s", b"x", acl=((ALL, "sasl", "jaasuser"),))))
    h.feed(zm.ClientRequest(1, 22, zm.Create("/a", b"x", acl=((ALL, "auth", ""),))))
    h.commit()
    assert [r.error for r in h.replies(1)[-2:]] == [None, None]
    assert h.tree.get_acl("/a")[0] == ((ALL, "sasl", "jaasuser"),)  # "auth" expands to the sasl id
    h.session(2)  # another client, not logged in
    h.feed(zm.ClientRequest(2, 5, zm.GetData("/s")))
    assert h.replies(2)[-1].error.code == "NO_AUTH"
    h.session(3)  # ZooKeeper's rule: the SASL user named "super" passes every sasl: entry
    assert _login(h, 3, "super", "super_secret").error is None
    h.feed(zm.ClientRequest(3, 30, zm.GetData("/s")))
    assert h.replies(3)[-1].value[0] == b"x"
    h.feed(zm.ClientRequest(1, 23, zm.Create("/bad", b"", acl=((ALL, "sasl", "a@b@c"),))))
    h.feed(zm.ClientRequest(1, 24, zm.Create("/ok", b"", acl=((ALL, "sasl", "zk/host@REALM"),))))
    h.commit()
    assert [r.error and r.error.code for r in h.replies(1)[-2:]] == ["INVALID_ACL", None]  # Kerberos names


def test_a_failed_login_is_auth_failed_and_closes_the_connection() -> None:
    h = _harness()
    h.session(1)
    rep = _login(h, 1, "jaasuser", "hunter2")
    assert rep.error is not None and rep.error.code == "AUTH_FAILED"
    assert "jaas_password" not in rep.error.message and "hunter2" not in rep.error.message
    assert zm.CloseConn(1) in h.out


def test_gssapi_and_an_ensemble_without_sasl_are_refused_clearly() -> None:
    h = _harness()
    h.session(1)
    h.feed(zm.ClientRequest(1, 10, zm.Sasl(b"\x60\x82\x01\x00krb5", "n")))
    rep = h.replies(1)[-1]
    assert rep.error.code == "AUTH_FAILED" and "GSSAPI" in rep.error.message
    h = _harness(None)
    h.session(1)
    h.feed(zm.ClientRequest(1, 10, zm.Sasl(b"", "n")))
    rep = h.replies(1)[-1]
    assert rep.error.code == "AUTH_FAILED" and "zk_sasl_jaas_file" in rep.error.message
    h.feed(zm.ClientRequest(2, 1, zm.Connect(0, 4000, 0)))
    h.commit()
    h.feed(zm.ClientRequest(2, 2, zm.Create("/s", b"", acl=((ALL, "sasl", "jaasuser"),))))
    h.commit()
    assert h.replies(2)[-1].error.code == "INVALID_ACL"  # no SASL: ZooKeeper knows no sasl scheme
