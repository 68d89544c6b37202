"""A reconfig on the data tree: judged by the leader's core (``decide``) between the session check
and the ACL of /zookeeper/config, as ZooKeeper 3.8's PrepRequestProcessor orders them; applied,
/zookeeper/config holds the configuration as ZooKeeper shows it and its watches fire."""

from __future__ import annotations

import pytest

from zabray.errors import ReconfigError
from zabray.protocol.membership import ConfigChange, Membership, next_membership
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid
from zabray.tree import DataTree, EventType, create_session
from zabray.tree.ops import ReconfigTxn, decode_txn, reconfig
from zabray.tree.paths import CONFIG

CURRENT = Membership.of([1, 2, 3], addresses={s: f"127.0.0.1:{2000 + s}:{3000 + s};127.0.0.1:{4000 + s}"
                                              for s in (1, 2, 3)})
SUPER = (("super", ""), ("digest", "super:x"))
JOIN = "server.100=0.0.0.0:1234:2345:observer;0.0.0.0:3456"


def decide(change: ConfigChange) -> Membership:
    return next_membership(CURRENT, change)


def refuse(code: str) -> object:
    def d(change: ConfigChange) -> Membership:
        raise ReconfigError(code, "refused")
    return d


def _tree_with_session(sid: int = 7) -> DataTree:
    tree = DataTree()
    z = Zxid.of(1, 1)
    tree.apply(Txn(z, tree.prepare(create_session(sid, 5000, time_ms=1), z)))
    return tree


def test_a_superuser_reconfig_sets_zookeeper_config_as_zookeeper_shows_it() -> None:
    tree = _tree_with_session()
    z = Zxid.of(1, 2)
    value, config = tree.prepare_reconfig(reconfig(JOIN, None, None, session_id=7, time_ms=5, auth=SUPER), z, decide)
    assert config is not None and config.observers == {100}
    assert isinstance(decode_txn(value).body, ReconfigTxn)
    result = tree.apply(Txn(z, value, config=config.with_version(z)))
    assert result is not None and result.ok
    data, stat = result.value
    assert data.decode().endswith("server.100=0.0.0.0:1234:2345:observer;0.0.0.0:3456\nversion=100000002")
    assert data.decode().startswith("server.1=127.0.0.1:2001:3001:participant;127.0.0.1:4001\n")
    # ZooKeeper's stat of /zookeeper/config: mzxid the version, version -1, created at 0
    assert (stat.czxid, stat.mzxid, stat.version, stat.aversion, stat.data_length) == (0, z, -1, -1, len(data))
    assert [(c.path, c.event) for c in result.changes] == [(CONFIG, EventType.CHANGED)]


@pytest.mark.parametrize("auth,d,code", [
    ((), decide, "NO_AUTH"),  # world:anyone may only read /zookeeper/config
    (SUPER, refuse("RECONFIG_IN_PROGRESS"), "RECONFIG_IN_PROGRESS"),
    ((), refuse("NEW_CONFIG_NO_QUORUM"), "NEW_CONFIG_NO_QUORUM"),  # the leader's checks come first
    (SUPER, refuse("RECONFIG_DISABLED"), "RECONFIG_DISABLED"),
])
def test_refusals_are_error_txns(auth: tuple[tuple[str, str], ...], d: object, code: str) -> None:
    tree = _tree_with_session()
    z = Zxid.of(1, 2)
    value, config = tree.prepare_reconfig(reconfig(JOIN, None, None, session_id=7, time_ms=5, auth=auth), z, d)  # type: ignore[arg-type]
    assert config is None
    result = tree.apply(Txn(z, value))
    assert result is not None and result.error is not None and result.error.code == code


def test_a_bad_joining_string_is_bad_arguments_and_an_expired_session_is_told_so() -> None:
    tree = _tree_with_session()
    value, config = tree.prepare_reconfig(reconfig("some thing", None, None, session_id=7, time_ms=5, auth=SUPER),
                                          Zxid.of(1, 2), decide)
    assert config is None and decode_txn(value).body.code == "BAD_ARGUMENTS"  # type: ignore[union-attr]
    value, config = tree.prepare_reconfig(reconfig(JOIN, None, None, session_id=99, time_ms=5, auth=SUPER),
                                          Zxid.of(1, 3), decide)
    assert config is None and decode_txn(value).body.code == "SESSION_EXPIRED"  # type: ignore[union-attr]


def test_the_configuration_survives_a_snapshot() -> None:
    tree = _tree_with_session()
    z = Zxid.of(1, 2)
    value, config = tree.prepare_reconfig(reconfig(JOIN, None, None, session_id=7, time_ms=5, auth=SUPER), z, decide)
    tree.apply(Txn(z, value, config=config))
    copy = DataTree()
    copy.restore(tree.snapshot())
    assert copy.digest() == tree.digest()
