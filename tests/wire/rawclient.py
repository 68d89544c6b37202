"""A blocking, one-request-at-a-time ZooKeeper client over zabray's codec, for codec tests."""

from __future__ import annotations

import socket

from zabray.wire import zkproto as zp


class RawClient:
    def __init__(self, port: int, timeout_ms: int = 10000) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.split = zp.FrameSplitter(admin_words=False)
        self.frames: list[bytes] = []
        self.events: list[zp.WatcherEvent] = []
        self.xid = 0
        self.sock.sendall(zp.encode_record(zp.ConnectRequest(0, 0, timeout_ms, 0, b"\0" * 16, False)))
        self.session = zp.ConnectResponse.decode(self._frame())

    def _frame(self) -> bytes:
        while not self.frames:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            self.frames += self.split.feed(data)
        return self.frames.pop(0)

    def call(self, op: int, body: zp.Record | None, xid: int | None = None) -> tuple[zp.ReplyHeader, zp.Record | None]:
        if xid is None:
            self.xid += 1
            xid = self.xid
        self.sock.sendall(zp.encode_request(xid, op, body))
        while True:
            hdr, rec = zp.decode_reply(self._frame(), op)
            if hdr.xid == zp.Xid.NOTIFICATION:
                assert isinstance(rec, zp.WatcherEvent)
                self.events.append(rec)
                continue
            assert hdr.xid == xid
            return hdr, rec

    def close(self) -> None:
        self.sock.close()
