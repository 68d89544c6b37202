"""ACLs as ZooKeeper 3.8 enforces them: validation, digest and ip identities, the permission
each operation needs, getACL's redaction, setACL's version. Expected answers were checked
against a live ZooKeeper 3.8 (Debian's package) with a raw client."""

from __future__ import annotations

import pytest
from tree_harness import Leader

from zabray.tree import (
    AuthFailedError,
    BadArgumentsError,
    BadVersionError,
    Check,
    Create,
    InvalidACLError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    OpCode,
    SetData,
    authenticate,
    create,
    delete,
    digest_id,
    multi,
    set_acl,
    set_data,
    zk_code,
)
from zabray.tree.acl import allowed, fixup_acl, ip_matches, redacted

BOB = ("digest", "user:2Om+GBbT2q/tS6pdvACZbbm7/1A=")  # digest of user:pw, as ZooKeeper computed it
IP = ("ip", "127.0.0.1")
SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # super:test


def test_digest_and_authenticate() -> None:
    assert digest_id("user:pw") == BOB[1]
    assert digest_id("x") == "x:" + digest_id("x").split(":", 1)[1]  # no colon: the user is all of it
    assert authenticate("digest", b"user:pw") == (BOB,)
    assert authenticate("digest", b"super:test", super_digest=SUPER_DIGEST) == (("super", ""), ("digest", SUPER_DIGEST))
    with pytest.raises(AuthFailedError):
        authenticate("foo", b"x")
    # ZooKeeper's ip provider grants the connection's own address, whatever was sent; a null
    # digest credential fails (kazoo sends "" as null)
    assert authenticate("ip", b"10.0.0.1", address="127.0.0.1") == (("ip", "127.0.0.1"),)
    assert authenticate("ip", None, address="::1") == (("ip", "::1"),)
    for scheme, cred in (("ip", b"10.0.0.1"), ("digest", None)):  # (no address: not a network connection)
        with pytest.raises(AuthFailedError):
            authenticate(scheme, cred)
    assert zk_code("AUTH_FAILED") == -115 and zk_code("NO_AUTH") == -102 and zk_code("INVALID_ACL") == -114
    assert NoAuthError("x").zk_err == -102 and InvalidACLError("x").zk_err == -114
    assert zk_code("RUNTIME_INCONSISTENCY") == -2 and zk_code("NO_SUCH") == -1  # SYSTEM_ERROR


@pytest.mark.parametrize(
    "acl",
    [
        (),
        ((31, "world", "x"),),
        ((31, "digest", "abc"),),
        ((31, "digest", "a:b:c"),),
        ((31, "digest", "a:"),),
        ((31, "ip", "1.2.3.4/33"),),
        ((31, "ip", "1.2.3"),),
        ((31, "ip", "::1"),),
        ((31, "ip", "1.2.3.256"),),
        ((31, "auth", ""),),  # no digest identity to expand to
        ((31, "super", "x"),),
        ((31, "foo", "x"),),
    ],
)
def test_invalid_acls(acl: tuple) -> None:  # type: ignore[type-arg]
    with pytest.raises(InvalidACLError):
        fixup_acl(acl, (IP,), "/a")


def test_valid_acls_are_deduplicated_and_auth_expanded() -> None:
    # ZooKeeper accepts any perms, drops duplicates, keeps valid digest/ip ids as given
    assert fixup_acl(((0, "world", "anyone"), (0, "world", "anyone")), (), "/a") == ((0, "world", "anyone"),)
    assert fixup_acl(((-1, "digest", "a:b"), (64, "ip", "10.0.0.0/8")), (), "/a") == (
        (-1, "digest", "a:b"),
        (64, "ip", "10.0.0.0/8"),
    )
    # auth expands to every digest id of the requester (ip ids are not "authenticated")
    assert fixup_acl(((5, "auth", "ignored"),), (IP, BOB, ("super", "")), "/a") == ((5, *BOB),)


def test_allowed_and_ip_matching() -> None:
    assert ip_matches("10.1.2.3", "10.0.0.0/8") and not ip_matches("11.1.2.3", "10.0.0.0/8")
    assert ip_matches("127.0.0.1", "127.0.0.1") and not ip_matches("127.0.0.2", "127.0.0.1")
    assert ip_matches("1.2.3.4", "0.0.0.0/0") and not ip_matches("::1", "0.0.0.0/0")
    acl = ((1, "world", "anyone"), (16, *BOB))
    assert allowed(acl, 1, ()) and not allowed(acl, 16, (IP,)) and allowed(acl, 16, (BOB,))
    assert allowed(acl, 2 | 16, (BOB,))  # any of the bits
    assert allowed((), 31, ())  # an empty ACL lets anyone in
    assert allowed(((0, "world", "anyone"),), 31, (("super", ""),))  # super passes everything
    assert redacted(acl) == ((1, "world", "anyone"), (16, "digest", "user:x"))


@pytest.fixture
def ld() -> Leader:
    return Leader()


def err(r):  # type: ignore[no-untyped-def]
    assert not r.ok
    return type(r.error)


