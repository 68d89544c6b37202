"""Configurations as ZooKeeper writes them, and reconfiguration requests judged as ZooKeeper 3.8
judges them (``zabray.protocol.membership``)."""

from __future__ import annotations

import pytest

from zabray.errors import CodecError, ReconfigError
from zabray.protocol.membership import OBSERVER, ConfigChange, Member, Membership, next_membership

THREE = Membership.parse("server.1=127.0.0.1:2001:3001:participant;127.0.0.1:4001\n"
                         "server.2=127.0.0.1:2002:3002:participant;127.0.0.1:4002\n"
                         "server.3=127.0.0.1:2003:3003:participant;127.0.0.1:4003\n"
                         "version=100000000")


def test_text_is_zookeepers_and_parses_back() -> None:
    assert THREE.version == 0x100000000 and THREE.voters == {1, 2, 3} and not THREE.observers
    assert THREE.text().splitlines()[-1] == "version=100000000"
    assert THREE.text().splitlines()[0] == "server.1=127.0.0.1:2001:3001:participant;127.0.0.1:4001"
    assert Membership.parse(THREE.text()) == THREE
    assert Membership.parse(THREE.body(), 7) == THREE.with_version(7)


@pytest.mark.parametrize("spec,printed", [
    # kazoo's test_add_remove_observer joins exactly this shape and looks for it in the answer
    ("0.0.0.0:1234:2345:observer;0.0.0.0:3456", "0.0.0.0:1234:2345:observer;0.0.0.0:3456"),
    ("h:1:2;3", "h:1:2:participant;0.0.0.0:3"),  # a bare client port binds every address
    ("h:1:2:PARTICIPANT", "h:1:2:participant"),  # (no client port: none printed)
    ("[::1]:1:2;[::1]:3", "[::1]:1:2:participant;[::1]:3"),
])
def test_server_specs_print_as_zookeeper_prints_them(spec: str, printed: str) -> None:
    assert Member.parse(9, spec).spec() == printed


@pytest.mark.parametrize("spec", ["some thing", "h:1", "h:1:1", "h:x:2", "h:1:2:leader", "h:1:2|g:3:4",
                                  "h:1:2;a:b:c", "h:1:2;;5", "h:1:70000"])
def test_bad_server_specs_are_bad_arguments(spec: str) -> None:
    with pytest.raises(ReconfigError) as e:
        Member.parse(9, spec)
    assert e.value.code == "BAD_ARGUMENTS"


def test_incremental_joining_and_leaving() -> None:
    new = next_membership(THREE, ConfigChange(joining="server.4=h4:2:3:observer;h4:4,5=h5:2:3;h5:4", leaving="1"))
    assert new.voters == {2, 3, 5} and new.observers == {4} and new.version == 0
    # observer <-> participant by joining an existing sid with another role
    flip = next_membership(THREE, ConfigChange(joining="server.2=127.0.0.1:2002:3002:observer;127.0.0.1:4002"))
    assert flip.voters == {1, 3} and flip.observers == {2}


@pytest.mark.parametrize("change,why", [
    (ConfigChange(joining="some thing"), "Wrong format of server string"),
    (ConfigChange(joining="server.4=h:1:2"), "at least 3 ports"),  # no client port
    (ConfigChange(joining="server.4=127.0.0.1:2001:9:participant;h:1"), "Reconfiguration failed"),  # taken
    (ConfigChange(leaving="1,2,3"), "at least 1 follower"),
    (ConfigChange(leaving="x"), "not a server id"),
    (ConfigChange(members="server.1=h:1:2;3,group.1=1"), "hierarchical"),
    (ConfigChange(members="server.1=h:1:2;3,foo=1"), "Unrecognised parameter: foo"),
    (ConfigChange(members=""), "at least 1 follower"),
    (ConfigChange(members="server.1=h:1:2:observer;3"), "at least 1 follower"),
])
def test_invalid_changes_are_bad_arguments(change: ConfigChange, why: str) -> None:
    with pytest.raises(ReconfigError) as e:
        next_membership(THREE, change)
    assert e.value.code == "BAD_ARGUMENTS" and why in e.value.message


def test_bulk_members_replace_everyone_and_ignore_a_version_line() -> None:
    new = next_membership(THREE, ConfigChange(members="server.7=h:1:2;3\nserver.8=h:4:5:observer;6,version=99"))
    assert new.voters == {7} and new.observers == {8} and new.version == 0
    assert new.member(8) == Member(8, OBSERVER, "h", 4, 5, "0.0.0.0", 6)


def test_change_requests_round_trip_and_garbage_is_a_codec_error() -> None:
    c = ConfigChange("server.4=h:1:2;3", "1", None, 0x100000000)
    assert ConfigChange.decode(c.encode()) == c
    for bad in (b"", b"\x93\x01\x02\x03", ConfigChange(None, None, None).encode()[:-1]):
        with pytest.raises(CodecError):
            ConfigChange.decode(bad)


def test_quorums_count_voters_only() -> None:
    m = Membership.of([1, 2, 3], [4, 5])
    assert m.is_quorum({1, 2}) and not m.is_quorum({1, 4, 5}) and m.quorum == 2
