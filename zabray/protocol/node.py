"""One replica's protocol state machine: events in, actions out, no IO.

``Node.step(event) -> list[Action]`` is the only entry point. The node owns what every role
shares: the epochs, the in-memory history, the state machine, persist tokens and the
acknowledgements held back until the write behind them is durable. The role objects
(``Election``, ``Leader``, ``Learner``) hold what belongs to one iteration; ending an
iteration throws the role away, closes its channels and drops what it held.

Invariants:
- ``applied`` <= ``history.last``; everything at or below ``applied`` was delivered in order.
- ``durable_token`` <= ``token``; an action in ``_held`` is released only once
  ``durable_token`` reaches the token that was current when it was held.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, assert_never

from zabray.errors import ProtocolError
from zabray.protocol.actions import (
    Action,
    Close,
    Committed,
    Deliver,
    EncodeSnapshot,
    Failed,
    PersistAction,
    PersistSnapshot,
    Send,
    Trace,
    Yield,
)
from zabray.protocol.election import Election
from zabray.protocol.events import (
    RID_BITS,
    RID_MASK,
    ChannelClosed,
    Event,
    Notified,
    Persisted,
    Received,
    Resumed,
    SnapshotDecoded,
    SnapshotEncoded,
    SnapshotRequested,
    Submit,
    Tick,
    TouchSessions,
)
from zabray.protocol.history import History
from zabray.protocol.messages import PeerState
from zabray.protocol.protocol_config import ProtocolConfig
from zabray.protocol.statemachine import SnapshotImage, SnapshotRestore, StateMachine, ValueLog
from zabray.protocol.zxid import Zxid
from zabray.trace import records as trace

if TYPE_CHECKING:
    from zabray.protocol.durable import DurableState
    from zabray.protocol.leader import Leader
    from zabray.protocol.learner import Learner

log = logging.getLogger(__name__)


class Node:
    def __init__(
        self,
        sid: int,
        config: ProtocolConfig,
        durable: DurableState,
        *,
        incarnation: int = 0,
        app: StateMachine | None = None,
        tracing: bool = True,
    ) -> None:
        if sid not in config.members:
            raise ProtocolError(f"sid {sid} is not a member of {sorted(config.members)}")
        self.sid = sid
        self.cfg = config
        self.incarnation = incarnation
        self.rid_tag = (incarnation % (1 << 23)) << RID_BITS
        # Without a trace to write, the core skips its Trace actions and the per-txn digests
        # they carry (two hashes per txn on a leader).
        self.tracing = tracing
        self.is_observer = sid in config.observers
        self.rejoining = durable.rejoining and not self.is_observer
        self.accepted_epoch = durable.accepted_epoch
        self.accepted_leader = durable.accepted_leader
        self.current_epoch = durable.current_epoch
        self.history = History(durable.snapshot_zxid, durable.txns)
        self.app: StateMachine = app if app is not None else ValueLog()
        if durable.snapshot is not None:
            self.app.restore(durable.snapshot)
        self.applied: Zxid = durable.snapshot_zxid
        self.now = 0
        self.iteration = 0
        self.round = 0
        self.state = PeerState.LOOKING
        self.leader_sid = -1
        self.ended_why = ""
        """Why the last iteration ended (empty before the first ends): for the shell's log."""
        self.vote: tuple[int, int, int] = (-1, 0, 0)
        self.token = 0
        self.durable_token = 0
        self._held: deque[tuple[int, Action]] = deque()
        self._snapshots: deque[tuple[int, Zxid]] = deque()
        self._image: SnapshotImage | None = None  # being encoded by the shell (EncodeSnapshot)
        self._image_persist = False  # a local snapshot asked for it: persist it when encoded
        self._out: list[Action] = []
        self._yielded = False  # a Yield is out: its Resumed is on its way
        # Where this incarnation's deliveries resume: a trace reader must know they start after
        # the snapshot, not from the first txn. Emitted with the first step's actions.
        self._pending_out: list[Action] = (
            [Trace(trace.SnapshotInstalled(self.applied.epoch, self.applied))] if self.applied and tracing else []
        )
        self.role: Election | Leader | Learner
        self.role = Election(self)

    @property
    def votes(self) -> bool:
        """Its vote counts in elections: a voter, and not ``rejoining`` (a replica that lost its
        disk could otherwise help elect a leader that lacks what only its old disk held)."""
        return not self.is_observer and not self.rejoining

    # -- the entry point ------------------------------------------------------------------

    def step(self, event: Event) -> list[Action]:
        self._out = out = self._pending_out
        self._pending_out = []
        try:
            self._dispatch(event)
        except ProtocolError as e:
            log.info("replica %d: %s; ending iteration %d", self.sid, e, self.iteration)
            self.new_iteration(f"protocol error: {e}")
        self._out = []
        return out

    def _dispatch(self, event: Event) -> None:
        role = self.role
        match event:
            case Received():
                role.on_message(event.channel, event.msg)
            case Persisted():
                self._on_persisted(event.upto)
            case Tick():
                self.now += 1
                role.on_tick()
            case Notified():
                self._on_notified(event)
            case ChannelClosed():
                role.on_closed(event.channel)
            case Submit():
                rid = event.request_id
                if not 0 <= rid <= RID_MASK:
                    raise ValueError(f"request id {rid} is not in [0, 2**{RID_BITS})")
                role.on_submit(self.rid_tag | rid, event.value)
            case SnapshotRequested():
                self._snapshot()
            case SnapshotEncoded():
                self._on_snapshot_encoded(event)
            case SnapshotDecoded():
                role.on_decoded(event.restore)
            case Resumed():
                self._yielded = False
                role.on_resumed()
            case TouchSessions():
                role.on_touch(event.sessions)
            case _:
                assert_never(event)

    # -- services for the roles ------------------------------------------------------------

    def emit(self, action: Action) -> None:
        self._out.append(action)

    @staticmethod
    def untag(request_id: int) -> int:
        """The shell's id of a request this incarnation submitted (see ``RID_BITS``)."""
        return request_id & RID_MASK

    def persist(self, action_type: Callable[..., PersistAction], *args: object) -> int:
        """Emit ``action_type(token, *args)`` with the next token; returns the token."""
        self.token += 1
        self._out.append(action_type(self.token, *args))
        return self.token

    def hold(self, action: Action) -> None:
        """Emit ``action`` once every persist issued so far is durable."""
        if self.durable_token >= self.token:
            self._out.append(action)
        else:
            self._held.append((self.token, action))

    def trace(self, record: object) -> None:
        if self.tracing:
            self._out.append(Trace(record))

    def _on_persisted(self, upto: int) -> None:
        if upto <= self.durable_token:
            return
        self.durable_token = upto
        held = self._held
        while held and held[0][0] <= upto:
            self._out.append(held.popleft()[1])
        snaps = self._snapshots
        while snaps and snaps[0][0] <= upto:
            self._compact(snaps.popleft()[1])
        self.role.on_persisted(upto)

    def deliver_to(self, z: int, limit: int | None = None) -> bool:
        """Deliver, in order, every txn after ``applied`` up to ``z`` that the history holds, or
        only the first ``limit`` of them; whether none is left."""
        if z <= self.applied:
            return True
        app, sid, out, tracing, tag = self.app, self.sid, self._out, self.tracing, self.rid_tag
        start = len(out)
        runs: list[tuple[int, list[str]]] = []  # (first zxid, digests) of consecutive txns
        nxt = 0
        txns = self.history.after(self.applied, z, limit)
        for txn in txns:
            result = app.apply(txn)
            out.append(Deliver(txn, result))
            if tracing:
                zx = txn.zxid
                if zx != nxt or zx >> 32 != runs[-1][0] >> 32:
                    runs.append((zx, []))
                runs[-1][1].append(trace.digest(txn.value))
                nxt = zx + 1
            if txn.origin == sid and txn.request_id & ~RID_MASK == tag:  # this incarnation's own
                out.append(Committed(txn.request_id & RID_MASK, txn.zxid, result))
                self.role.forget_request(txn.request_id)
            self.applied = txn.zxid
        if runs:  # traced ahead of the step's replies, as if one record per txn had been
            out[start:start] = [Trace(trace.Delivered(first >> 32, first, tuple(ds))) for first, ds in runs]
        return limit is None or len(txns) < limit or not self.history.after(self.applied, z, 1)

    def resume_later(self) -> None:
        """Have the shell step the role again (``on_resumed``) at its next loop turn; one at a time."""
        if not self._yielded:
            self._yielded = True
            self._out.append(Yield())

    def new_iteration(self, why: str) -> None:
        """End the current iteration: close its channels, drop what it held, look for a leader."""
        self.ended_why = why
        self.role.end()
        for ch in self.role.channels():
            self._out.append(Close(ch))
        for rid in self.role.uncertain_requests():
            if rid & ~RID_MASK == self.rid_tag:  # an earlier incarnation's request has no one waiting
                self._out.append(Failed(rid & RID_MASK, f"iteration ended ({why})", uncertain=True))
        # Held sends all belong to the iteration's channels, which are now closed.
        self._held = deque(a for a in self._held if not isinstance(a[1], Send))
        self.iteration += 1
        self.role = Election(self)

    def set_state(self, state: PeerState, leader: int, epoch: int) -> None:
        self.state = state
        self.leader_sid = leader
        self.trace(trace.StateChange(state.name, epoch, leader))

    # -- snapshots -----------------------------------------------------------------------------

    def _snapshot(self) -> None:
        self._image_persist = True
        self.request_image()

    def request_image(self) -> None:
        """Have the shell encode an image of the delivered state, unless one is being encoded
        already: a local snapshot and a leader's SNAPs share it (its zxid may then be below
        ``applied``, which the history after it covers)."""
        if self._image is not None and not self._image.stale:
            return
        self._image = self.app.image()
        self._out.append(EncodeSnapshot(self._image, self.applied))

    def install_app(self, restore: SnapshotRestore) -> None:
        """Replace the delivered state with a decoded SNAP; an image still being encoded is of
        the old one."""
        self._image = None
        self._image_persist = False
        restore.install()

    def _on_snapshot_encoded(self, event: SnapshotEncoded) -> None:
        if event.image is not self._image or event.image.stale:
            return  # the state was restored (a SNAP) since the image was taken
        self._image = None
        if self._image_persist:
            self._image_persist = False
            token = self.persist(PersistSnapshot, event.zxid, event.data)
            self._snapshots.append((token, event.zxid))
        self.role.on_image(event.zxid, event.data)

    def _compact(self, snap_zxid: Zxid) -> None:
        """Keep ``diff_window`` txns below the snapshot for DIFFs, and every txn a SNAP being sent
        in parts must be followed by; forget older ones."""
        floor = self.role.history_floor()
        keep_from = self.history.after(self.history.base, snap_zxid if floor is None else min(snap_zxid, floor))
        cut = len(keep_from) - self.cfg.diff_window
        if cut > 0:
            self.history.compact(keep_from[cut - 1].zxid)

    # -- election traffic for a replica that is not looking ----------------------------------

    def _on_notified(self, event: Notified) -> None:
        if self.state == PeerState.LOOKING:
            self.role.on_notification(event.note)  # type: ignore[union-attr]
        elif event.note.state == PeerState.LOOKING:
            self.role.answer_looking(event.sender)

    # -- introspection for shells and tests ------------------------------------------------

    @property
    def last_zxid(self) -> Zxid:
        return self.history.last

    def status(self) -> dict[str, object]:
        return {
            "sid": self.sid,
            "state": self.state.name,
            "leader": self.leader_sid,
            "accepted_epoch": self.accepted_epoch,
            "current_epoch": self.current_epoch,
            "last_zxid": int(self.history.last),
            "applied": int(self.applied),
            "iteration": self.iteration,
            "incarnation": self.incarnation,
            "phase": self.role.phase.value + (" (rejoining)" if self.rejoining else ""),
            "rejoining": self.rejoining,
        }
