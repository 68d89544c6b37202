"""prepare() against the future state: committed tree plus txns prepared but not yet applied."""

from __future__ import annotations

from tree_harness import Leader, replica

from zabray.tree import (
    BadVersionError,
    Create,
    DataTree,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExistsError,
    SessionExpiredError,
    close_session,
    create,
    create_session,
    decode_txn,
    delete,
    multi,
    set_data,
)
from zabray.tree.ops import CloseSessionTxn, CreateTxn, ErrorTxn, SetDataTxn


def body(txn):  # type: ignore[no-untyped-def]
    return decode_txn(txn.value).body


def test_two_creates_of_one_path_back_to_back() -> None:
    ld = Leader()
    first = ld.prepare(create("/a", time_ms=1))
    second = ld.prepare(create("/a", time_ms=1))
    assert type(body(first)) is CreateTxn
    b = body(second)
    assert type(b) is ErrorTxn and b.code == NodeExistsError.code and b.path == "/a"
    r1, r2 = ld.apply_all()
    assert r1.ok and type(r2.error) is NodeExistsError


def test_sequential_numbers_account_for_pending_creates() -> None:
    ld = Leader()
    ld.write(create("/q", time_ms=1))
    txns = [ld.prepare(create("/q/s", sequential=True, time_ms=1)) for _ in range(3)]
    assert [body(t).path for t in txns] == ["/q/s0000000000", "/q/s0000000001", "/q/s0000000002"]
    assert [body(t).parent_cversion for t in txns] == [1, 2, 3]
    assert [r.value for r in ld.apply_all()] == ["/q/s0000000000", "/q/s0000000001", "/q/s0000000002"]
    assert ld.tree.stat("/q").cversion == 3


def test_pending_parent_and_pending_children() -> None:
    ld = Leader()
    assert type(body(ld.prepare(create("/p", time_ms=1)))) is CreateTxn
    assert type(body(ld.prepare(create("/p/c", time_ms=1)))) is CreateTxn  # parent only pending
    b = body(ld.prepare(delete("/p", time_ms=1)))
    assert type(b) is ErrorTxn and b.code == NotEmptyError.code  # child only pending
    assert type(body(ld.prepare(delete("/p/c", time_ms=1)))) is not ErrorTxn
    assert type(body(ld.prepare(delete("/p", time_ms=1)))) is not ErrorTxn
    b = body(ld.prepare(create("/p/d", time_ms=1)))
    assert type(b) is ErrorTxn and b.code == NoNodeError.code  # parent pending-deleted
    ld.apply_all()
    assert ld.tree.children("/") == ["zookeeper"] and ld.tree.pending == 0


def test_pending_versions_chain() -> None:
    ld = Leader()
    ld.write(create("/a", time_ms=1))
    assert body(ld.prepare(set_data("/a", b"1", 0, time_ms=1))).version == 1
    assert body(ld.prepare(set_data("/a", b"2", 1, time_ms=1))).version == 2
    b = body(ld.prepare(set_data("/a", b"3", 1, time_ms=1)))
    assert type(b) is ErrorTxn and b.code == BadVersionError.code
    assert type(body(ld.prepare(delete("/a", 2, time_ms=1)))) is not ErrorTxn
    rs = ld.apply_all()
    assert [r.ok for r in rs] == [True, True, False, True]


def test_close_session_knows_pending_ephemerals() -> None:
    ld = Leader()
    ld.write(create_session(1, 1000, time_ms=1))
    ld.write(create("/old", ephemeral=True, session_id=1, time_ms=1))
    ld.write(create("/gone", ephemeral=True, session_id=1, time_ms=1))
    ld.prepare(create_session(2, 1000, time_ms=1))  # pending session
    ld.prepare(create("/new", ephemeral=True, session_id=1, time_ms=1))
    ld.prepare(create("/other", ephemeral=True, session_id=2, time_ms=1))
    ld.prepare(delete("/gone", time_ms=1))
    b = body(ld.prepare(close_session(1, time_ms=1)))
    assert b == CloseSessionTxn(("/new", "/old"))
    b = body(ld.prepare(create("/late", ephemeral=True, session_id=1, time_ms=1)))
    assert type(b) is ErrorTxn and b.code == SessionExpiredError.code
    b = body(ld.prepare(close_session(1, time_ms=1)))
    assert type(b) is ErrorTxn and b.code == SessionExpiredError.code
    assert body(ld.prepare(close_session(2, time_ms=1))) == CloseSessionTxn(("/other",))
    rs = ld.apply_all()
    assert [r.ok for r in rs] == [True, True, True, True, True, False, False, True]
    assert ld.tree.sessions() == {} and ld.tree.children("/") == ["zookeeper"]


def test_pending_session_create_and_close() -> None:
    ld = Leader()
    ld.prepare(create_session(4, 1000, time_ms=1))
    b = body(ld.prepare(create_session(4, 1000, time_ms=1)))
    assert type(b) is ErrorTxn and b.code == SessionExistsError.code
    assert type(body(ld.prepare(create("/x", session_id=4, time_ms=1)))) is CreateTxn
    ld.prepare(close_session(4, time_ms=1))
    b = body(ld.prepare(create("/y", session_id=4, time_ms=1)))
    assert type(b) is ErrorTxn and b.code == SessionExpiredError.code
    assert type(body(ld.prepare(create_session(4, 50, time_ms=1)))) is not ErrorTxn
    ld.apply_all()
    assert ld.tree.sessions() == {4: 50} and ld.tree.pending == 0


