"""How a replica carries out its core's actions: the real replica's ``Effects``
(``zabray.protocol.executor``), on the fast path where no fault is injected.

Messages go to the peer transport's per-iteration channels (written once per loop turn by the
replica's ``Outbox``); persists queue up for the next group commit (``actors.group_commit``);
client-facing outcomes are gathered for the hosted service, which hears them after the step;
snapshot slices and a yielded core's next turn are scheduled on the event loop. Fault injection
wraps this object (``actors.fault_gate.FaultGate``) rather than living in it.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol

from actors import gc_policy
from actors.group_commit import GroupCommit
from zabray.protocol.actions import (
    Close,
    Committed,
    DecodeSnapshot,
    Deliver,
    EncodeSnapshot,
    Failed,
    InstallSnapshot,
    Notify,
    Open,
    Outcome,
    PersistAction,
    Send,
    SessionsTouched,
    Trace,
    Yield,
)
from zabray.protocol.events import Event, Resumed
from zabray.protocol.messages import Diff, Snap, Trunc

if TYPE_CHECKING:
    from actors.transport import PeerTransport
    from zabray.trace.writer import TraceWriter

_SYNC_TYPES = (Diff, Trunc, Snap)


class ReplicaShell(Protocol):
    """What the effects need of the replica that owns them."""

    loop: asyncio.AbstractEventLoop
    stats: dict[str, int]

    def step(self, event: Event) -> None: ...
    def delivered(self) -> None: ...
    def encode_slice(self, enc: EncodeSnapshot) -> None: ...
    def decode_slice(self, dec: DecodeSnapshot) -> None: ...


class ReplicaEffects:
    """The replica's ``Effects``. ``for_service`` gathers a step's client-facing actions (the
    replica hands them to its hosted service when the step ends)."""

    def __init__(self, shell: ReplicaShell, transport: PeerTransport, commits: GroupCommit,
                 trace: TraceWriter | None) -> None:
        self.shell = shell
        self.transport = transport
        self.commits = commits
        self.trace_writer = trace
        self.for_service: list[Outcome] = []

    def send(self, a: Send) -> None:
        msg = a.msg
        self.transport.send(a.channel, msg)
        if type(msg) in _SYNC_TYPES:
            self.count_sync(msg.NAME)

    def count_sync(self, name: str) -> None:
        stats = self.shell.stats
        stats[f"sent_{name}"] = stats.get(f"sent_{name}", 0) + 1

    def notify(self, a: Notify) -> None:
        self.transport.notify(a.to, a.note)

    def open(self, a: Open) -> None:
        self.transport.open(a.channel)

    def close(self, a: Close) -> None:
        self.transport.close(a.channel)

    def persist(self, a: PersistAction) -> None:
        self.commits.queue(a)
        if type(a) is InstallSnapshot:  # a learner, not serving yet: the pause costs nothing
            self.shell.loop.call_soon(gc_policy.settle)

    def deliver(self, a: Deliver) -> None:
        self.shell.delivered()
        self.for_service.append(a)

    def reply(self, a: Committed | Failed | SessionsTouched) -> None:
        self.for_service.append(a)

    def trace(self, a: Trace) -> None:
        if self.trace_writer is not None:
            self.trace_writer.write(a.record, time.time())

    def encode_snapshot(self, a: EncodeSnapshot) -> None:
        self.shell.loop.call_soon(self.shell.encode_slice, a)

    def decode_snapshot(self, a: DecodeSnapshot) -> None:
        self.shell.loop.call_soon(self.shell.decode_slice, a)

    def resume(self, a: Yield) -> None:
        self.shell.loop.call_soon(self.shell.step, Resumed())