def test_each_write_needs_its_permission(ld: Leader) -> None:
    # /p: everything for bob, only READ for the world
    assert ld.write(create("/p", acl=((1, "world", "anyone"), (31, *BOB)), time_ms=1)).ok
    anon = (IP,)
    assert err(ld.write(create("/p/c", time_ms=1, auth=anon))) is NoAuthError  # CREATE on the parent
    assert ld.write(create("/p/c", time_ms=1, auth=(BOB,))).ok
    assert err(ld.write(set_data("/p", b"x", time_ms=1, auth=anon))) is NoAuthError  # WRITE
    assert err(ld.write(delete("/p/c", time_ms=1, auth=anon))) is NoAuthError  # DELETE on the parent
    # ZooKeeper checks the parent's DELETE before the node exists
    assert err(ld.write(delete("/p/nope", time_ms=1, auth=anon))) is NoAuthError
    assert err(ld.write(delete("/nope/x", time_ms=1, auth=anon))) is NoNodeError
    assert err(ld.write(set_acl("/p", ((31, "world", "anyone"),), time_ms=1, auth=anon))) is NoAuthError  # ADMIN
    # check (in a multi) needs READ: the world has it on /p but not on /w
    assert ld.write(create("/w", acl=((2, "world", "anyone"),), time_ms=1)).ok
    r = ld.write(multi([Check("/p"), Check("/w")], time_ms=1, auth=anon))
    assert err(r) is NoAuthError and r.error.index == 1 and r.op_errors(3) == ("OK", "NO_AUTH", "RUNTIME_INCONSISTENCY")
    # CREATE permission is checked before existence (ZooKeeper's order)
    assert err(ld.write(create("/p/c", time_ms=1, auth=anon))) is NoAuthError
    assert err(ld.write(create("/p", time_ms=1, auth=anon))) is NodeExistsError  # "/" is open
    assert ld.write(delete("/p/c", time_ms=1, auth=(BOB,))).ok
    assert ld.write(set_data("/p", b"x", time_ms=1, auth=(BOB, IP))).ok


def test_reads_check_read_and_exists_needs_nothing(ld: Leader) -> None:
    ld.write(create("/w", b"d", acl=((2, "world", "anyone"),), time_ms=1))
    t = ld.tree
    for read in (t.get, t.children, t.children2, t.get_acl, t.all_children_number):
        with pytest.raises(NoAuthError):
            read("/w", (IP,))
        read("/w")  # the service's own reads (no auth given) are not checked
        read("/w", (("super", ""),))
    assert t.exists("/w") is not None
    assert [type(x) for x in t.multi_read([("get", "/w"), ("children", "/"), ("get", "/nope")], (IP,))] == [
        NoAuthError,
        list,
        NoNodeError,
    ]


def test_get_acl_redacts_digests_without_admin(ld: Leader) -> None:
    acl = ((1, "world", "anyone"), (16, *BOB))
    ld.write(create("/ra", acl=acl, time_ms=1))
    shown, st = ld.tree.get_acl("/ra", (IP,))
    assert shown == ((1, "world", "anyone"), (16, "digest", "user:x")) and st.aversion == 0
    assert ld.tree.get_acl("/ra", (BOB,))[0] == acl
    ld.write(create("/ad", acl=((16, "world", "anyone"),), time_ms=1))
    assert ld.tree.get_acl("/ad", (IP,))[0] == ((16, "world", "anyone"),)  # ADMIN alone may read the ACL


def test_set_acl_versions_and_validation(ld: Leader) -> None:
    ld.write(create("/a", time_ms=1))
    new = ((31, "auth", ""),)
    assert err(ld.write(set_acl("/a", new, time_ms=1, auth=(IP,)))) is InvalidACLError
    assert err(ld.write(set_acl("/nope", (), time_ms=1))) is InvalidACLError  # the ACL is checked first
    assert err(ld.write(set_acl("/nope", ((31, "world", "anyone"),), time_ms=1))) is NoNodeError
    assert err(ld.write(set_acl("/a", new, 3, time_ms=1, auth=(BOB,)))) is BadVersionError
    r = ld.write(set_acl("/a", new, 0, time_ms=7, auth=(BOB,)))
    assert r.ok and r.op is OpCode.SET_ACL and r.value.aversion == 1 and r.value.version == 0
    assert r.changes == ()  # ZooKeeper fires no watch on an ACL change
    assert ld.tree.get_acl("/a") == ((((31, *BOB),), r.value))
    assert err(ld.write(set_data("/a", b"x", time_ms=1, auth=(IP,)))) is NoAuthError
    assert ld.write(set_acl("/a", ((31, "world", "anyone"),), 1, time_ms=1, auth=(BOB,))).value.aversion == 2


def test_create_with_auth_acl_and_multi_rollback(ld: Leader) -> None:
    r = ld.write(create("/mine", acl=((31, "auth", ""),), time_ms=1, auth=(IP, BOB)))
    assert r.ok and ld.tree.get_acl("/mine")[0] == ((31, *BOB),)
    # a multi whose later op lacks permission leaves nothing behind
    r = ld.write(multi([Create("/m"), SetData("/mine", b"x")], time_ms=1, auth=(IP,)))
    assert err(r) is NoAuthError and r.error.index == 1 and ld.tree.exists("/m") is None
    assert err(ld.write(create("/bad", acl=((31, "digest", "nocolon"),), time_ms=1))) is InvalidACLError
    assert err(ld.write(create("/bad", acl=(), time_ms=1))) is InvalidACLError
    assert err(ld.write(create("bad", acl=(), time_ms=1))) is BadArgumentsError  # the path comes first
