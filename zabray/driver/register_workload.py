"""A Jepsen-style register workload on a ``service: zookeeper`` ensemble, recorded as a history.

``sessions`` threads, each its own ZooKeeper session issuing one operation at a time, pick one
of ``keys`` hot znodes at random and read it, sync then read it, write a unique value,
compare-and-set from the version it last read (setData with a version), now and then delete it
or create it again, or run a multi over two keys (two writes, or a version check and a write).
Every operation is recorded around the call (``zabray.client.histories``): invocation just before,
outcome just after, so the history holds exactly what the client saw, whatever the nemesis did
meanwhile; every change's zxid comes from its reply (``Session.request``). A session that
expires is replaced by a new one (a new process in the history).

    wl = RegisterWorkload(ens, run_dir, sessions=6, keys=3).start()
    ... faults ...
    counts = wl.stop()        # {"ok": n, "fail": n, "unknown": n}: history rows
"""

from __future__ import annotations

import logging
import random
import threading
import time
from os import PathLike
from typing import TYPE_CHECKING, Any

from zabray.client.histories import HistoryRecorder
from zabray.tree import NodeExistsError, NoNodeError, SessionExpiredError

if TYPE_CHECKING:
    from zabray.driver.ensemble import Ensemble

log = logging.getLogger(__name__)

ROOT = "/registers"
MIX = {"read": 3.0, "sync-read": 1.5, "write": 2.0, "cas": 2.5, "delete": 0.25, "create": 0.35, "multi": 1.0}


