"""Crash consistency with real processes: a child streams group commits, snapshots, installs and
epoch writes, printing when it starts each operation and when the operation is durable; the
parent SIGKILLs it at a random moment (shortly after it announces a chosen operation, so that
kills land inside writes and syncs, not only between them), reopens the store, and checks that everything reported durable is there,
that at most the one operation in flight is partly applied (a log sync: only a prefix of its
records, nothing after a torn record), and that the log takes appends again."""

from __future__ import annotations

import itertools
import os
import random
import select
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from disk_harness import CHILD_WORKLOAD, Model, allowed_views, apply_model, iter_ops, view_of

from storage import DiskStore, txnlog
from zabray.protocol.messages import Txn
from zabray.protocol.zxid import Zxid

HARNESS = Path(__file__).with_name("disk_harness.py")
SEGMENT = 1 << 20
ITERATIONS = 30


def _kill_during(proc: subprocess.Popen, target: int, jitter_s: float) -> list[int]:
    """Wait for the child to announce op ``target``, then up to ``jitter_s`` more (less if it
    prints again first), and SIGKILL it.

    Returns every op index the child reported durable, including lines still in the pipe.
    """
    assert proc.stdout is not None
    lines = []
    while True:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.split())
        if lines[-1] == ["b", str(target)]:
            break
    # Not a sleep to wait for something: a random delay that ends early on the child's next line.
    # (Spinning instead would starve the child when the CPU quota is tight.)
    select.select([proc.stdout], [], [], jitter_s)
    proc.send_signal(signal.SIGKILL)
    lines += [line.split() for line in proc.stdout.read().splitlines()]
    proc.wait(timeout=60)
    return [int(i) for kind, i in lines if kind == "d"]


def test_sigkill_at_random_moments(tmp_path):
    d = str(tmp_path / "store")
    rng = random.Random(20240601)
    with DiskStore(d, segment_bytes=SEGMENT) as s:
        state = s.recover()
    outcomes: Counter[str] = Counter()
    for it in range(ITERATIONS):
        seed = rng.randrange(1 << 30)
        proc = subprocess.Popen(
            [sys.executable, str(HARNESS), "child", d, str(seed), str(SEGMENT)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen = _kill_during(proc, rng.randint(1, 8), rng.random() * 0.02)
        err = proc.stderr.read() if proc.stderr else ""
        assert proc.returncode == -signal.SIGKILL, f"child died on its own ({proc.returncode}): {err}"
        assert seen == list(range(len(seen))), seen
        j = len(seen) - 1  # last op reported durable; op j+1 was in flight (or done, unreported)

        models = [Model.of(state)]
        ops = list(itertools.islice(iter_ops(random.Random(seed), models[0], **CHILD_WORKLOAD), j + 2))
        for op in ops:
            models.append(apply_model(models[-1], op))
        with DiskStore(d, segment_bytes=SEGMENT) as s:
            got = view_of(s.recover())
            allowed = allowed_views(models[j + 1], ops[j + 1], models[j + 2])
            assert got in allowed, (
                f"iteration {it}: kill during {type(ops[j + 1]).__name__} gave a state not allowed"
            )
            outcomes["before" if got == allowed[0] else "after" if got == allowed[1] else "partial"] += 1
            # The store accepts appends again, and they survive the next reopen.
            last = s.recover().last_zxid
            marker = Txn(Zxid.of(Zxid(last).epoch + 1, 1), b"parent-%d" % it)
            s.append([marker])
            s.sync()
        with DiskStore(d, segment_bytes=SEGMENT) as s:
            state = s.recover()
            assert state.txns[-1] == marker
    print(f"kill outcomes over {ITERATIONS} runs: {dict(outcomes)}")
    assert sum(outcomes.values()) == ITERATIONS
    # Half-written files were reaped; only spare files kept for later segments remain.
    assert not [n for n in os.listdir(d) if n.endswith(".tmp") and not txnlog.is_spare(n)]
    assert len([n for n in os.listdir(d) if txnlog.is_spare(n)]) <= txnlog.MAX_RECYCLED
