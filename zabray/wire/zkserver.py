"""One ZooKeeper client connection, server side, sans IO: bytes in, service requests and bytes out.

A replica's shell (``actors.zkport``) owns the socket and the service; ``ZkServerConn`` sits
between them. ``feed`` splits the stream into frames (``zkproto.FrameSplitter``: 4-byte length
prefix, ``max_frame`` the jute.maxbuffer limit), decodes the connect handshake and then each
request, and returns the service requests to run. ``encode`` turns the service's actions for this
connection into reply frames. Requests get the connection's own ids in the service (the client's
xids may repeat, pings and auth share fixed xids); each id remembers the client's xid and opcode
so a reply is encoded with the right header and record.

Sessions. A new session's password is ``session_password(id, key)``: any replica of the ensemble
can check it on a resume without shared state, as ZooKeeper derives its passwords from the session
id and a server secret. A resume with a wrong password is answered as an expired session (timeout
0) and closed, as ZooKeeper does.

What closes the connection (the replica carries on): a malformed or oversized frame, an unknown
opcode, a failed addAuth (after its AUTH_FAILED reply), closeSession (after its reply), an expired
session, and a replica that cannot serve the request (NOT_READY, BEHIND, an uncertain outcome):
ZooKeeper's clients take a closed connection as the cue to try another server.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass, field
from typing import Any

from zabray.errors import CodecError
from zabray.tree import zk_code
from zabray.wire import zkproto as zp
from zabray.wire.zk_translate import fast_set_data, multi_failed, stat_reply, to_op, to_response
from zabray.zk import messages as zm

log = logging.getLogger(__name__)

PASSWORD_LEN = 16
"""ZooKeeper's session passwords are 16 bytes; its clients send them back verbatim."""

_EVENT_TYPES = {"created": zp.EventType.NODE_CREATED, "deleted": zp.EventType.NODE_DELETED,
                "changed": zp.EventType.NODE_DATA_CHANGED, "child": zp.EventType.NODE_CHILDREN_CHANGED}
# Answers a ZooKeeper server never gives: the replica cannot serve this, the client moves on.
_MOVE_ON = frozenset({"NOT_READY", "BEHIND", "CONNECTION_LOSS"})
_CONNECT = -10  # the opcode remembered for the handshake (ZooKeeper's createSession)
_SET_DATA = int(zp.OpCode.SET_DATA)
_O = zp.OpCode
LAST_OP: dict[int, str] = {
    _O.PING: "PING", _CONNECT: "SESS", _O.MULTI: "MULT", _O.MULTI_READ: "MLTR", _O.CREATE: "CREA",
    _O.CREATE2: "CREA", _O.CREATE_TTL: "CREA", _O.CREATE_CONTAINER: "CREA", _O.DELETE: "DELE",
    _O.DELETE_CONTAINER: "DELE", _O.SET_DATA: "SETD", _O.RECONFIG: "RECO", _O.SET_ACL: "SETA",
    _O.CLOSE_SESSION: "CLOS", _O.SYNC: "SYNC", _O.CHECK: "CHEC", _O.EXISTS: "EXIS", _O.GET_DATA: "GETD",
    _O.SET_WATCHES: "SETW", _O.SET_WATCHES2: "STW2", _O.ADD_WATCH: "ADDW", _O.GET_ACL: "GETA",
    _O.GET_CHILDREN: "GETC", _O.GET_CHILDREN2: "GETC", _O.GET_ALL_CHILDREN_NUMBER: "GETACN",
    _O.CHECK_WATCHES: "CHKW", _O.REMOVE_WATCHES: "REMW", _O.WHO_AM_I: "HOMI", _O.GET_EPHEMERALS: "GETE",
}
"""What ``cons`` shows as a connection's last operation (ZooKeeper's FinalRequestProcessor names)."""