class RegisterWorkload:
    def __init__(self, ens: Ensemble, run_dir: str | PathLike[str] | None = None, *, sessions: int = 6,
                 keys: int = 3, seed: int = 0, timeout: float = 4.0, recorder: HistoryRecorder | None = None,
                 client: str = "registers") -> None:
        if sessions < 1 or keys < 1:
            raise ValueError("sessions and keys must be >= 1")
        self.ens = ens
        self.rec = recorder or (HistoryRecorder.for_run(run_dir, client) if run_dir is not None
                                else HistoryRecorder(None, client))
        self.sessions = sessions
        # Fresh znodes per workload, so its history holds every write to them (a rerun on the same
        # ensemble must not start from znodes the history never saw created).
        self.keys = [f"{ROOT}/{client}-{time.time_ns() // 1000}-k{i}" for i in range(keys)]
        self.seed = seed
        self.timeout = timeout
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.counts: dict[str, int] = {"ok": 0, "fail": 0, "unknown": 0}
        self._lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> RegisterWorkload:
        from zabray.tree import Create

        s = self._session()
        try:
            try:
                s.create(ROOT, b"")  # the parent is not a register: not recorded
            except Exception as e:
                log.debug("registers: %s: %s", ROOT, e)
            for k in self.keys:
                self._call(s, "setup", k, "create", b"0", lambda s, k=k: s.request(Create(k, b"0")))
        finally:
            s.close()
        for i in range(self.sessions):
            t = threading.Thread(target=self._worker, args=(i,), name=f"registers-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout: float = 120.0) -> dict[str, int]:
        """Stop issuing, wait for the operations in flight, close the history."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.1, deadline - time.monotonic()))
        self.rec.close()
        return dict(self.counts)

    def wait_ops(self, n: int, timeout: float = 120.0) -> bool:
        """Wait until ``n`` more operations completed ok (a condition, not a sleep)."""
        with self._lock:
            target = self.counts["ok"] + n
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self.counts["ok"] >= target:
                    return True
            time.sleep(0.02)
        return False

    # -- one session --------------------------------------------------------------------------

    def _session(self) -> Any:
        while True:
            try:
                return self.ens.session(timeout=self.timeout, connect_timeout=30)
            except Exception as e:  # no replica accepted a session yet (a fault in progress)
                if self._stop.is_set():
                    raise
                log.info("registers: no session yet: %s", e)
                time.sleep(0.2)

    def _call(self, s: Any, name: str, key: str, kind: str, value: bytes | None, fn: Any,
              version: int | None = None) -> Any:
        """Record ``fn(s)`` as one operation; returns its result or the exception it raised.
        A change's ``fn`` is ``Session.request``-shaped: (result, zxid of its txn)."""
        p = self.rec.invoke(f"{name}-{s.session_id:x}", key, kind, value=value, version=version)
        replica = getattr(s, "connected_to", None)
        try:
            out = fn(s)
        except NoNodeError as e:
            if kind == "read":  # a read that found no znode: an ok observation
                self.rec.complete(p, "ok", result=None, replica=replica)
                self._count("ok")
                return None
            self.rec.failed(p, e, replica=replica)
            self._count("fail")
            return e
        except NodeExistsError as e:
            self.rec.failed(p, e, replica=replica)
            self._count("fail")
            return e
        except Exception as e:
            self._count(self.rec.failed(p, e, replica=replica))
            return e
        if kind == "read":
            data, stat = out
            self.rec.complete(p, "ok", result=data, result_version=stat.version, zxid=stat.mzxid, replica=replica)
        elif kind in ("write", "cas"):
            stat, zxid = out
            self.rec.complete(p, "ok", result_version=stat.version, zxid=zxid, replica=replica)
        elif kind == "create":
            self.rec.complete(p, "ok", result_version=0, zxid=out[1], replica=replica)
        elif kind == "delete":
            self.rec.complete(p, "ok", zxid=out[1], replica=replica)
        elif kind == "sync":
            self.rec.complete(p, "ok", zxid=int(out), replica=replica)
        else:
            self.rec.complete(p, "ok", replica=replica)
        self._count("ok")
        return out

    def _multi(self, s: Any, name: str, ops: list[tuple[str, str, bytes | None, int | None]]) -> Any:
        """Record one multi of ``ops`` (kind, key, value, version): one row per sub-operation."""
        from zabray.tree import Check, SetData

        p = self.rec.invoke_multi(f"{name}-{s.session_id:x}", ops)
        replica = getattr(s, "connected_to", None)
        recs = tuple(Check(k, -1 if v is None else v) if kind == "check" else SetData(k, d, -1 if v is None else v)
                     for kind, k, d, v in ops)
        try:
            results, zxid = s.request(recs)
        except Exception as e:
            outcome = self.rec.failed(p, e, replica=replica)
            self._count(outcome, len(ops))
            return e
        versions = [getattr(r, "version", None) for r in results]
        self.rec.complete_multi(p, "ok", results=versions, zxid=zxid, replica=replica)
        self._count("ok", len(ops))
        return results

    def _count(self, outcome: str, n: int = 1) -> None:
        with self._lock:
            self.counts[outcome] += n

    def _worker(self, i: int) -> None:
        from zabray.tree import Create, Delete, SetData

        rng = random.Random(self.seed * 1000 + i)
        kinds, weights = list(MIX), list(MIX.values())
        seen: dict[str, int] = {}
        n = 0
        s = self._session()
        try:
            while not self._stop.is_set():
                key = rng.choice(self.keys)
                kind = rng.choices(kinds, weights)[0]
                name = f"w{i}"
                n += 1
                value = f"{i}-{n}".encode()
                out: Any
                if kind in ("read", "sync-read"):
                    if kind == "sync-read":
                        r = self._call(s, name, key, "sync", None, lambda s, k=key: s.sync(k))
                        if isinstance(r, BaseException):
                            out = r
                        else:
                            out = self._call(s, name, key, "read", None, lambda s, k=key: s.get(k))
                    else:
                        out = self._call(s, name, key, "read", None, lambda s, k=key: s.get(k))
                    if isinstance(out, tuple):
                        seen[key] = out[1].version
                elif kind == "write":
                    out = self._call(s, name, key, "write", value,
                                     lambda s, k=key, v=value: s.request(SetData(k, v, -1)))
                elif kind == "cas":
                    ver = seen.get(key, 0)
                    out = self._call(s, name, key, "cas", value,
                                     lambda s, k=key, v=value, x=ver: s.request(SetData(k, v, x)), version=ver)
                elif kind == "delete":
                    out = self._call(s, name, key, "delete", None, lambda s, k=key: s.request(Delete(k, -1)),
                                     version=-1)
                elif kind == "create":
                    out = self._call(s, name, key, "create", value, lambda s, k=key, v=value: s.request(Create(k, v)))
                else:
                    other = rng.choice(self.keys)
                    if rng.random() < 0.5 or other == key:  # a version check on one key, a write on the other
                        ops: list[tuple[str, str, bytes | None, int | None]] = [
                            ("check", key, None, seen.get(key, 0)), ("write", other, value, -1)]
                    else:
                        ops = [("write", key, value, -1), ("write", other, value + b"'", -1)]
                    out = self._multi(s, name, ops)
                if isinstance(out, tuple) and len(out) == 2 and hasattr(out[0], "version"):
                    seen[key] = out[0].version
                elif kind == "create" and isinstance(out, tuple):
                    seen[key] = 0
                if isinstance(out, SessionExpiredError) or getattr(s, "expired", False):
                    try:
                        s.close()
                    except Exception:
                        pass
                    s = self._session()
        finally:
            try:
                s.close()
            except Exception:
                pass
