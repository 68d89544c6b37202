"""PeerTransport over real TCP on 127.0.0.1: FIFO channels, election traffic, handshake refusals,
malformed input, partitions and restarts. Every wait is on a condition, bounded by a timeout."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import msgpack
import pytest

from actors.transport import PeerTransport
from tests.polling import until
from zabray.errors import ConfigError
from zabray.protocol.codec import encode
from zabray.protocol.events import ChannelClosed, ChannelId, Event, Notified, Received
from zabray.protocol.messages import (
    Ack,
    Commit,
    Diff,
    FollowerInfo,
    LeaderInfo,
    Message,
    Notification,
    Ping,
    Proposal,
    Proposals,
    Request,
    Requests,
    Txn,
    unbatch,
)
from zabray.protocol.zxid import Zxid
from zabray.wire.auth import PEER, AuthFailed, Connector, Secret, _mac, _pack
from zabray.wire.framing import KIND_CHANNEL, KIND_ELECTION, FrameDecoder, Handshake, frame

ENS = "test-ens"
WAIT = 10.0
KEY = Secret(b"test-ensemble-secret-0123456789ab")
OTHER_KEY = Secret(b"another-ensemble-secret-98765432")

pytestmark = pytest.mark.timeout(60)


def run(body: Callable[[], Awaitable[None]], limit: float = 45.0) -> None:
    asyncio.run(asyncio.wait_for(body(), limit))


class Node:
    """A transport plus everything it delivered, and a way to wait for a condition on that."""

    def __init__(self, sid: int, ensemble: str = ENS, **kw: Any) -> None:
        kw.setdefault("secret", KEY)
        self.sid = sid
        self.events: list[Event] = []
        self._changed = asyncio.Event()
        self.on_event: Callable[[Event], None] | None = None  # extra hook, called after recording
        self.t = PeerTransport(ensemble, sid, self._record, **kw)

    def _record(self, ev: Event) -> None:
        self.events.append(ev)
        self._changed.set()
        if self.on_event is not None:
            self.on_event(ev)

    async def start(self) -> int:
        return await self.t.start()

    async def until(self, pred: Callable[[], bool], timeout: float = WAIT, what: str = "") -> None:
        async def loop() -> None:
            while not pred():
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            raise AssertionError(f"sid {self.sid}: timed out waiting for {what or pred}") from None

    def received(self, ch: ChannelId) -> list[Any]:
        return [e.msg for e in self.events if isinstance(e, Received) and e.channel == ch]

    def closed(self) -> list[ChannelId]:
        return [e.channel for e in self.events if isinstance(e, ChannelClosed)]

    def notes(self) -> list[Notified]:
        return [e for e in self.events if isinstance(e, Notified)]


async def cluster(*sids: int) -> list[Node]:
    nodes = [Node(s) for s in sids]
    addrs = {n.sid: ("127.0.0.1", await n.start()) for n in nodes}
    for n in nodes:
        n.t.set_peers(addrs)
    return nodes


async def stop_all(*nodes: Node) -> None:
    for n in nodes:
        await n.t.stop()


def note(sender: int, rnd: int) -> Notification:
    return Notification(sender=sender, state=0, leader=sender, zxid=0, epoch=0, round=rnd)


def prop(i: int, size: int = 64) -> Proposal:
    return Proposal(Txn(Zxid.of(1, i), i.to_bytes(4, "big") * (size // 4), origin=1, request_id=i))


def flat(msgs: list[Message]) -> list[Message]:
    """What was received, a PROPOSALS or REQUESTS frame counted as its messages."""
    return [x for msg in msgs for x in (unbatch(msg) if type(msg) in (Proposals, Requests) else [msg])]  # type: ignore[arg-type]


async def raw_conn(port: int, *frames_: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"".join(frames_))
    await w.drain()
    return r, w


async def member_conn(
    port: int, first: bytes, *rest: bytes, secret: Secret = KEY, sent: list[bytes] | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection that authenticates like a member: ``first`` is a framed handshake,
    ``rest`` is written once the exchange is done. Every byte written is appended to ``sent``.
    If the acceptor closes the exchange stops there; if it proves another secret, we go on
    with a proof made with ours (as a rogue would)."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    auth = Connector(secret, PEER + first[8:], os.urandom(32))
    out = [first + frame(auth.hello())]
    w.write(out[0])
    dec = FrameDecoder()
    payloads: list[bytes] = []
    while not payloads:
        try:
            data = await asyncio.wait_for(r.read(1 << 16), WAIT)
        except ConnectionResetError:
            data = b""
        if not data:
            break
        payloads = dec.feed(data)
    if payloads:
        try:
            proof = auth.proof(payloads[0])
        except AuthFailed:  # another secret: a rogue ignores that and sends its best forgery
            nonce_a = msgpack.unpackb(payloads[0])[3]
            proof = _pack("PROOF", _mac(secret, b"connector", auth.context, auth.nonce, nonce_a))
        out.append(frame(proof) + b"".join(rest))
        w.write(out[-1])
    await w.drain()
    if sent is not None:
        sent.extend(out)
    return r, w


async def closed_by_peer(r: asyncio.StreamReader) -> bool:
    """True once the peer closes (EOF or reset); fails the test if it stays open."""
    try:
        data = await asyncio.wait_for(r.read(1 << 16), WAIT)
    except (ConnectionResetError, BrokenPipeError):
        return True
    return data == b""


async def poll(pred: Callable[[], bool], what: str) -> None:
    """Wait for a condition that no event announces (a counter)."""
    await until(pred, WAIT, what, interval=0.005)


def hs_channel(ch: ChannelId, sid: int | None = None, ensemble: str = ENS) -> bytes:
    return frame(Handshake(ensemble, ch.learner if sid is None else sid, KIND_CHANNEL, ch).encode())


# -- channels -------------------------------------------------------------------------------------


def test_two_transports_fifo_both_ways() -> None:
    async def body() -> None:
        leader, learner = await cluster(1, 2)
        ch = ChannelId(learner=2, leader=1, incarnation=1, iteration=1)
        n = 5000

        def lead(ev: Event) -> None:  # the leader answers the first packet with a long stream
            if isinstance(ev, Received) and isinstance(ev.msg, FollowerInfo):
                leader.t.send(ch, LeaderInfo(epoch=1))
                for i in range(1, n + 1):
                    leader.t.send(ch, prop(i))

        leader.on_event = lead
        learner.t.open(ch)
        learner.t.send(ch, FollowerInfo(sid=2, accepted_epoch=0, last_zxid=0))
        for i in range(1, n + 1):
            learner.t.send(ch, Ack(Zxid.of(1, i)))
        await learner.until(lambda: len(flat(learner.received(ch))) == n + 1, what="proposals")
        await leader.until(lambda: len(leader.received(ch)) == n + 1, what="acks")
        assert flat(learner.received(ch)) == [LeaderInfo(epoch=1)] + [prop(i) for i in range(1, n + 1)]
        assert any(type(x) is Proposals for x in learner.received(ch))  # a burst is one frame
        assert leader.received(ch) == [FollowerInfo(sid=2, accepted_epoch=0, last_zxid=0)] + [
            Ack(Zxid.of(1, i)) for i in range(1, n + 1)
        ]
        # batching: far fewer writes than frames
        assert learner.t.stats["writes"] < learner.t.stats["frames_out"] / 10
        assert leader.closed() == [] and learner.closed() == []
        await stop_all(leader, learner)

    run(body)


def test_an_answer_queued_while_handling_a_read_is_written_before_the_read_returns() -> None:
    """What handling received frames queues leaves when that socket callback returns, not at a
    later loop turn (after other sockets' reads): the one-request latency depends on it."""

    async def body() -> None:
        leader, learner = await cluster(1, 2)
        ch = ChannelId(learner=2, leader=1, incarnation=1, iteration=1)
        seen: list[tuple[int, int]] = []  # (frames still queued, writes) right after each read

        def lead(ev: Event) -> None:
            if isinstance(ev, Received) and isinstance(ev.msg, Ack):
                leader.t.send(ch, Commit(ev.msg.zxid))

        leader.on_event = lead
        learner.t.open(ch)
        learner.t.send(ch, FollowerInfo(sid=2, accepted_epoch=0, last_zxid=0))
        await leader.until(lambda: ch in leader.t._channels, what="the channel")
        conn = leader.t._channels[ch]
        read = conn.data_received

        def spy(data: bytes) -> None:
            read(data)
            seen.append((len(conn.out), leader.t.stats["writes"]))

        conn.data_received = spy  # type: ignore[method-assign]
        for i in range(1, 4):
            learner.t.send(ch, Ack(Zxid.of(1, i)))
            await learner.until(lambda i=i: Commit(Zxid.of(1, i)) in learner.received(ch), what=f"commit {i}")
        assert seen and all(queued == 0 for queued, _ in seen)
        assert [w for _, w in seen] == sorted({w for _, w in seen})  # each read wrote its answer
        await stop_all(leader, learner)

    run(body)


def test_three_transports_interleaved_channels() -> None:
    async def body() -> None:
        leader, a, b = await cluster(1, 2, 3)
        cha, chb = ChannelId(2, 1, 1, 1), ChannelId(3, 1, 4, 9)
        n = 3000
        a.t.open(cha)
        b.t.open(chb)
        for i in range(1, n + 1):
            a.t.send(cha, Ack(Zxid.of(1, i)))
            b.t.send(chb, Ack(Zxid.of(2, i)))
            if i % 500 == 0:
                await asyncio.sleep(0)  # let some of it go out in separate turns
        await leader.until(lambda: len(leader.received(cha)) == n and len(leader.received(chb)) == n)
        assert leader.received(cha) == [Ack(Zxid.of(1, i)) for i in range(1, n + 1)]
        assert leader.received(chb) == [Ack(Zxid.of(2, i)) for i in range(1, n + 1)]
        for i in range(1, n + 1):
            leader.t.send(cha, Commit(Zxid.of(1, i)))
            leader.t.send(chb, prop(i))
        await a.until(lambda: len(a.received(cha)) == n)
        await b.until(lambda: len(flat(b.received(chb))) == n)
        assert a.received(cha) == [Commit(Zxid.of(1, i)) for i in range(1, n + 1)]
        assert flat(b.received(chb)) == [prop(i) for i in range(1, n + 1)]
        assert a.received(chb) == [] and b.received(cha) == []
        await stop_all(leader, a, b)

    run(body)


def test_a_burst_of_proposals_is_one_frame_and_keeps_its_place_among_other_messages() -> None:
    async def body() -> None:
        leader, learner = await cluster(1, 2)
        ch = await announced(leader, learner, ChannelId(2, 1, 1, 1))
        for msg in (prop(1), prop(2), Commit(Zxid.of(1, 1)), prop(3), prop(4), prop(5), Ping(zxid=5)):
            leader.t.send(ch, msg)  # one loop turn: one burst
        await learner.until(lambda: len(learner.received(ch)) == 4)
        assert learner.received(ch) == [
            Proposals((prop(1).txn, prop(2).txn)), Commit(Zxid.of(1, 1)),
            Proposals((prop(3).txn, prop(4).txn, prop(5).txn)), Ping(zxid=5),
        ]
        # A learner's forwarded requests go the same way, as one REQUESTS frame.
        for rid in (7, 8, 9):
            learner.t.send(ch, Request(2, rid, b"v%d" % rid))
        await leader.until(lambda: len(leader.received(ch)) == 2)
        assert leader.received(ch)[1] == Requests(2, ((7, b"v7"), (8, b"v8"), (9, b"v9")))
        await stop_all(leader, learner)

    run(body)


async def announced(leader: Node, learner: Node, ch: ChannelId) -> ChannelId:
    """Open ``ch`` from the learner and wait until the leader has its first packet (a PING)."""
    learner.t.open(ch)
    learner.t.send(ch, Ping(zxid=0))
    await leader.until(lambda: len(leader.received(ch)) == 1)
    return ch


async def small_frames_channel() -> tuple[Node, Node, ChannelId]:
    """A leader and a learner whose frames hold at most 10,000 bytes, and their open channel."""
    leader = Node(1, max_frame=10_000)
    learner = Node(2, max_frame=10_000)
    addrs = {1: ("127.0.0.1", await leader.start()), 2: ("127.0.0.1", await learner.start())}
    leader.t.set_peers(addrs)
    learner.t.set_peers(addrs)
    ch = await announced(leader, learner, ChannelId(2, 1, 1, 1))
    return leader, learner, ch


def test_a_burst_of_large_proposals_is_split_into_frames_under_the_limit() -> None:
    async def body() -> None:
        leader, learner, ch = await small_frames_channel()
        for i in range(1, 21):
            leader.t.send(ch, prop(i, size=1_000))  # 20 KB in one burst, each 1 KB frame allowed
        await learner.until(lambda: len(flat(learner.received(ch))) == 20)
        assert flat(learner.received(ch)) == [prop(i, size=1_000) for i in range(1, 21)]
        assert 4 <= len(learner.received(ch)) < 20  # several frames, each under the 10 KB limit
        assert leader.closed() == [] and learner.closed() == []
        await stop_all(leader, learner)

    run(body)


def test_large_frames_cross_many_reads() -> None:
    async def body() -> None:
        leader, learner = await cluster(1, 2)
        ch = await announced(leader, learner, ChannelId(2, 1, 1, 1))
        big = Diff(tuple(Txn(Zxid.of(1, i), bytes([i]) * 100_000) for i in range(1, 41)))  # ~4 MB
        leader.t.send(ch, big)
        leader.t.send(ch, Commit(Zxid.of(1, 40)))
        await learner.until(lambda: len(learner.received(ch)) == 2)
        assert learner.received(ch) == [big, Commit(Zxid.of(1, 40))]
        await stop_all(leader, learner)

    run(body)


def test_close_is_seen_by_the_other_side_only() -> None:
    async def body() -> None:
        leader, learner = await cluster(1, 2)
        ch1, ch2 = ChannelId(2, 1, 1, 1), ChannelId(2, 1, 1, 2)
        # learner closes
        learner.t.open(ch1)
        learner.t.send(ch1, Ping(zxid=0))
        await leader.until(lambda: len(leader.received(ch1)) == 1)
        learner.t.close(ch1)
        await leader.until(lambda: leader.closed() == [ch1], what="ChannelClosed at leader")
        # leader closes; what it queued before closing still arrives
        learner.t.open(ch2)
        learner.t.send(ch2, Ping(zxid=0))
        await leader.until(lambda: len(leader.received(ch2)) == 1)
        leader.t.send(ch2, Commit(Zxid.of(1, 1)))
        leader.t.close(ch2)
        await learner.until(lambda: learner.closed() == [ch2], what="ChannelClosed at learner")
        assert learner.received(ch2) == [Commit(Zxid.of(1, 1))]
        # nobody heard about their own closes; sends on closed channels are dropped quietly
        learner.t.send(ch2, Ping(zxid=0))
        leader.t.send(ch1, Ping(zxid=0))
        assert leader.closed() == [ch1] and learner.closed() == [ch2]
        assert leader.t.stats["sends_dropped"] == 1 and learner.t.stats["sends_dropped"] == 1
        await stop_all(leader, learner)

    run(body)


def test_newer_iteration_replaces_the_old_channel() -> None:
    async def body() -> None:
        leader, learner = await cluster(1, 2)
        old, new = ChannelId(2, 1, 3, 7), ChannelId(2, 1, 3, 8)
        learner.t.open(old)
        learner.t.send(old, Ping(zxid=1))
        await leader.until(lambda: len(leader.received(old)) == 1)
        learner.t.open(new)  # the learner's old iteration has not closed its channel yet
        learner.t.send(new, Ping(zxid=2))
        await leader.until(lambda: len(leader.received(new)) == 1)
        # the old channel was closed before the new one delivered anything
        i_closed = leader.events.index(ChannelClosed(old))
        i_new = next(i for i, e in enumerate(leader.events) if isinstance(e, Received) and e.channel == new)
        assert i_closed < i_new
        await learner.until(lambda: old in learner.closed(), what="old channel closed at learner")
        assert leader.t.stats["channels_replaced"] == 1
        leader.t.send(new, Commit(Zxid.of(1, 1)))
        await learner.until(lambda: learner.received(new) == [Commit(Zxid.of(1, 1))])
        # a new incarnation beats any iteration of an older one
        newer = ChannelId(2, 1, 4, 0)
        learner.t.open(newer)
        learner.t.send(newer, Ping(zxid=3))
        await leader.until(lambda: len(leader.received(newer)) == 1)
        assert new in leader.closed()
        await stop_all(leader, learner)

    run(body)


def test_bad_handshakes_are_refused_and_the_legit_channel_survives() -> None:
    async def body() -> None:
        leader, learner = await cluster(1, 2)
        port = leader.t.port
        ch = await announced(leader, learner, ChannelId(2, 1, 5, 5))
        ping = frame(encode(Ping(zxid=9)))
        # Every attempt holds the secret: these are the rules a member must follow too.
        attempts = [
            (hs_channel(ChannelId(3, 1, 1, 1), ensemble="other-ensemble"), ping),  # wrong ensemble
            (hs_channel(ChannelId(2, 1, 5, 4)), ping),  # old iteration of learner 2
            (hs_channel(ChannelId(2, 1, 4, 99)), ping),  # old incarnation of learner 2
            (hs_channel(ChannelId(2, 1, 5, 5)), ping),  # the same channel again
            (hs_channel(ChannelId(3, 7, 1, 1)), ping),  # names another leader
            (hs_channel(ChannelId(3, 1, 1, 1), sid=4), ping),  # learner is not the sender
            (frame(Handshake("other-ensemble", 3, KIND_ELECTION).encode()), frame(encode(note(3, 1)))),
        ]
        for first, data in attempts:
            r, w = await member_conn(port, first, data)
            assert await closed_by_peer(r)
            w.close()
        assert leader.t.stats["refused_handshakes"] == len(attempts)
        assert leader.t.stats["auth_failures"] == 0
        assert leader.closed() == [] and learner.closed() == []
        assert [e for e in leader.events if not (isinstance(e, Received) and e.channel == ch)] == []
        for i in range(100):
            learner.t.send(ch, Ack(Zxid.of(1, i + 1)))
            leader.t.send(ch, Commit(Zxid.of(1, i + 1)))
        await leader.until(lambda: len(leader.received(ch)) == 101)
        await learner.until(lambda: len(learner.received(ch)) == 100)
        await stop_all(leader, learner)

    run(body)


def test_malformed_input_drops_only_that_connection() -> None:
    async def body() -> None:
        leader, learner = await cluster(1, 2)
        port = leader.t.port
        ch = await announced(leader, learner, ChannelId(2, 1, 1, 1))

        # garbage before any handshake
        r, w = await raw_conn(port, b"\x00\x00\x00\x05garbage-garbage" * 10)
        assert await closed_by_peer(r)
        w.close()
        # a frame too large for the limit
        r, w = await raw_conn(port, struct.pack(">II", (64 << 20) + 1, 0))
        assert await closed_by_peer(r)
        w.close()
        # an election connection that ends inside a frame
        r, w = await member_conn(
            port, frame(Handshake(ENS, 3, KIND_ELECTION).encode()), frame(encode(note(3, 1)))[:-2]
        )
        w.write_eof()
        assert await closed_by_peer(r)
        w.close()
        # an announced channel from learner 3, then a frame with a good CRC that is not a message
        ch3 = ChannelId(3, 1, 1, 1)
        r, w = await member_conn(port, hs_channel(ch3), frame(encode(Ping(zxid=4))))
        await leader.until(lambda: len(leader.received(ch3)) == 1)
        w.write(frame(b"\x93\x01\x02\x03"))
        assert await closed_by_peer(r)
        await leader.until(lambda: ch3 in leader.closed(), what="ChannelClosed for the bad channel")
        w.close()
        # a channel message that only a leader may send, from a learner
        ch4 = ChannelId(4, 1, 1, 1)
        r, w = await member_conn(port, hs_channel(ch4), frame(encode(Ping(zxid=4))), frame(encode(prop(1))))
        assert await closed_by_peer(r)
        await leader.until(lambda: ch4 in leader.closed())
        w.close()
        # an election notification on a channel, and a channel packet on an election connection
        ch5 = ChannelId(5, 1, 1, 1)
        r, w = await member_conn(port, hs_channel(ch5), frame(encode(note(5, 1))))
        assert await closed_by_peer(r)
        w.close()
        r, w = await member_conn(
            port, frame(Handshake(ENS, 6, KIND_ELECTION).encode()), frame(encode(Ping(zxid=1)))
        )
        assert await closed_by_peer(r)
        w.close()
        # a notification whose sender is not the handshake's
        r, w = await member_conn(
            port, frame(Handshake(ENS, 6, KIND_ELECTION).encode()), frame(encode(note(7, 1)))
        )
        assert await closed_by_peer(r)
        w.close()

        assert leader.t.stats["bad_frames"] == 8
        assert leader.notes() == []
        assert ch not in leader.closed() and learner.closed() == []
        learner.t.send(ch, Ack(Zxid.of(1, 1)))
        leader.t.send(ch, Commit(Zxid.of(1, 1)))
        await leader.until(lambda: leader.received(ch)[-1] == Ack(Zxid.of(1, 1)))
        await learner.until(lambda: learner.received(ch) == [Commit(Zxid.of(1, 1))])
        # election traffic still works too
        learner.t.notify(1, note(2, 1))
        await leader.until(lambda: len(leader.notes()) == 1)
        await stop_all(leader, learner)

    run(body)


def test_connection_without_handshake_times_out() -> None:
    async def body() -> None:
        (n,) = await cluster(1)
        n.t.handshake_timeout = 0.2
        r, w = await raw_conn(n.t.port, b"\x00\x00")
        assert await closed_by_peer(r)
        w.close()
        assert n.t.stats["refused_handshakes"] == 1
        await stop_all(n)

    run(body)


# -- election ---------------------------------------------------------------------------------------


def test_notifications_both_ways_and_loopback() -> None:
    async def body() -> None:
        a, b, c = await cluster(1, 2, 3)
        for r in range(1, 201):
            a.t.notify(2, note(1, r))
            a.t.notify(3, note(1, r))
            b.t.notify(1, note(2, r))
            c.t.notify(1, note(3, r))
        a.t.notify(1, note(1, 0))
        await a.until(lambda: len(a.notes()) == 401)
        await b.until(lambda: len(b.notes()) == 200)
        await c.until(lambda: len(c.notes()) == 200)
        assert [e.note.round for e in b.notes()] == list(range(1, 201))  # one connection: in order
        assert {e.sender for e in a.notes()} == {1, 2, 3}
        assert all(e.sender == e.note.sender for e in a.notes())
        # one long-lived connection per direction
        assert a.t.stats["connects"] == 2 and b.t.stats["connects"] == 1
        # unknown peers are dropped, not an error
        a.t.notify(42, note(1, 1))
        assert a.t.stats["notes_dropped"] == 1
        await stop_all(a, b, c)

    run(body)


# -- faults -----------------------------------------------------------------------------------------


async def resend_until(sender: Node, to: int, receiver: Node, nid: int) -> None:
    """Best effort delivery: re-send (as the election does) until one copy gets through."""

    def got() -> bool:
        return any(e.note.round == nid for e in receiver.notes())

    for _ in range(200):
        sender.t.notify(to, note(sender.sid, nid))
        try:
            await receiver.until(got, timeout=0.05)
            return
        except AssertionError:
            continue
    raise AssertionError(f"notification {nid} never arrived")


def test_block_and_unblock() -> None:
    async def body() -> None:
        leader, learner, other = await cluster(1, 2, 3)
        ch = await announced(leader, learner, ChannelId(2, 1, 1, 1))
        await resend_until(learner, 1, leader, 1)
        await resend_until(leader, 2, learner, 1)

        leader.t.block({2})
        await learner.until(lambda: ch in learner.closed(), what="learner sees the cut")
        await leader.until(lambda: ch in leader.closed(), what="leader sees the cut")
        # new channels from the blocked peer are refused, in either direction
        refused_before = leader.t.stats["refused_handshakes"]
        ch2 = ChannelId(2, 1, 1, 2)
        learner.t.open(ch2)
        await learner.until(lambda: ch2 in learner.closed(), what="refused channel")
        assert leader.t.stats["refused_handshakes"] == refused_before + 1
        learner.t.notify(1, note(2, 2))  # reconnects its election connection: refused at the handshake
        await poll(lambda: leader.t.stats["refused_handshakes"] == refused_before + 2, "election refusal")
        leader.t.notify(2, note(1, 2))
        assert leader.t.stats["notes_dropped"] == 1
        # the unblocked peer is unaffected meanwhile
        await resend_until(other, 1, leader, 3)
        assert not any(e.sender == 2 and e.note.round == 2 for e in leader.notes())

        leader.t.unblock({2})
        await resend_until(learner, 1, leader, 4)
        await resend_until(leader, 2, learner, 4)
        ch3 = ChannelId(2, 1, 1, 3)
        learner.t.open(ch3)
        learner.t.send(ch3, Ping(zxid=5))
        await leader.until(lambda: leader.received(ch3) == [Ping(zxid=5)])
        await stop_all(leader, learner, other)

    run(body)


def test_peer_restarting_on_a_new_port_is_reachable_after_set_peers() -> None:
    async def body() -> None:
        a, b = await cluster(1, 2)
        await resend_until(a, 2, b, 1)
        ch = ChannelId(1, 2, 1, 1)  # a follows b
        a.t.open(ch)
        a.t.send(ch, Ping(zxid=0))
        await b.until(lambda: len(b.received(ch)) == 1)
        await b.t.stop()
        await a.until(lambda: ch in a.closed(), what="channel to the stopped leader closes")
        assert b.events[-1] == Received(ch, Ping(zxid=0))  # nothing after stop

        b2 = Node(2)
        port2 = await b2.start()
        assert port2 != b.t.port
        a.t.set_peers({1: ("127.0.0.1", a.t.port), 2: ("127.0.0.1", port2)})
        b2.t.set_peers({1: ("127.0.0.1", a.t.port), 2: ("127.0.0.1", port2)})
        await resend_until(a, 2, b2, 2)
        await resend_until(b2, 1, a, 2)
        ch2 = ChannelId(1, 2, 1, 2)
        a.t.open(ch2)
        a.t.send(ch2, Ping(zxid=1))
        await b2.until(lambda: b2.received(ch2) == [Ping(zxid=1)])
        b2.t.send(ch2, Commit(Zxid.of(1, 1)))
        await a.until(lambda: a.received(ch2) == [Commit(Zxid.of(1, 1))])
        await stop_all(a, b2)

    run(body)


def test_open_to_an_unreachable_leader_reports_closed() -> None:
    async def body() -> None:
        a, b = await cluster(1, 2)
        dead_port = b.t.port
        await b.t.stop()
        ch = ChannelId(1, 2, 1, 1)
        a.t.open(ch)
        a.t.send(ch, Ping(zxid=0))
        await a.until(lambda: a.closed() == [ch])
        assert a.t.stats["connect_failures"] == 1
        # no address at all: also ChannelClosed, on a later turn rather than inside open()
        a.t.set_peers({1: ("127.0.0.1", a.t.port)})
        ch2 = ChannelId(1, 2, 1, 2)
        a.t.open(ch2)
        assert a.closed() == [ch]
        await a.until(lambda: a.closed() == [ch, ch2])
        # closing a channel whose ChannelClosed is still pending cancels the event
        ch3 = ChannelId(1, 2, 1, 3)
        a.t.open(ch3)
        a.t.close(ch3)
        a.t.notify(1, note(1, 9))  # loopback: delivered after the (cancelled) close would have been
        await a.until(lambda: len(a.notes()) == 1)
        assert a.closed() == [ch, ch2]
        assert dead_port
        await stop_all(a)

    run(body)


def test_misuse_raises_config_error() -> None:
    async def body() -> None:
        a, b = await cluster(1, 2)
        with pytest.raises(ConfigError):
            a.t.open(ChannelId(2, 1, 1, 1))  # a is not the learner
        ch = ChannelId(1, 2, 1, 1)
        a.t.open(ch)
        with pytest.raises(ConfigError):
            a.t.send(ch, Commit(Zxid.of(1, 1)))  # learners do not commit
        with pytest.raises(ConfigError):
            a.t.send(ch, note(1, 1))  # notifications go through notify
        a.t.close(ch)
        await stop_all(a, b)

    run(body)


def test_oversized_send_closes_the_channel() -> None:
    async def body() -> None:
        leader, learner, ch = await small_frames_channel()
        leader.t.send(ch, Commit(Zxid.of(1, 1)))
        leader.t.send(ch, prop(2, size=20_000))
        await leader.until(lambda: leader.closed() == [ch])
        await learner.until(lambda: learner.closed() == [ch])
        assert learner.received(ch) == [Commit(Zxid.of(1, 1))]  # a prefix, no gap
        await stop_all(leader, learner)

    run(body)


def test_handler_may_close_mid_batch_and_exceptions_do_not_escape() -> None:
    async def body() -> None:
        leader, learner = await cluster(1, 2)
        ch = ChannelId(2, 1, 1, 1)

        def handler(ev: Event) -> None:
            if isinstance(ev, Received) and ev.msg == Ack(Zxid.of(1, 10)):
                leader.t.close(ch)
            if isinstance(ev, Received) and ev.msg == Ack(Zxid.of(1, 5)):
                raise RuntimeError("a buggy handler")

        leader.on_event = handler
        learner.t.open(ch)
        for i in range(1, 101):
            learner.t.send(ch, Ack(Zxid.of(1, i)))
        await learner.until(lambda: ch in learner.closed())
        assert leader.received(ch) == [Ack(Zxid.of(1, i)) for i in range(1, 11)]
        assert leader.closed() == []
        await stop_all(leader, learner)

    run(body)
