"""Membership proof on PeerTransport connections, over real TCP: a process without the ensemble
secret never gets a message to the core, whatever well-formed Zab it sends; replays fail; a
connector sends nothing to an acceptor that cannot prove itself."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from tests.actors.test_transport import (
    ENS,
    OTHER_KEY,
    Node,
    cluster,
    hs_channel,
    member_conn,
    note,
    poll,
    prop,
    raw_conn,
    run,
    stop_all,
)
from zabray.protocol.codec import encode
from zabray.protocol.events import ChannelId, Received
from zabray.protocol.messages import Ack, Commit, NewLeader, Notification, Ping, Trunc
from zabray.protocol.zxid import Zxid
from zabray.wire.auth import PEER, Acceptor
from zabray.wire.framing import KIND_ELECTION, FrameDecoder, Handshake, frame

pytestmark = pytest.mark.timeout(60)


async def refused(r: asyncio.StreamReader) -> bool:
    """True once the peer closes, after whatever it sent first (a CHALLENGE, say)."""
    while True:
        try:
            data = await asyncio.wait_for(r.read(1 << 16), 10)
        except (ConnectionResetError, BrokenPipeError):
            return True
        if not data:
            return True


def high_epoch_note(sender: int) -> Notification:
    return Notification(sender=sender, state=0, leader=sender, zxid=Zxid.of(99, 9), epoch=99, round=99)


def test_rogue_without_the_secret_reaches_nothing() -> None:
    async def body() -> None:
        leader, learner = await cluster(1, 2)
        port = leader.t.port
        ch = ChannelId(2, 1, 5, 5)
        learner.t.open(ch)
        learner.t.send(ch, Ping(zxid=0))
        await leader.until(lambda: len(leader.received(ch)) == 1)
        zab = b"".join(frame(encode(m)) for m in (Ping(zxid=7), Ack(Zxid.of(9, 1))))
        newer = hs_channel(ChannelId(2, 1, 9, 9))  # would replace learner 2's live channel
        attempts = [
            # No auth at all: Zab frames right behind the handshake.
            lambda: raw_conn(port, newer, zab),
            lambda: raw_conn(port, frame(Handshake(ENS, 3, KIND_ELECTION).encode()), frame(encode(high_epoch_note(3)))),
            # The exchange attempted with another ensemble's secret (same ensemble name).
            lambda: member_conn(port, newer, zab, secret=OTHER_KEY),
            lambda: member_conn(port, frame(Handshake(ENS, 3, KIND_ELECTION).encode()),
                                frame(encode(high_epoch_note(3))), secret=OTHER_KEY),
        ]
        for attempt in attempts:
            r, w = await attempt()
            assert await refused(r)
            w.close()
        assert leader.t.stats["auth_failures"] == len(attempts)
        # Nothing reached the core: no notification, no channel closed or replaced, and the
        # learner's latest (incarnation, iteration) is still the live channel's.
        assert leader.notes() == [] and leader.closed() == []
        assert leader.t.stats["channels_replaced"] == 0 and leader.t._latest[2] == (5, 5)
        learner.t.send(ch, Ack(Zxid.of(1, 1)))
        leader.t.send(ch, Commit(Zxid.of(1, 1)))
        await leader.until(lambda: leader.received(ch)[-1] == Ack(Zxid.of(1, 1)))
        await learner.until(lambda: learner.received(ch) == [Commit(Zxid.of(1, 1))])
        await stop_all(leader, learner)

    run(body)


def test_learner_refuses_a_leader_without_the_secret() -> None:
    """Leader-side rogue (a squatter on the leader's address, or another ensemble's leader):
    it must not get the learner's messages, and its NEWLEADER/TRUNC/PROPOSAL never reach the core."""

    async def body() -> None:
        got: list[bytes] = []

        async def squatter(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            dec = FrameDecoder()
            payloads: list[bytes] = []
            while len(payloads) < 2:  # the handshake and the HELLO
                data = await r.read(1 << 16)
                if not data:
                    return
                got.append(data)
                payloads += dec.feed(data)
            chal = Acceptor(OTHER_KEY, PEER + payloads[0], os.urandom(32)).challenge(payloads[1])
            forged = [NewLeader(99, Zxid.of(99, 0)), Trunc(Zxid.of(1, 0)), prop(1)]
            w.write(frame(chal) + b"".join(frame(encode(m)) for m in forged))
            await w.drain()
            while data := await r.read(1 << 16):
                got.append(data)
            w.close()

        server = await asyncio.start_server(squatter, "127.0.0.1", 0)
        sport = server.sockets[0].getsockname()[1]
        learner = Node(2)
        await learner.start()
        learner.t.set_peers({1: ("127.0.0.1", sport)})
        ch = ChannelId(2, 1, 1, 1)
        learner.t.open(ch)
        learner.t.send(ch, Ping(zxid=42))
        await learner.until(lambda: ch in learner.closed(), what="the channel to the squatter closed")
        assert learner.t.stats["auth_failures"] == 1
        assert learner.received(ch) == []
        # The squatter saw the handshake and HELLO, never the PROOF or the Ping.
        sent = FrameDecoder().feed(b"".join(got))
        assert len(sent) == 2 and encode(Ping(zxid=42)) not in sent
        server.close()
        await stop_all(learner)

    run(body)


def test_replayed_handshake_bytes_are_refused() -> None:
    async def body() -> None:
        (n,) = await cluster(1)
        port = n.t.port
        seen: list[bytes] = []
        r, w = await member_conn(port, frame(Handshake(ENS, 3, KIND_ELECTION).encode()),
                                 frame(encode(note(3, 1))), sent=seen)
        await n.until(lambda: len(n.notes()) == 1)
        w.close()
        for s in [b"".join(seen), seen[0] + seen[1][: len(seen[1]) - len(frame(encode(note(3, 1))))]]:
            r, w = await raw_conn(port, s)  # the captured bytes, all at once
            assert await refused(r)
            w.close()
        assert n.t.stats["auth_failures"] == 2
        assert len(n.notes()) == 1
        # A captured channel exchange replayed after its channel closed: refused too.
        ch = ChannelId(3, 1, 1, 1)
        seen = []
        r, w = await member_conn(port, hs_channel(ch), frame(encode(Ping(zxid=1))), sent=seen)
        await n.until(lambda: len(n.received(ch)) == 1)
        w.close()
        await n.until(lambda: ch in n.closed())
        r, w = await raw_conn(port, b"".join(seen))
        assert await refused(r)
        w.close()
        await poll(lambda: n.t.stats["auth_failures"] == 3, "the third refusal")
        assert len(n.received(ch)) == 1
        await stop_all(n)

    run(body)


def test_members_with_the_secret_still_talk_and_others_are_alone() -> None:
    async def body() -> None:
        a, b = await cluster(1, 2)
        stranger = Node(3, secret=OTHER_KEY)
        await stranger.start()
        addrs = {1: ("127.0.0.1", a.t.port), 2: ("127.0.0.1", b.t.port), 3: ("127.0.0.1", stranger.t.port)}
        for x in (a, b, stranger):
            x.t.set_peers(addrs)
        for r in range(1, 4):
            a.t.notify(2, note(1, r))
            stranger.t.notify(1, note(3, r))
            stranger.t.notify(2, note(3, r))
            a.t.notify(3, note(1, r))
        await b.until(lambda: len(b.notes()) == 3)
        await poll(lambda: stranger.t.stats["auth_failures"] >= 2, "the stranger's and its peers' refusals")
        await poll(lambda: a.t.stats["auth_failures"] >= 1 and b.t.stats["auth_failures"] >= 1, "refusals")
        assert {e.sender for e in a.notes()} <= {2} and {e.sender for e in b.notes()} == {1}
        assert stranger.notes() == []
        assert [e for e in a.events if isinstance(e, Received)] == []
        await stop_all(a, b, stranger)

    run(body)


def test_mutual_tls_between_transports_refuses_plaintext_and_foreign_certificates(tmp_path) -> None:
    from zabray.config import EnsembleConfig
    from zabray.net.tls import client_context, make_certs, server_context

    make_certs(tmp_path / "ca", ["node"])
    make_certs(tmp_path / "other", ["node"])

    def contexts(d: str) -> dict[str, Any]:
        cfg = EnsembleConfig.load(None, tls=True, tls_ca=str(tmp_path / "ca/ca.pem"),
                                  tls_cert=str(tmp_path / d / "node.pem"), tls_key=str(tmp_path / d / "node.key"))
        return {"ssl_server": server_context(cfg), "ssl_client": client_context(cfg)}

    async def body() -> None:
        leader, learner = Node(1, **contexts("ca")), Node(2, **contexts("ca"))
        foreign = Node(3, **contexts("other"))  # the right secret, a certificate from another CA
        addrs = {n.sid: ("127.0.0.1", await n.start()) for n in (leader, learner, foreign)}
        for n in (leader, learner, foreign):
            n.t.set_peers(addrs)
        ch = ChannelId(2, 1, 1, 1)
        learner.t.open(ch)
        learner.t.send(ch, Ping(zxid=5))
        await leader.until(lambda: leader.received(ch) == [Ping(zxid=5)])
        leader.t.send(ch, Commit(Zxid.of(1, 1)))
        await learner.until(lambda: learner.received(ch) == [Commit(Zxid.of(1, 1))])
        # Plaintext to a TLS port: no handshake is ever read.
        r, w = await raw_conn(leader.t.port, hs_channel(ChannelId(3, 1, 1, 1)))
        assert await refused(r)
        w.close()
        # Another CA's certificate, either way round.
        ch3 = ChannelId(3, 1, 1, 1)
        foreign.t.open(ch3)
        await foreign.until(lambda: ch3 in foreign.closed(), what="the foreign channel refused")
        foreign.t.notify(1, note(3, 1))
        leader.t.notify(3, note(1, 1))
        await poll(lambda: leader.t.stats["connect_failures"] >= 1, "the leader refusing the foreign replica")
        assert leader.notes() == [] and foreign.notes() == []
        assert [e for e in leader.events if not (isinstance(e, Received) and e.channel == ch)] == []
        await stop_all(leader, learner, foreign)

    run(body)