def session_password(session_id: int, key: bytes) -> bytes:
    """The password of ``session_id``: HMAC-SHA256 under the ensemble's ``key``, truncated."""
    return hmac.new(key, (session_id & (2**64 - 1)).to_bytes(8, "big"), hashlib.sha256).digest()[:PASSWORD_LEN]


def password_key(secret: bytes | None, ensemble: str) -> bytes:
    """The key session passwords are made with: derived from the ensemble secret when there is
    one; otherwise from the ensemble's name (then, as in ZooKeeper, a password only guards
    against a client resuming the wrong session by mistake, not against an attacker)."""
    base = secret if secret else b"zabray-unauthenticated-ensemble:" + ensemble.encode()
    return hmac.new(base, b"zookeeper session passwords", hashlib.sha256).digest()


@dataclass(slots=True)
class Fed:
    """What one ``feed`` produced: requests for the service (``(id, op)``), bytes to send now,
    whether to close after sending, and a four-letter word to answer (the connection then
    closes after the answer)."""

    requests: list[tuple[int, zm.ClientOp]] = field(default_factory=list)
    send: bytes = b""
    close: bool = False
    word: str | None = None


class ZkServerConn:
    """ZooKeeper's client protocol on one connection (see the module docstring)."""

    def __init__(self, *, key: bytes, peer_ip: str, max_frame: int = zp.DEFAULT_MAX_FRAME,
                 words: frozenset[str] = frozenset(), nonce: str = "") -> None:
        """``nonce``: this connection's fresh, unguessable SASL nonce (DIGEST-MD5), from the shell."""
        self.key = key
        self.nonce = nonce
        self.peer_ip = peer_ip
        self.words = words
        self.frames = zp.FrameSplitter(max_frame)
        self.connected = False  # the ConnectRequest was read
        self.read_only = False
        self.session_id = 0
        self.timeout_ms = 0  # the session timeout negotiated
        self.closed = False
        self._next = 1
        self._pending: dict[int, tuple[int, int, tuple[int, ...]]] = {}  # id -> (xid, opcode, sub ops)

    def feed(self, data: bytes) -> Fed:
        """Raises ``CodecError`` for bytes that are not ZooKeeper's protocol: close the connection."""
        out = Fed()
        if self.closed:
            return out
        frames = self.frames.feed(data)
        word = self.frames.first_word
        if word is not None and not self.connected:
            self.connected = True
            out.word = word
            out.close = True
            return out
        for payload in frames:
            if not self.connected:
                self._handshake(payload, out)
                if out.close:
                    break
                continue
            rid = self._next
            self._next += 1
            fast = fast_set_data(payload)
            if fast is not None:
                self._pending[rid] = (fast[0], _SET_DATA, ())
                out.requests.append((rid, fast[1]))
                continue
            req = zp.decode_request(payload)
            op = to_op(req)
            if type(op) is zm.Sasl:
                op = zm.Sasl(op.token, self.nonce)
            sub: tuple[int, ...] = ()
            if req.op in (zp.OpCode.MULTI, zp.OpCode.MULTI_READ) and req.body is not None:
                sub = tuple(o for o, _ in req.body.ops)  # type: ignore[attr-defined]
            self._pending[rid] = (req.xid, req.op, sub)
            out.requests.append((rid, op))
        return out

    def _handshake(self, payload: bytes, out: Fed) -> None:
        req = zp.ConnectRequest.decode(payload)
        self.connected = True
        self.read_only = req.read_only
        if req.timeOut < 0:
            raise CodecError(f"connect: negative session timeout {req.timeOut}")
        if req.sessionId != 0 and not hmac.compare_digest(req.passwd or b"",
                                                          session_password(req.sessionId, self.key)):
            log.info("session 0x%x resumed with a wrong password: told it expired", req.sessionId)
            out.send += self._expired()
            out.close = True
            return
        rid = self._next
        self._next += 1
        self._pending[rid] = (0, _CONNECT, ())
        out.requests.append((rid, zm.Connect(req.sessionId, req.timeOut, req.lastZxidSeen,
                                             auth=(("ip", self.peer_ip),), read_only=bool(req.read_only))))

    def _expired(self) -> bytes:
        return zp.encode_record(zp.ConnectResponse(0, 0, 0, bytes(PASSWORD_LEN), self.read_only))

    def pending_op(self, rid: int) -> tuple[int, int] | None:
        """(client xid, opcode) of the unanswered request ``rid`` (for ``cons``'s statistics)."""
        entry = self._pending.get(rid)
        return None if entry is None else (entry[0], entry[1])

    def encode(self, action: zm.ServiceAction) -> tuple[bytes, bool]:
        """The bytes that carry ``action`` to the client, and whether to close after them.

        Once a reply closes the connection nothing more is encoded for it: a client matches
        replies to its requests in order, so a later reply sent after a dropped one (a refused
        write, an uncertain outcome) would be taken for the wrong request."""
        if self.closed:
            return b"", True
        data, close = self._encode(action)
        self.closed = close
        return data, close

    def _encode(self, action: zm.ServiceAction) -> tuple[bytes, bool]:
        match action:
            case zm.Reply(_, rid, zxid, error, value):
                return self._reply(rid, zxid, error, value)
            case zm.WatchFired(_, _, path, event, _):
                ev = zp.WatcherEvent(_EVENT_TYPES[event], zp.KeeperState.SYNC_CONNECTED, path)
                return zp.encode_reply(zp.Xid.NOTIFICATION, -1, 0, ev), False
            case zm.SessionEnded():
                return b"", True
        return b"", False

    def _reply(self, rid: int, zxid: int, error: zm.ErrorInfo | None, value: Any) -> tuple[bytes, bool]:
        entry = self._pending.pop(rid, None)
        if entry is None:
            return b"", False
        xid, op, sub = entry
        if error is not None and error.code in _MOVE_ON:
            return b"", True
        if op == _CONNECT:
            if error is not None:
                return (self._expired() if error.code == "SESSION_EXPIRED" else b""), True
            sid, timeout = value[0], value[1]
            read_only = len(value) > 2 and bool(value[2])  # (sid, timeout, read-only session?)
            self.session_id = sid
            self.timeout_ms = int(timeout)
            return zp.encode_record(zp.ConnectResponse(0, int(timeout), sid, session_password(sid, self.key),
                                                       bool(read_only))), False
        close = op == zp.OpCode.CLOSE_SESSION
        if op == zp.OpCode.SASL:
            zxid = 0  # ZooKeeper answers SASL tokens outside the txn stream, with zxid 0
        if error is None:
            if op == zp.OpCode.EXISTS and value is None:
                return zp.encode_reply(xid, zxid, zp.Err.NO_NODE), close
            if op in _STAT_OPS:
                data = stat_reply(xid, zxid, value)
                if data is not None:
                    return data, close
            return zp.encode_reply(xid, zxid, 0, to_response(op, value, sub)), close
        if op == zp.OpCode.MULTI and error.code != "NOT_READ_ONLY":
            # A failed multi is answered OK in the header, every op's own result in the body
            # (a read-only server refuses the whole request in the header, as ZooKeeper's does).
            return zp.encode_reply(xid, zxid, 0, multi_failed(sub, error)), close
        if op == zp.OpCode.SASL:
            # As ZooKeeper's processSasl: the error with a null token (the Java client reads the
            # token of every reply while its SASL exchange runs, then reports AuthFailed).
            return zp.encode_reply(xid, zxid, zk_code(error.code), zp.SetSASLResponse(None), body_on_error=True), True
        return zp.encode_reply(xid, zxid, zk_code(error.code)), close or error.code == "AUTH_FAILED"


_STAT_OPS = frozenset({zp.OpCode.SET_DATA, zp.OpCode.SET_ACL, zp.OpCode.EXISTS})

__all__ = ["LAST_OP", "Fed", "PASSWORD_LEN", "ZkServerConn", "password_key", "session_password"]
