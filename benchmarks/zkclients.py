"""Load from ZooKeeper's own clients: the Java client (benchmarks/zkload/ZkLoad.java) and kazoo.

Both speak ZooKeeper's wire protocol, so the same load runs against Apache ZooKeeper and against
any server that speaks it. ``java_load`` compiles ZkLoad.java against Debian's zookeeper.jar into
a cache directory outside the repository the first time.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "zkload" / "ZkLoad.java"
CLASSPATH = ["/usr/share/java/zookeeper.jar", "/usr/share/java/zookeeper-jute.jar"]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "zabray"


def _compiled() -> Path:
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    out = CACHE / f"zkload-{digest}"
    if not (out / "ZkLoad.class").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-implicit:none", "-cp", ":".join(CLASSPATH), "-d", str(out), str(SOURCE)],
                       check=True)
    return out


def java_load(hosts: str, op: str, size: int, outstanding: int, seconds: float, warmup: float = 1.0) -> dict[str, Any]:
    """Run ZkLoad and return its JSON line (ops, ops_per_s, p50_ms, p99_ms, errors)."""
    cp = ":".join([str(_compiled()), *CLASSPATH, "/etc/zookeeper/conf"])
    cmd = ["java", "-Xmx1g", "-cp", cp, "ZkLoad", hosts, op, str(size), str(outstanding), str(seconds), str(warmup)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + warmup + 180)
    if res.returncode != 0:
        raise RuntimeError(f"ZkLoad failed ({res.returncode}): {res.stderr.strip()[-2000:]}")
    line = [x for x in res.stdout.splitlines() if x.startswith("{")][-1]
    return dict(json.loads(line))


def kazoo_load(hosts: str, op: str, size: int, outstanding: int, seconds: float, warmup: float = 1.0) -> dict[str, Any]:
    """The same load through kazoo's async API (one session, ``outstanding`` in flight)."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=hosts, timeout=30)
    zk.start(timeout=60)
    value = b"x" * size
    root = f"/kzload-{zk.client_id[0]:x}"
    zk.create(root, value)
    keys = max(1, min(outstanding, 1000))
    for i in range(keys):
        zk.create(f"{root}/k{i}", value)
    window = threading.Semaphore(outstanding)
    lat: list[float] = []
    errors = 0
    lock = threading.Lock()
    t_start = time.perf_counter()
    warm_end = t_start + warmup
    end = warm_end + seconds

    def issue(i: int) -> None:
        path = f"{root}/k{i % keys}"
        t0 = time.perf_counter()
        if op == "setData":
            a = zk.set_async(path, value)
        elif op == "getData":
            a = zk.get_async(path)
        elif op == "create":
            a = zk.create_async(path + "-", value, sequence=True)
        else:
            raise ValueError(f"unknown op {op} (setData, create, getData)")

        def done(r: Any) -> None:
            nonlocal errors
            t1 = time.perf_counter()
            with lock:
                if r.exception is not None:
                    errors += 1
                elif warm_end <= t0 and t1 <= end:
                    lat.append(t1 - t0)
            window.release()

        a.rawlink(done)

    i = 0
    while True:
        window.acquire()
        if time.perf_counter() >= end:
            window.release()
            break
        issue(i)
        i += 1
    for _ in range(outstanding):
        window.acquire()
    zk.stop()
    zk.close()
    lat.sort()
    n = len(lat)
    return {
        "op": op, "ops": n, "seconds": seconds, "ops_per_s": n / seconds,
        "p50_ms": lat[n // 2] * 1e3 if n else -1.0, "p99_ms": lat[min(n - 1, int(n * 0.99))] * 1e3 if n else -1.0,
        "errors": errors,
    }


def median_of(results: list[dict[str, Any]], server: str, key: str, **where: Any) -> float:
    """The median ``key`` of ``server``'s runs matching every ``where`` field."""
    return statistics.median(r[key] for r in results
                             if r["server"] == server and all(r[k] == v for k, v in where.items()))


def footer(results: list[dict[str, Any]]) -> None:
    """What every side-by-side table ends with: failed requests, if any, and the time."""
    errors = sum(r["errors"] for r in results)
    if errors:
        print(f"\n{errors} requests failed in all: the figures above count only the ones that succeeded")
    print(f"\nfinished {time.strftime('%Y-%m-%d %H:%M:%S')}")
