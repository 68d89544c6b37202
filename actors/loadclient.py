"""Load-generating client actors for experiments (``zabray.experiments``).

A ``LoadClient`` is a Ray actor placed on a chosen node. It drives the replicas over TCP with
the library's own clients (``zabray.client.EnsembleClient`` for the broadcast service, a
``zabray.client.session.Session`` for the ZooKeeper service); Ray carries only control calls
(configure, run, progress), never an operation. It records every operation's invoke and
completion time, outcome and zxid, and its own process CPU time over the measured window, so a
reader can tell a saturated client from a saturated replica.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
from typing import Any

import ray

from actors.names import NAMESPACE, controller_name
from zabray.client.broadcast import EnsembleClient
from zabray.client.session import Session
from zabray.errors import NoQuorumError, UncertainOutcomeError, ZabError
from zabray.net import tls
from zabray.trace import records as trace
from zabray.tree.errors import NodeExistsError

log = logging.getLogger(__name__)
ZNODE_ROOT = "/zabray-experiment"


def proc_cpu(pids: list[int]) -> dict[int, float]:
    """CPU seconds (user + system) each live process in ``pids`` has used, read from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / tick
    return out


class LoadClient:
    """One load client: ``in_flight`` operations outstanding, ``read_fraction`` of them reads."""

    def __init__(self, index: int, ensemble: str, addresses: dict[int, tuple[str, int]], service: str,
                 timeout: float = 10.0, seed: int = 0, secret: Any = None,
                 config: dict[str, Any] | None = None) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.index = index
        self.ensemble = ensemble
        self.addresses = {int(s): (a[0], int(a[1])) for s, a in addresses.items()}
        self.service = service
        self.secret = secret  # the ensemble's secret, handed over through Ray (trusted, as docs/security.md says)
        self.config = config or {}
        self.timeout = timeout
        self.rng = random.Random(seed * 7919 + index)
        self.in_flight = 1
        self.read_fraction = 0.0
        self.value_size = 1024
        self.ok = 0
        self.client: Any = None
        self.session: Any = None
        self.znodes: list[str] = []
        self.counter = 0
        self.t_start = 0.0
        self._started = asyncio.Event()

    def _refresh(self) -> dict[int, tuple[str, int]]:
        """Where the replicas listen now (a restarted one moves): a control-plane call."""
        ctl = ray.get_actor(controller_name(self.ensemble), namespace=NAMESPACE)
        info: Any = ray.get(ctl.describe.remote(), timeout=10)
        return {int(s): (a[0], int(a[1])) for s, a in info["clients"].items()}

    async def prepare(self) -> dict[str, Any]:
        """Connect (and for ZooKeeper create this client's znodes); returns where it runs."""
        if self.service == "broadcast":
            self.client = EnsembleClient(self.ensemble, self.addresses, self._refresh, secret=self.secret,
                                         ssl=tls.driver_context(self.config) if self.config else None)
        else:
            loop = asyncio.get_running_loop()
            self.session = await loop.run_in_executor(None, lambda: Session(
                self.ensemble, self.addresses, timeout=max(10.0, self.timeout), refresh=self._refresh,
                replica=sorted(self.addresses)[self.index % len(self.addresses)]))
        return {"index": self.index, "node": ray.get_runtime_context().get_node_id(),
                "host": socket.gethostname(), "pid": os.getpid()}

    async def configure(self, in_flight: int, read_fraction: float, value_size: int) -> None:
        self.in_flight, self.read_fraction, self.value_size = in_flight, read_fraction, value_size
        if self.session is not None:
            want = [f"{ZNODE_ROOT}/c{self.index}-{k}" for k in range(in_flight)]
            missing = [p for p in want if p not in self.znodes]
            if missing:
                for path in [ZNODE_ROOT, *missing]:
                    try:
                        await self.session.create_async(path, b"x" * (value_size if path != ZNODE_ROOT else 1))
                    except NodeExistsError:
                        pass
                self.znodes = sorted(set(self.znodes) | set(missing))

    async def progress(self) -> int:
        """Operations completed ``ok`` so far in the current run (for progress bars)."""
        return self.ok

    async def started(self) -> float:
        """Wall-clock time the current ``run`` started (waits for it to start)."""
        await self._started.wait()
        return self.t_start

    async def run(self, warmup: float, duration: float, bar: bool = False) -> dict[str, Any]:
        """Keep ``in_flight`` ops going from now for ``warmup + duration`` s; returns every op and
        the CPU this process used in the last ``duration`` s. Each client starts when the call
        reaches it (control calls can be slow on a loaded cluster); the driver measures over the
        window all clients share. ``bar``: a Ray tqdm bar (``ray.experimental.tqdm_ray``) with
        this client's throughput, shown by a driver that runs with ``log_to_driver=True``."""
        self.ok = 0
        recs: dict[str, list[Any]] = {k: [] for k in ("invoke", "complete", "outcome", "op", "zxid", "digest")}
        cpu: dict[str, float] = {}
        self.t_start = time.time()
        measure_at, stop_at = self.t_start + warmup, self.t_start + warmup + duration
        self._started.set()

        async def mark_cpu() -> None:
            await asyncio.sleep(max(0.0, measure_at - time.time()))
            cpu["start"] = time.process_time()

        marker = asyncio.ensure_future(mark_cpu())
        ticker = asyncio.ensure_future(self._bar(warmup + duration, stop_at)) if bar else None
        prefix = f"{self.ensemble}-c{self.index}-{time.time_ns()}-".encode()

        async def worker(slot: int) -> None:
            while time.time() < stop_at:
                is_read = self.session is not None and self.rng.random() < self.read_fraction
                self.counter += 1
                value = (prefix + str(self.counter).encode()).ljust(self.value_size, b".")
                t0 = time.time()
                zxid, outcome = None, "ok"
                try:
                    zxid = await asyncio.wait_for(self._op(slot, is_read, value), self.timeout)
                except (TimeoutError, UncertainOutcomeError, NoQuorumError, ConnectionError):
                    outcome = "unknown" if not is_read else "failed"
                except ZabError as e:
                    outcome = "unknown" if type(e).__name__ == "ConnectionLossError" and not is_read else "failed"
                t1 = time.time()
                recs["invoke"].append(t0)
                recs["complete"].append(t1)
                recs["outcome"].append(outcome)
                recs["op"].append("get" if is_read else ("set" if self.session is not None else "write"))
                recs["zxid"].append(zxid)
                recs["digest"].append(None if is_read or self.session is not None else trace.digest(value))
                if outcome == "ok":
                    self.ok += 1
                else:
                    await asyncio.sleep(0.02)  # no busy loop against a down ensemble

        await asyncio.gather(*(worker(i) for i in range(self.in_flight)))
        end_cpu, t_end = time.process_time(), time.time()
        marker.cancel()
        if ticker is not None:
            await ticker
        self._started.clear()
        return {"index": self.index, "records": recs, "cpu_s": end_cpu - cpu.get("start", end_cpu),
                "cpu_span": t_end - measure_at, "start": self.t_start, "measure_at": measure_at, "end": t_end,
                "node": ray.get_runtime_context().get_node_id()}

    async def _bar(self, total: float, stop_at: float) -> None:
        from ray.experimental.tqdm_ray import tqdm

        pbar = tqdm(desc=f"client {self.index}", total=int(total * 10), unit="ds")
        last_ok, last_t = 0, time.time()
        while True:
            await asyncio.sleep(0.5)
            now = time.time()
            pbar.update(int((min(now, stop_at) - last_t) * 10))
            pbar.set_description(f"client {self.index}: {(self.ok - last_ok) / (now - last_t):,.0f} ops/s")
            last_ok, last_t = self.ok, min(now, stop_at)
            if now >= stop_at:
                break
        pbar.close()

    async def _op(self, slot: int, is_read: bool, value: bytes) -> int | None:
        if self.session is None:
            return int(await self.client.submit(value, self.timeout))
        path = self.znodes[slot % len(self.znodes)]
        if is_read:
            await self.session.get_async(path)
            return None
        stat = await self.session.set_async(path, value)
        return int(stat.mzxid)

    async def session_id(self) -> int:
        return int(self.session.session_id) if self.session is not None else 0

    async def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.session is not None:
            try:
                await asyncio.get_running_loop().run_in_executor(None, self.session.close)
            except Exception:  # the ensemble is gone already; nothing to release
                pass


class CpuProbe:
    """Reads the CPU time of processes on its node (replicas), for experiments' CPU columns."""

    async def cpu(self, pids: list[int]) -> dict[int, float]:
        return proc_cpu(pids)