def test_failed_multi_leaves_no_pending_change() -> None:
    ld = Leader()
    ld.prepare(create("/a", time_ms=1))
    b = body(ld.prepare(multi([Create("/b"), Create("/a")], time_ms=1)))
    assert type(b) is ErrorTxn and b.index == 1
    assert type(body(ld.prepare(create("/b", time_ms=1)))) is CreateTxn
    assert ld.tree.pending == 2


def test_abandon_prepared_resets_to_committed() -> None:
    ld = Leader()
    ld.write(create("/q", time_ms=1))
    ld.prepare(create("/a", time_ms=1))
    ld.prepare(create("/q/s", sequential=True, time_ms=1))
    ld.prepare(set_data("/q", b"x", time_ms=1))
    assert ld.tree.pending == 3
    dropped = ld.new_epoch()
    assert len(dropped) == 3 and ld.tree.pending == 0
    # the same requests prepare as if the abandoned ones never existed
    assert type(body(ld.prepare(create("/a", time_ms=1)))) is CreateTxn
    assert body(ld.prepare(create("/q/s", sequential=True, time_ms=1))).path == "/q/s0000000000"
    assert body(ld.prepare(set_data("/q", b"y", 0, time_ms=1))) == SetDataTxn("/q", b"y", 1)
    ld.apply_all()
    assert ld.tree.digest() == replica(ld.log).digest()


def test_pending_cleared_as_applied_but_newer_entries_kept() -> None:
    ld = Leader()
    ld.prepare(create("/a", time_ms=1))  # writes "/" and "/a"
    ld.prepare(create("/b", time_ms=1))  # overwrites "/"
    ld.apply_next()
    assert ld.tree.pending == 1
    # "/"'s overlay (cversion 2) must have survived applying the first txn
    assert body(ld.prepare(create("/c", time_ms=1))).parent_cversion == 3
    ld.apply_all()
    # 3 creations, 4 children (zookeeper among them): ZooKeeper reports 2 * 3 - 4
    assert ld.tree.pending == 0 and ld.tree.stat("/").cversion == 2


def test_follower_never_prepares_but_applies_identically() -> None:
    ld = Leader()
    for req in (create_session(1, 10, time_ms=1), create("/e", ephemeral=True, session_id=1, time_ms=2)):
        ld.prepare(req)
    ld.prepare(close_session(1, time_ms=3))
    leader_results = ld.apply_all()
    f = DataTree()
    assert [f.apply(t) for t in ld.log] == leader_results
    assert f.digest() == ld.tree.digest()


def test_the_leader_applies_the_very_record_a_replica_decodes() -> None:
    """A leader applies its own prepared txns without decoding them; what it applies must be
    exactly what a replica decodes from the same bytes, for every kind of txn (and give the
    same results), or the leader's tree would drift from its followers'."""
    from zabray.tree import delete_container, set_acl, sync
    from zabray.tree.ops import Check
    from zabray.tree.znode import CREATOR_ALL_ACL, PERM_ALL

    auth = (("digest", "bob:x"),)
    requests = [
        create_session(7, 30_000, time_ms=1),
        create("/a", b"1", time_ms=2, acl=CREATOR_ALL_ACL, auth=auth),
        create("/e", b"", ephemeral=True, session_id=7, time_ms=3),
        create("/s/", b"", sequential=True, time_ms=3),  # NoNode: an error txn
        create("/c", b"", container=True, time_ms=3),
        create("/t", b"", ttl=5000, time_ms=3),
        set_data("/a", b"2", time_ms=4, auth=auth),
        set_data("/a", b"3", 99, time_ms=4, auth=auth),  # BadVersion: an error txn
        set_acl("/a", [(PERM_ALL, "world", "anyone")], time_ms=5, auth=auth),
        multi([Create("/m"), Create("/m/x", b"v")], time_ms=6),
        multi([Check("/m"), Create("/m")], time_ms=6),  # an error txn inside a multi
        sync("/a", time_ms=7),
        delete("/m/x", time_ms=8),
        delete_container("/c", time_ms=9),
        close_session(7, time_ms=10),
        b"not a request",  # undecodable: a BAD_ARGUMENTS error txn
    ]
    ld = Leader()
    for r in requests:
        ld.prepare(r)
    kept = ld.tree._processor._records
    assert len(kept) == len(requests)
    for txn in ld.queue:
        data, rec = kept[int(txn.zxid)]
        assert data is txn.value
        decoded = decode_txn(txn.value)
        assert rec == decoded and repr(rec) == repr(decoded)  # same values, same types
    results = ld.apply_all()
    assert not kept  # every one was applied from its record, none decoded
    follower = DataTree()  # decodes every txn
    for t, mine in zip(ld.log, results, strict=True):
        assert follower.apply(t) == mine
    assert follower.snapshot() == ld.tree.snapshot()


def test_a_record_is_reused_only_for_its_own_bytes() -> None:
    ld = Leader()
    txn = ld.prepare(create("/a", b"1", time_ms=1))
    copy = bytes(bytearray(txn.value))  # equal, but not the encoding prepare made
    assert ld.tree._processor.take_record(int(txn.zxid), copy) is None
    assert ld.tree._processor.take_record(int(txn.zxid), txn.value) is None  # taken once only
    txn2 = ld.prepare(create("/b", b"1", time_ms=1))
    ld.tree.abandon_prepared()
    assert ld.tree._processor.take_record(int(txn2.zxid), txn2.value) is None
