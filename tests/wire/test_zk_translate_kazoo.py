"""ZooKeeper requests as kazoo writes them, through the pure adapter (no server, no sockets)."""

from __future__ import annotations

import struct

from kazoo.protocol.serialization import Create, Reconfig
from kazoo.security import ACL, Id

from zabray.wire import zkproto as zp
from zabray.wire.zk_translate import to_op
from zabray.zk import messages as zm


def _decode(xid: int, request: object) -> zp.Request:
    return zp.decode_request(struct.pack(">ii", xid, request.type) + request.serialize())  # type: ignore[attr-defined]


def test_auth_scheme_with_kazoo_null_id_is_the_empty_id() -> None:
    # kazoo writes Id("auth", "") with a null id; the service must see "", not None.
    op = to_op(_decode(3, Create("/a", b"", [ACL(31, Id("auth", ""))], 0)))
    assert isinstance(op, zm.Create) and op.acl == ((31, "auth", ""),)


def test_kazoo_reconfig_requests_reach_the_service_field_for_field() -> None:
    op = to_op(_decode(4, Reconfig(None, "3", None, -1)))
    assert op == zm.Reconfig(None, "3", None, -1)
    join = "server.100=0.0.0.0:1234:2345:observer;0.0.0.0:3456"
    assert to_op(_decode(5, Reconfig(join, None, None, 0x100000004))) == zm.Reconfig(join, None, None, 0x100000004)
