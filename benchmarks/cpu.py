"""CPU per write of a whole ensemble on one thread: the replicas' own code, nothing between them.

    .venv/bin/python benchmarks/cpu.py                       # the ZooKeeper service path
    .venv/bin/python benchmarks/cpu.py --path broadcast --in-flight 1
    .venv/bin/python benchmarks/cpu.py --profile 40          # and where it goes, per write

Three ``ReplicaServer``s (the code each ``ReplicaActor`` runs) on one uvloop event loop, with
real TCP on 127.0.0.1 and real files, and the client on the same loop: for ``service``, a
minimal pipelined ZooKeeper (jute) client setting 1 KB on one znode through a follower (or
``--via leader``), its request bodies encoded once (a real client encodes in its own process);
for ``broadcast``, zabray's own ``EnsembleClient``. The figure is the
process's CPU time per write (all three replicas and the client), median over ``--runs``.
The log is not synced unless ``--fsync``: how long the disk takes decides how many txns each
group commit holds, and so the CPU per write, which would drown the code's own changes.

Why: with five processes on two cores, a run's writes/s moves with how the OS schedules them
and with this machine's CPU speed, which swings 2x within seconds. On one thread only the
second remains, so alternating two builds (a worktree each) shows a change of a few percent.
It is not a throughput figure: ``zookeeper.py`` measures those, against Apache ZooKeeper.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import cProfile

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]  # benchmarks/storage.py
sys.path.insert(0, os.path.dirname(_here))

from actors.replica import ReplicaServer  # noqa: E402
from zabray.client.broadcast import EnsembleClient  # noqa: E402
from zabray.config import EnsembleConfig  # noqa: E402
from zabray.experiments.machine import machine_line  # noqa: E402
from zabray.net.keyfiles import new_secret  # noqa: E402
from zabray.wire import zkproto as zp  # noqa: E402
from zabray.wire.auth import Secret  # noqa: E402

_LEN = struct.Struct(">i")
_HEADER = struct.Struct(">ii")  # RequestHeader: xid, op
VALUE = b"x" * 1024


class JuteClient(asyncio.Protocol):
    """One ZooKeeper session, requests pipelined, replies matched to their xid."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.buf = bytearray()
        self.waiting: dict[int, asyncio.Future[bytes]] = {}
        self.connected: asyncio.Future[bytes] = self.loop.create_future()
        self.xid = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            (n,) = _LEN.unpack_from(self.buf, 0)
            if len(self.buf) < 4 + n:
                break
            payload = bytes(self.buf[4 : 4 + n])
            del self.buf[: 4 + n]
            if not self.connected.done():
                self.connected.set_result(payload)
                continue
            fut = self.waiting.pop(_LEN.unpack_from(payload, 0)[0], None)
            if fut is not None:
                fut.set_result(payload)

    def request(self, op: int, body: zp.Record | bytes) -> asyncio.Future[bytes]:
        """Send one request; ``body`` already encoded is sent as is (a real client's encoding
        runs in its own process, so the timed loop does not spend this process's CPU on it)."""
        self.xid += 1
        fut: asyncio.Future[bytes] = self.loop.create_future()
        self.waiting[self.xid] = fut
        if isinstance(body, bytes):
            self.transport.write(_LEN.pack(8 + len(body)) + _HEADER.pack(self.xid, op) + body)
        else:
            self.transport.write(zp.encode_request(self.xid, op, body))
        return fut

    async def writes(self, n: int, op: str = "setData") -> None:
        """``n`` setData of /b, or ``n`` sequential creates under /b (as benchmarks/zkload does)."""
        code, body = write_request(op)
        hdr, _ = zp.decode_reply(await self.request(code, body), code)
        if hdr.err:
            raise RuntimeError(f"{op} failed: error {hdr.err}")
        for _ in range(n - 1):
            await self.request(code, body)


OPEN_ACL = (zp.ACL(zp.Perm.ALL, zp.Id("world", "anyone")),)


def write_request(op: str) -> tuple[int, bytes]:
    """The opcode and encoded body of the timed write: setData of /b, or a sequential create under it."""
    if op == "setData":
        return zp.OpCode.SET_DATA, zp.SetDataRequest("/b", VALUE, -1).encode()
    return zp.OpCode.CREATE, zp.CreateRequest("/b/n-", VALUE, OPEN_ACL, 2).encode()


async def jute_session(host: str, port: int) -> JuteClient:
    """A new ZooKeeper session on ``host:port`` with /b created, ready for ``writes``."""
    _, client = await asyncio.get_running_loop().create_connection(JuteClient, host, port)
    client.transport.write(zp.encode_record(zp.ConnectRequest(0, 0, 30000, 0, bytes(16))))
    await client.connected
    await client.request(zp.OpCode.CREATE, zp.CreateRequest("/b", b"", OPEN_ACL, 0))
    return client


