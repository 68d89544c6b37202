"""Members only, on real ensembles over real sockets: rogue processes that know the ensemble's
name but not its secret change nothing; another ensemble's replica cannot join; the broadcast
client port needs the secret while ZooKeeper sessions connect without it; the secret never
shows in status, descriptions or traces."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
from pathlib import Path
from typing import Any

import msgpack
import pytest

from actors.replica import ReplicaServer
from actors.status import ReplicaStatus
from tests.driver.conftest import assert_no_loss, converged, wait_until
from zabray.driver.workload import Workload
from zabray.net.keyfiles import new_secret
from zabray.protocol.codec import encode
from zabray.protocol.events import ChannelId
from zabray.protocol.messages import NewLeader, Notification, Ping, Proposal, Trunc, Txn
from zabray.protocol.zxid import Zxid
from zabray.wire.auth import PEER, AuthFailed, Connector, Secret, _mac, _pack
from zabray.wire.clientproto import StatusRep
from zabray.wire.framing import KIND_CHANNEL, KIND_ELECTION, FrameDecoder, Handshake, frame

pytestmark = pytest.mark.ray


def closed(s: socket.socket) -> bool:
    """Read until the replica closes on us (after whatever it sent first); False if it never does."""
    s.settimeout(10)
    try:
        while s.recv(1 << 16):
            pass
    except (ConnectionResetError, BrokenPipeError):
        pass
    except TimeoutError:
        return False
    return True


def rogue(addr: tuple[str, int], handshake: bytes, zab: list[Any], secret: Secret | None | str) -> bool:
    """Open a connection as a member would, prove membership with ``secret`` (or a random proof
    without one), then send well-formed Zab frames; with ``secret="skip"``, send the Zab frames
    straight after the handshake, as before authentication existed. True if the replica closed it."""
    with socket.create_connection(addr, timeout=5) as s:
        if secret == "skip":
            s.sendall(frame(handshake) + b"".join(frame(encode(m)) for m in zab))
            return closed(s)
        assert not isinstance(secret, str)
        auth = Connector(secret or Secret(os.urandom(32)), PEER + handshake, os.urandom(32))
        s.sendall(frame(handshake) + frame(auth.hello()))
        s.settimeout(10)
        dec = FrameDecoder()
        got: list[bytes] = []
        while not got:
            data = s.recv(1 << 16)
            if not data:
                return True
            got = dec.feed(data)
        try:
            proof = auth.proof(got[0])
        except AuthFailed:  # a rogue ignores that the replica proved another secret, and forges on
            nonce_a = msgpack.unpackb(got[0])[3]
            proof = _pack("PROOF", _mac(auth.secret, b"connector", auth.context, auth.nonce, nonce_a))
        try:
            s.sendall(frame(proof) + b"".join(frame(encode(m)) for m in zab))
        except (ConnectionResetError, BrokenPipeError):
            return True
        return closed(s)


def snapshot(ens: Any) -> dict[int, ReplicaStatus]:
    return {s.sid: s for s in ens.status()}


def test_rogue_zab_frames_on_election_and_peer_ports_change_nothing(start) -> None:
    ens = start(3)
    leader = ens.wait_for_leader(30)
    wl = Workload(ens, in_flight=50, size=256).start()
    wait_until(lambda: len(wl.result.acked) >= 50, what="the workload committing")
    # A quorum commits without the third replica: wait until it too is synced (its epoch set),
    # or its epoch moves during the attacks by its own sync and looks like their doing.
    wait_until(lambda: all(s.alive and s.phase == "broadcast" for s in ens.status()), what="every replica synced")
    before = snapshot(ens)
    hist_before = ens.histories()
    other = new_secret()  # another ensemble with the same name
    for sid, info in ens.info["replicas"].items():
        addr = (info["quorum"][0], int(info["quorum"][1]))
        peer = next(s for s in ens.info["replicas"] if s != sid)
        high = Notification(sender=peer, state=0, leader=peer, zxid=Zxid.of(1000, 5), epoch=1000, round=1000)
        forged = [NewLeader(1000, Zxid.of(1000, 0)), Trunc(Zxid.of(1, 0)),
                  Proposal(Txn(Zxid.of(1000, 1), b"evil", origin=peer, request_id=1))]
        for secret in ("skip", None, other):
            assert rogue(addr, Handshake(ens.name, peer, KIND_ELECTION).encode(), [high] * 3, secret)
            ch = ChannelId(peer, sid, 10**6, 10**6)  # newer than anything: would replace peer's channel
            assert rogue(addr, Handshake(ens.name, peer, KIND_CHANNEL, ch).encode(), forged, secret)
    # The flood the issue describes: 80 forged "newer channel" handshakes at the leader.
    laddr = (ens.info["replicas"][leader]["quorum"][0], int(ens.info["replicas"][leader]["quorum"][1]))
    peer = next(s for s in ens.info["replicas"] if s != leader)
    for i in range(80):
        ch = ChannelId(peer, leader, 10**6 + i, 1)
        assert rogue(laddr, Handshake(ens.name, peer, KIND_CHANNEL, ch).encode(), [Ping(zxid=0)],
                     ("skip", None, other)[i % 3])
    n = len(wl.result.acked)
    wait_until(lambda: len(wl.result.acked) >= n + 50, what="commits after the attacks")
    r = wl.stop()
    after = snapshot(ens)
    assert ens.leader() == leader
    for sid in before:
        assert after[sid].epoch == before[sid].epoch, f"replica {sid}'s epoch moved"
        assert after[sid].transport["channels_replaced"] == before[sid].transport["channels_replaced"]
        assert after[sid].transport["auth_failures"] >= before[sid].transport["auth_failures"] + 6
    assert after[leader].transport["auth_failures"] >= before[leader].transport["auth_failures"] + 84
    assert r.count("unknown") == 0 and r.count("failed") == 0, "the workload saw failures"
    wait_until(lambda: converged(ens), what="convergence")
    hist_after = ens.histories()
    for sid, h in hist_before.items():  # nothing truncated: every history only grew
        assert hist_after[sid][: len(h)] == h
    assert_no_loss(ens, r.acked)


def _run_in_thread(coro_fn: Any) -> tuple[asyncio.AbstractEventLoop, Any]:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return loop, asyncio.run_coroutine_threadsafe(coro_fn(), loop).result(30)


def test_a_replica_with_another_secret_cannot_join_and_the_real_one_rejoins_from_disk(start, tmp_path) -> None:
    ens = start(3)
    ens.wait_for_leader(30)
    from zabray.trace import records as trace

    acked: dict[int, str] = {}

    for v in [b"a", b"b"]:
        acked[int(ens.submit(v))] = trace.digest(v)
    victim = next(s for s in ens.info["replicas"] if s != ens.leader())
    ens.kill(victim)
    # An impostor: same ensemble name, same sid, another secret, its own empty disk.
    imp = ReplicaServer(ensemble=ens.name, sid=victim, config=ens.info["config"], voters=[1, 2, 3], observers=[],
                        data_dir=str(tmp_path / "impostor"), secret=new_secret())
    loop, info = _run_in_thread(imp.start)
    try:
        addrs = {s: tuple(i["quorum"]) for s, i in ens.info["replicas"].items() if s != victim}
        addrs[victim] = tuple(info["quorum"])
        loop.call_soon_threadsafe(imp.set_peers, addrs)
        base = {s.sid: s.transport["auth_failures"] for s in ens.status() if s.alive}
        for v in [b"c", b"d"]:
            acked[int(ens.submit(v))] = trace.digest(v)
        wait_until(lambda: imp.transport is not None and imp.transport.stats["auth_failures"] >= 2,
                   what="the impostor's attempts being refused")
        wait_until(lambda: all(s.transport["auth_failures"] > base[s.sid] for s in ens.status() if s.alive),
                   what="the members refusing the impostor")
        assert imp.node is not None and imp.node.state.name == "LOOKING" and int(imp.node.applied) == 0
    finally:
        asyncio.run_coroutine_threadsafe(imp.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
    ens.restart(victim)  # from its own disk, with the ensemble's secret
    for v in [b"e", b"f"]:
        acked[int(ens.submit(v))] = trace.digest(v)
    wait_until(lambda: converged(ens), what="the restarted replica catching up")
    assert_no_loss(ens, acked)


def test_the_broadcast_port_needs_the_secret_but_zookeeper_sessions_do_not(start) -> None:
    from zabray.client.broadcast import EnsembleClient, LoopThread, ReplicaConnection
    from zabray.errors import AuthenticationError, NoQuorumError

    ens = start(3, service="zookeeper")
    ens.wait_for_leader(30)
    addrs = {s: tuple(a) for s, a in ens.info["clients"].items()}
    loop = LoopThread()
    try:
        async def status_with(secret: Secret | None) -> StatusRep:
            host, port = addrs[1]
            conn = await ReplicaConnection.open(1, host, port, ens.name, secret=secret)
            try:
                return await asyncio.wait_for(conn.status(), 10)
            finally:
                conn.close()

        assert loop.run(status_with(ens._secret), 30).sid == 1
        with pytest.raises(AuthenticationError, match="did not prove"):
            loop.run(status_with(new_secret()), 30)
        with pytest.raises(ConnectionError):  # no proof at all: the request drops the connection
            loop.run(status_with(None), 30)
        bare = EnsembleClient(ens.name, addrs)
        with pytest.raises(NoQuorumError):
            loop.run(bare.submit(b"no secret", timeout=2), 30)
        loop.loop.call_soon_threadsafe(bare.close)
    finally:
        loop.stop()
    st = snapshot(ens)
    assert st[1].stats["client_auth_failures"] >= 2
    # A ZooKeeper session needs no secret (ZooKeeper's own rules govern it).
    s = ens.session(timeout=5)
    try:
        s.create("/open", b"to everyone")
        assert s.get("/open")[0] == b"to everyone"
    finally:
        s.close()


def test_the_secret_from_secret_file_is_used_and_never_shows(start, tmp_path) -> None:
    from zabray.driver.ensemble import Ensemble
    from zabray.net.keyfiles import read_secret, write_secret

    path = write_secret(tmp_path / "secret")
    ens = start(3, secret_file=str(path))
    ens.wait_for_leader(30)
    ens.submit_many([b"v"] * 10)
    assert ens._secret == read_secret(path)
    key = ens._secret.key
    texts = [json.dumps([s.to_json() for s in ens.status()]), repr(ens.info), repr(ens._secret)]
    run_dir = Path(ens.info["run_dir"])
    blobs = [p.read_bytes() for p in run_dir.rglob("*") if p.is_file()]
    assert blobs, "the run directory holds traces"
    for needle in (key, key.hex().encode()):
        assert all(needle.decode("latin-1") not in t for t in texts)
        assert all(needle not in b for b in blobs)
    # Another driver obtains the secret through Ray, and can write.
    other = Ensemble.connect(ens.name)
    try:
        assert other._secret == ens._secret
        assert int(other.submit(b"from another handle")) > 0
    finally:
        other.close()
