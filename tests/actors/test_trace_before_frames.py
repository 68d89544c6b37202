"""A replica's trace reaches the kernel before the frames it records: three real replica
servers on one event loop, real TCP and real files, and at every socket write of a PROPOSAL the
leader's trace file on disk (read through a file of its own, as the checker would after a
SIGKILL) already holds that txn's ``propose`` row. Were it otherwise, a leader killed right after
its PROPOSALs left would leave a run in which followers delivered txns nobody proposed, and the
checker would report an integrity violation that did not happen."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from actors.peer_conn import PeerConn
from actors.replica import ReplicaServer
from zabray.client.broadcast import EnsembleClient
from zabray.errors import CodecError
from zabray.protocol.codec import decode
from zabray.protocol.messages import Proposal, Proposals
from zabray.trace.records import expand
from zabray.wire.framing import FrameDecoder

pytestmark = pytest.mark.timeout(120)

ENS = "trace-order"


def proposed_on_disk(path: Path) -> set[int]:
    """The zxids of the whole ``propose`` rows in the file now (a torn last line is not a row)."""
    text = path.read_text()
    rows = [r for line in text[: text.rfind("\n") + 1].splitlines() for r in expand(json.loads(line))]
    return {r["zxid"] for r in rows if r.get("kind") == "propose"}


def message(payload: bytes) -> object:
    """The protocol message a frame holds; None for the other frames (handshakes, elections)."""
    try:
        return decode(payload)
    except CodecError:
        return None


def test_a_proposal_never_leaves_ahead_of_its_propose_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    servers: dict[int, ReplicaServer] = {}
    checked: list[int] = []
    missing: list[int] = []
    original = PeerConn.flush

    def flush(conn: PeerConn) -> None:
        """Look at what is about to be written and at the writer's trace file, then write it."""
        server = servers.get(getattr(conn.owner, "sid", -1))
        if server is not None and server._trace is not None and conn.has_output() and conn.transport is not None \
                and not conn.paused and conn.authed and not conn.closed:
            if conn.batch:
                conn.put_batch()  # the burst's PROPOSALs, framed as the flush would
            data = bytes(conn.out.take())
            payloads = FrameDecoder(conn.out.max_frame).feed(data)
            for p in payloads:
                conn.out.add_payload(p)
            msgs = list(map(message, payloads))
            zxids = [int(m.txn.zxid) for m in msgs if isinstance(m, Proposal)]
            zxids += [int(t.zxid) for m in msgs if isinstance(m, Proposals) for t in m.txns]
            if zxids:
                on_disk = proposed_on_disk(run_dir / "trace" / f"replica-{server.sid}-inc{server.incarnation}.jsonl")
                checked.extend(zxids)
                missing.extend(z for z in zxids if z not in on_disk)
        original(conn)

    monkeypatch.setattr(PeerConn, "flush", flush)

    async def body() -> None:
        for sid in (1, 2, 3):
            servers[sid] = ReplicaServer(ensemble=ENS, sid=sid, config={"fsync": False}, voters=[1, 2, 3],
                                         observers=[], data_dir=str(tmp_path / f"r{sid}"), run_dir=str(run_dir))
        infos = {sid: await s.start() for sid, s in servers.items()}
        client = EnsembleClient(ENS, {sid: tuple(i["client"]) for sid, i in infos.items()})
        try:
            for s in servers.values():
                s.set_peers({sid: tuple(i["quorum"]) for sid, i in infos.items()})
            # Pipelined writes, so PROPOSALs also leave from the callbacks that read ACKs and
            # client requests, not only after a group commit.
            for _ in range(5):
                await asyncio.gather(*(client.submit(f"v{i}".encode(), timeout=30) for i in range(20)))
        finally:
            client.close()
            for s in servers.values():
                await s.stop()

    asyncio.run(asyncio.wait_for(body(), 90))
    assert len(set(checked)) >= 50, f"only {len(set(checked))} txns were written as PROPOSALs"
    assert not missing, f"{len(missing)} of {len(checked)} PROPOSALs left before their propose row, e.g. {missing[:5]}"