async def _ensemble(args: argparse.Namespace, base: str) -> tuple[dict[int, ReplicaServer], dict[int, Any], Secret]:
    cfg = EnsembleConfig.load(args.config).to_dict() | {"fsync": args.fsync, "trace": args.trace}
    if args.path == "service":
        cfg["service"] = "zookeeper"
    secret = new_secret()
    servers = {sid: ReplicaServer(ensemble="cpu", sid=sid, config=cfg, voters=[1, 2, 3], observers=[],
                                  data_dir=f"{base}/r{sid}", run_dir=f"{base}/run", secret=secret)
               for sid in (1, 2, 3)}
    infos = {sid: await s.start() for sid, s in servers.items()}
    for s in servers.values():
        s.set_peers({sid: tuple(i["quorum"]) for sid, i in infos.items()})
    return servers, infos, secret


def _leader(servers: dict[int, ReplicaServer]) -> int | None:
    for sid, s in servers.items():
        st = s.status()
        if st.get("established"):
            return sid
    return None


async def one_run(args: argparse.Namespace, profile: cProfile.Profile | None) -> float:
    """Start an ensemble, warm it up, time ``args.writes`` writes; CPU seconds per write."""
    base = tempfile.mkdtemp(prefix="zabray-cpu-")
    servers, infos, secret = await _ensemble(args, base)
    try:
        while (leader := _leader(servers)) is None:
            await asyncio.sleep(0.02)
        per = max(1, args.writes // args.in_flight)
        if args.path == "service":
            sid = leader if args.via == "leader" else min(s for s in servers if s != leader)
            client = await jute_session(*infos[sid]["zk_client"])

            async def load(k: int) -> None:
                await asyncio.gather(*(client.writes(k, args.op) for _ in range(args.in_flight)))
        else:
            bc = EnsembleClient("cpu", {s: tuple(i["client"]) for s, i in infos.items()}, secret=secret)

            async def writes(k: int) -> None:
                for _ in range(k):
                    await bc.submit(VALUE, timeout=30)

            async def load(k: int) -> None:
                await asyncio.gather(*(writes(k) for _ in range(args.in_flight)))
        await load(max(1, per // 5))  # warm-up, untimed
        c0 = time.process_time()
        if profile is not None:
            profile.enable()
        await load(per)
        if profile is not None:
            profile.disable()
        cpu = (time.process_time() - c0) / (per * args.in_flight)
        if args.path == "service":
            client.transport.close()
        else:
            bc.close()
        return cpu
    finally:
        for s in servers.values():
            await s.stop()
        shutil.rmtree(base, ignore_errors=True)


def print_profile(profile: cProfile.Profile, writes: int, top: int) -> None:
    import pstats

    st = pstats.Stats(profile)
    rows: Any = st.stats  # type: ignore[attr-defined]
    own = sum(v[2] for v in rows.values())
    calls = sum(v[1] for v in rows.values())
    print(f"\nprofiled (the event loop's thread; cProfile inflates every call): {1e6 * own / writes:.0f} us "
          f"of CPU and {calls / writes:.0f} calls per write; top by own time:")
    print(f"{'own us':>8} {'incl us':>8} {'calls':>7}  function")
    root = os.path.dirname(_here) + os.sep
    for (f, line, fn), (_, nc, tt, ct, _) in sorted(rows.items(), key=lambda kv: -kv[1][2])[:top]:
        where = f.replace(root, "").replace(sys.prefix + os.sep, "")
        print(f"{1e6 * tt / writes:8.1f} {1e6 * ct / writes:8.1f} {nc / writes:7.2f}  {where}:{line} {fn}")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--path", choices=["service", "broadcast"], default="service")
    ap.add_argument("--via", choices=["follower", "leader"], default="follower",
                    help="the replica the ZooKeeper client is connected to (service path)")
    ap.add_argument("--op", choices=["setData", "create"], default="setData",
                    help="the service path's write: setData of one znode, or sequential creates")
    ap.add_argument("--in-flight", type=int, default=1000)
    ap.add_argument("--writes", type=int, default=20000, help="timed writes per run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--config", default=None, help="zabray YAML config (default: configs/local.yaml)")
    ap.add_argument("--fsync", action="store_true",
                    help="sync the log (off by default: the disk's timing moves group-commit sizes, and CPU with them)")
    ap.add_argument("--no-trace", dest="trace", action="store_false")
    ap.add_argument("--profile", type=int, default=0, metavar="TOP",
                    help="cProfile one more run and print its TOP functions by own time")
    args = ap.parse_args()
    import uvloop

    print(machine_line("uvloop", "one thread"))
    print(f"zabray: {args.path} path, 3 replicas, config {args.config or 'configs/local.yaml'} (fsync {args.fsync}, "
          f"trace {args.trace}, auth on); {len(VALUE)} B values, {args.in_flight} in flight"
          + (f" via a {args.via}, {args.op}" if args.path == "service" else "") + f", {args.writes} writes per run")
    cpus = []
    for i in range(args.runs):
        cpus.append(uvloop.run(one_run(args, None)))
        print(f"  run {i}: {1e6 * cpus[-1]:.0f} us of CPU per write", flush=True)
    print(f"median: {1e6 * statistics.median(cpus):.0f} us of CPU per write (replicas and client together)")
    if args.profile:
        import cProfile  # (after the path fix above: benchmarks/profile.py would shadow ``profile``)

        prof = cProfile.Profile(time.thread_time)  # CPU, not wall: an fdatasync's wait is not cost
        uvloop.run(one_run(args, prof))
        print_profile(prof, max(1, args.writes // args.in_flight) * args.in_flight, args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
