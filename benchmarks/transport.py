"""Throughput smoke test of ``actors.transport`` (not a timed test).

A leader streams N PROPOSALs (``--size`` byte values) down one channel to a learner, keeping at
most ``--window`` unacknowledged (ZooKeeper's default cap on outstanding proposals is 1000); the
learner ACKs cumulatively every ``--ack-every`` proposals. By default leader and learner run in
separate processes, as replica actors do; ``--inproc`` puts both on one event loop.

    .venv/bin/python benchmarks/transport.py [--n 200000] [--size 1024] [--window 1000] [--inproc]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import time
from typing import Any

from actors.transport import PeerTransport
from zabray.client.broadcast import new_event_loop
from zabray.experiments.machine import machine_line
from zabray.protocol.events import ChannelId, Event, Received
from zabray.protocol.messages import Ack, FollowerInfo, Proposal, Proposals, Txn, unbatch
from zabray.protocol.zxid import Zxid

ENS = "bench"
CH = ChannelId(learner=2, leader=1, incarnation=1, iteration=1)


class Leader:
    def __init__(self, n: int, size: int, window: int) -> None:
        self.n, self.window = n, window
        self.value = b"v" * size
        self.sent = 0
        self.acked = 0
        self.done = asyncio.Event()
        self.t = PeerTransport(ENS, 1, self.on_event)

    def pump(self) -> None:
        limit = min(self.n, self.acked + self.window)
        send, value = self.t.send, self.value
        for i in range(self.sent + 1, limit + 1):
            send(CH, Proposal(Txn(Zxid.of(1, i), value, origin=1, request_id=i)))
        self.sent = max(self.sent, limit)

    def on_event(self, ev: Event) -> None:
        if isinstance(ev, Received):
            if isinstance(ev.msg, Ack):
                self.acked = ev.msg.zxid & 0xFFFFFFFF
                if self.acked >= self.n:
                    self.done.set()
            self.pump()


class Learner:
    def __init__(self, n: int, ack_every: int) -> None:
        self.n, self.ack_every = n, ack_every
        self.got = 0
        self.t0 = 0.0
        self.t1 = 0.0
        self.done = asyncio.Event()
        self.t = PeerTransport(ENS, 2, self.on_event)

    def on_event(self, ev: Event) -> None:
        # The transport frames a burst of PROPOSALs as one Proposals message, as a replica's do.
        if isinstance(ev, Received) and isinstance(ev.msg, (Proposal, Proposals)):
            for msg in unbatch(ev.msg) if isinstance(ev.msg, Proposals) else [ev.msg]:
                self.one(msg)  # type: ignore[arg-type]

    def one(self, msg: Proposal) -> None:
        if self.got == 0:
            self.t0 = time.perf_counter()
        self.got += 1
        if self.got % self.ack_every == 0 or self.got == self.n:
            self.t.send(CH, Ack(msg.txn.zxid))
        if self.got == self.n:
            self.t1 = time.perf_counter()
            self.done.set()

    def start_channel(self) -> None:
        self.t.open(CH)
        self.t.send(CH, FollowerInfo(sid=2, accepted_epoch=0, last_zxid=0))


async def _leader_proc(args: Any, conn: Any) -> None:
    lead = Leader(args.n, args.size, args.window)
    conn.send(await lead.t.start())
    lead.t.set_peers({1: ("127.0.0.1", lead.t.port)})
    await asyncio.wait_for(lead.done.wait(), 600)
    conn.send(dict(lead.t.stats))
    conn.recv()  # wait until the learner has reported before closing
    await lead.t.stop()


def _run(coro: Any) -> None:
    """Run ``coro`` on the loop replicas use: uvloop's when installed."""
    loop = new_event_loop()
    try:
        loop.run_until_complete(coro)
    finally:
        loop.close()


def leader_main(args: Any, conn: Any) -> None:
    _run(_leader_proc(args, conn))


def report(args: Any, learner: Learner, lstats: dict[str, int] | None) -> None:
    secs = learner.t1 - learner.t0
    rate = args.n / secs
    print(machine_line(type(asyncio.get_running_loop()).__module__.split(".")[0]))
    print(
        f"{args.n} PROPOSALs of {args.size} B, window {args.window}, "
        f"{'one process' if args.inproc else 'two processes'}: {secs:.2f} s, "
        f"{rate:,.0f} msgs/s, {rate * args.size / 1e6:,.1f} MB/s of values"
    )
    if lstats is not None:
        print(
            f"leader: {lstats['frames_out']} frames in {lstats['writes']} writes "
            f"({lstats['frames_out'] / max(1, lstats['writes']):.0f} frames/write), "
            f"{lstats['bytes_out'] / 1e6:.1f} MB"
        )
    st = learner.t.stats
    print(f"learner: {st['frames_in']} frames in, {st['bytes_in'] / 1e6:.1f} MB, {st['writes']} writes")


async def run_two_procs(args: Any) -> None:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=leader_main, args=(args, child), daemon=True)
    proc.start()
    loop = asyncio.get_running_loop()
    port = await loop.run_in_executor(None, parent.recv)
    learner = Learner(args.n, args.ack_every)
    lport = await learner.t.start()
    learner.t.set_peers({1: ("127.0.0.1", port), 2: ("127.0.0.1", lport)})
    learner.start_channel()
    await asyncio.wait_for(learner.done.wait(), 600)
    lstats = await loop.run_in_executor(None, parent.recv)
    report(args, learner, lstats)
    parent.send("bye")
    await learner.t.stop()
    await loop.run_in_executor(None, proc.join, 10)


async def run_inproc(args: Any) -> None:
    lead = Leader(args.n, args.size, args.window)
    learner = Learner(args.n, args.ack_every)
    addrs = {1: ("127.0.0.1", await lead.t.start()), 2: ("127.0.0.1", await learner.t.start())}
    lead.t.set_peers(addrs)
    learner.t.set_peers(addrs)
    learner.start_channel()
    await asyncio.wait_for(learner.done.wait(), 600)
    report(args, learner, dict(lead.t.stats))
    await lead.t.stop()
    await learner.t.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--window", type=int, default=1000)
    p.add_argument("--ack-every", type=int, default=100)
    p.add_argument("--inproc", action="store_true")
    args = p.parse_args()
    _run(run_inproc(args) if args.inproc else run_two_procs(args))


if __name__ == "__main__":
    main()
