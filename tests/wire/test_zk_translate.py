"""The jute adapter's answers, byte for byte where Apache ZooKeeper 3.8 differs from the obvious
(each case here was a difference the differential test, tests/zkcompat, found). Pure: no server."""

from __future__ import annotations

from zabray.wire import zkproto as zp
from zabray.wire.zk_translate import to_response

ACL = (zp.ACL(zp.Perm.ALL, zp.Id("world", "anyone")),)


def test_add_watch_answers_an_error_response_body() -> None:
    # FinalRequestProcessor answers addWatch with ErrorResponse(0) and the Java client reads
    # that int: a bodiless reply makes it fail with an EOF.
    frame = zp.encode_reply(5, 9, 0, to_response(zp.OpCode.ADD_WATCH, None))
    hdr, body = zp.decode_reply(frame[4:], zp.OpCode.ADD_WATCH)
    assert (hdr.xid, hdr.err) == (5, 0) and body == zp.ErrorResponse(0)
    assert len(frame) == 4 + 16 + 4

