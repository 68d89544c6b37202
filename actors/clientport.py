"""The bespoke client port on a replica: zabray's own framing for broadcast clients and ``Session``.

A connection starts with a handshake frame naming the ensemble; with an ensemble secret, a
broadcast client then proves it holds it (``zabray.wire.auth``) before any ``SubmitReq`` is taken.
Requests are pipelined and answered out of order by the replica's hosted service. Bad bytes or a
failed proof close this connection only and are counted; the replica carries on. A client that
sends faster than it reads is held back (``actors.flow``, counted in ``client_throttled``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from actors.flow import OUT_HIGH, Held
from zabray.errors import CodecError
from zabray.net.batching import BatchingProtocol
from zabray.wire import clientproto as cp
from zabray.wire.auth import CLIENT, Acceptor, AuthFailed, is_auth_frame
from zabray.wire.framing import FrameDecoder

if TYPE_CHECKING:
    from actors.replica import ReplicaServer
    from zabray.zk import messages as zm

log = logging.getLogger(__name__)


class ClientConn(BatchingProtocol):
    """One client connection: a handshake frame, then pipelined requests answered out of order."""

    def __init__(self, server: ReplicaServer) -> None:
        super().__init__(server.outbox)
        self.server = server
        self.decoder = FrameDecoder()
        self.greeted = False
        self.hello = b""  # the client handshake's bytes: the context its proof is bound to
        self.auth: Acceptor | None = None
        self.authed = False  # proved the ensemble secret: broadcast requests are allowed
        self.held: Held[cp.SubmitReq | cp.StatusReq | cp.ZkReq] = Held(
            self._take, lambda: len(self.encoder) >= OUT_HIGH, server.outbox.flush, server.stats, "client_throttled")

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server._clients.add(self)
        self.held.attach(transport)  # type: ignore[arg-type]

    def connection_lost(self, exc: Exception | None) -> None:
        self.server._clients.discard(self)
        self.transport = None
        self.held.detach()
        self.server.service.conn_lost(self)

    def pause_writing(self) -> None:
        self.held.pause_writing()

    def resume_writing(self) -> None:
        self.held.resume_writing()

    def data_received(self, data: bytes) -> None:
        self._received(data)
        self.server.outbox.flush()  # replies (and a leader's PROPOSALs) leave now, not next turn

    def _received(self, data: bytes) -> None:
        reqs: list[cp.SubmitReq | cp.StatusReq | cp.ZkReq] = []
        try:
            for payload in self.decoder.feed(data):
                if not self.greeted:
                    cp.check_handshake(payload, self.server.ensemble)
                    self.greeted = True
                    self.hello = payload
                    continue
                if self._auth_step(payload):
                    continue
                req = cp.decode_request(payload)
                if not self.authed and self.server.secret is not None and not isinstance(req, cp.ZkReq):
                    raise AuthFailed("broadcast requests need the ensemble secret (authenticate first)")
                reqs.append(req)
            self.held.extend(reqs)
        except AuthFailed as e:
            self.server.client_auth_failed(self, e)
            self.close()
        except CodecError as e:
            self.server.stats["bad_client_frames"] += 1
            log.warning("replica %d: dropping client connection: %s", self.server.sid, e)
            self.close()

    def _take(self, req: cp.SubmitReq | cp.StatusReq | cp.ZkReq) -> None:
        if isinstance(req, cp.StatusReq):
            # Four fields, read directly: the full report (metrics, faults, counters) is not needed.
            n = self.server.node
            self.send(cp.StatusRep(req.rid, self.server.sid, n.state.name if n else "STARTING",
                                   self.server.established, n.current_epoch if n else 0))
        else:
            self.server._run(self.server.service.client(self, req))

    def flush(self) -> None:
        super().flush()
        self.held.soon()  # if held back by this burst's replies alone, now handed over

    def _auth_step(self, payload: bytes) -> bool:
        """HELLO or PROOF of the client's membership proof (``zabray.wire.auth``): True if consumed.
        ZooKeeper sessions never send one; their requests are governed by ZooKeeper's own rules."""
        secret = self.server.secret
        if secret is None or self.authed:
            return False
        if self.auth is None:
            if not is_auth_frame(payload):
                return False
            self.auth = Acceptor(secret, CLIENT + self.hello, os.urandom(32))
            self.encoder.add_payload(self.auth.challenge(payload))
            self.flush()
            return True
        self.auth.verify(payload)
        self.auth = None
        self.authed = True
        return True

    def eof_received(self) -> bool:
        return False

    def deliver(self, action: zm.ServiceAction) -> None:
        """A ZooKeeper service's reply or event for this connection (only it delivers)."""
        self.send(self.server.service.frame(action))

    def hang_up(self) -> None:
        self.close()

    def send(self, msg: Any) -> None:
        if self.transport is not None:
            self.send_payload(cp.encode(msg))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()
            self.transport = None
            self.held.detach()
