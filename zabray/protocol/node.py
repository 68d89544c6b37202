"""One replica's protocol state machine: events in, actions out, no IO.

``Node.step(event) -> list[Action]`` is the only entry point. The node owns what every role
shares: the epochs, the in-memory history, the state machine, persist tokens and the
acknowledgements held back until the write behind them is durable. The role objects
(``Election``, ``Leader``, ``Learner``) hold what belongs to one iteration; ending an
iteration throws the role away, closes its channels and drops what it held.

Membership (``zabray.protocol.config_state``): the configuration in force is replicated state.
A reconfiguration txn's configuration is activated when the txn is delivered (or arrives with a
SNAP, or from a peer's notification once committed elsewhere), made durable with
``WriteConfig``, and until then counted only together with the one before it. A replica that
is not a member of a configuration it activates after having been one has *left*: it stops
serving (``Removed``), and a later start finds that out and stays out. A replica started with
``join=True`` may be outside its configuration: it learns the leader from the members and
follows it without a vote (a non-voting follower, or an observer if its static configuration
lists it as one) until a reconfiguration makes it a member.

Invariants:
- ``applied`` <= ``history.last``; everything at or below ``applied`` was delivered in order.
- ``durable_token`` <= ``token``; an action in ``_held`` is released only once
  ``durable_token`` reaches the token that was current when it was held.
- ``configs.active.version`` never decreases.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, assert_never

from zabray.errors import NotMemberError, ProtocolError
from zabray.protocol.actions import (
    Action,
    Close,
    Committed,
    Deliver,
    EncodeSnapshot,
    Failed,
    PersistAction,
    PersistSnapshot,
    Removed,
    Send,
    Trace,
    WriteConfig,
    Yield,
)
from zabray.protocol.config_state import ConfigState
from zabray.protocol.departed import Departed
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
    SubmitReconfig,
    Tick,
    TouchSessions,
)
from zabray.protocol.history import History
from zabray.protocol.leader import Leader
from zabray.protocol.learner import Learner
from zabray.protocol.membership import Membership
from zabray.protocol.messages import Notification, PeerState
from zabray.protocol.protocol_config import ProtocolConfig
from zabray.protocol.role import Phase
from zabray.protocol.statemachine import SnapshotImage, SnapshotRestore, StateMachine, ValueLog
from zabray.protocol.zxid import Zxid
from zabray.trace import records as trace

if TYPE_CHECKING:
    from zabray.protocol.durable import DurableState

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """Where a replica's protocol stands: what ``zabray status`` shows of a running replica."""

    state: PeerState
    leader: int
    """The leader it follows or is; -1 while it knows none."""
    accepted_epoch: int
    current_epoch: int
    last_zxid: Zxid
    """The last txn in its log."""
    applied: Zxid
    """The last txn it delivered."""
    iteration: int
    incarnation: int
    phase: Phase
    rejoining: bool
    """Wiped and not yet rebuilt from the leader: it votes for no one until it is."""
    config_version: int
    voters: tuple[int, ...]
    observers: tuple[int, ...]
    left: bool
    """A reconfiguration removed it."""


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
        join: bool = False,
    ) -> None:
        """``config`` holds the static configuration (in force until a durable one replaces it)
        and every timeout. ``join``: this replica is being added to the ensemble; it may be
        outside its configuration (``NotMemberError`` otherwise), even one it left before."""
        self.sid = sid
        self.cfg = config
        self.incarnation = incarnation
        self.rid_tag = (incarnation % (1 << 23)) << RID_BITS
        # Without a trace to write, the core skips its Trace actions and the per-txn digests
        # they carry (two hashes per txn on a leader).
        self.tracing = tracing
        static = Membership.of(config.voters, config.observers, addresses=dict(config.servers))
        self.configs = ConfigState(sid, static, durable.config)
        active = self.configs.active
        if sid not in active.sids and not join and not durable.left:
            raise NotMemberError(f"replica {sid} is not a member of the configuration "
                                 f"{sorted(active.sids)} (version {active.version:x}); add it with join")
        self.left = durable.left and not join
        # It has been a member of a configuration in force (not merely listed in the static
        # configuration it was started with to join): only such a replica can leave.
        self.joined = sid in active.sids and (durable.config is not None or not join)
        self.is_observer = sid in active.observers
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
        self._image_config: Membership = active  # the configuration at the image being encoded
        self.role: Election | Leader | Learner | Departed
        if self.left:
            self.role = Departed(self)
            self._pending_out.append(Removed(active.version))
        else:
            self.role = Election(self)

    @property
    def votes(self) -> bool:
        """It votes in elections: not an observer, not ``rejoining`` (a replica that lost its
        disk could otherwise help elect a leader that lacks what only its old disk held), not
        departed. Its vote counts only where a configuration lists it as a voter; a replica
        outside them all (joining) votes for others, as ZooKeeper's non-voting participants do,
        so that a member whose log holds a reconfiguration that adds it can count it."""
        return not self.is_observer and not self.rejoining and not self.left

    @property
    def candidate(self) -> bool:
        """It may be elected: it votes, and some configuration it must count under lists it as a
        voter."""
        return self.votes and any(self.sid in c.voters for c in self.quorum_configs())

    # -- configurations ----------------------------------------------------------------------------

    @property
    def config(self) -> Membership:
        """The configuration in force here: the newest this replica has activated."""
        return self.configs.active

    def quorum_configs(self) -> list[Membership]:
        return self.configs.quorum_configs(self.history, self.applied)

    def is_quorum(self, sids: set[int] | frozenset[int]) -> bool:
        """A quorum of every configuration that must agree now (``ConfigState``)."""
        for c in self.configs.quorum_configs(self.history, self.applied):
            if not c.is_quorum(sids):
                return False
        return True

    def voters(self) -> frozenset[int]:
        """Every replica whose vote or ack counts in some configuration that must agree now."""
        cfgs = self.quorum_configs()
        return cfgs[0].voters if len(cfgs) == 1 else frozenset().union(*(c.voters for c in cfgs))

    def peers(self) -> list[int]:
        return self.configs.peers(self.history, self.applied)

    def knows(self, sid: int) -> bool:
        """``sid`` is a member of some configuration this replica knows of."""
        return any(sid in c.sids for c in self.configs.known(self.history, self.applied))

    def activate(self, config: Membership) -> bool:
        """Put ``config`` in force (it was committed: delivered here, in a SNAP, or a peer's
        durable one); whether it was newer than the one in force. It is made durable
        (``WriteConfig``) before it counts alone; leaving is reported once that is durable."""
        cs = self.configs
        if config.version <= cs.active.version:
            return False
        left = self.joined and self.sid not in config.sids
        self.joined = self.sid in config.sids
        token = self.persist(WriteConfig, config, left)
        cs.activate(config, token)
        self.is_observer = self.sid in config.observers
        self.trace(trace.ConfigActivated(self.current_epoch, config.version,
                                         trace.members_text(config.voters, config.observers)))
        if left:
            self.left = True
            self.hold(Removed(config.version))
        return True

    def adopt(self, note: Notification) -> bool:
        """A peer's durable configuration, newer than any this replica knows: adopt it (it was
        committed). Whether it did; the caller's role is over then."""
        if note.config_version <= self.configs.active.version or not note.config:
            return False
        config = Membership.parse(note.config)
        if config.version != note.config_version:
            return False
        pending = [t for t in self.history.configs if t.zxid > self.applied]
        self.activate(config)
        log.info("replica %d: learned configuration %x from replica %d%s", self.sid, config.version, note.sender,
                 f" ({len(pending)} reconfiguration(s) in its log not delivered)" if pending else "")
        self.new_iteration(f"learned configuration {config.version:x} from replica {note.sender}")
        return True

    def note(self, to: int, state: int, leader: int, zxid: int, epoch: int) -> Notification:
        """A notification to ``to``, with our durable configuration's text unless ``to`` is
        known to have it."""
        durable = self.configs.durable
        text = ""
        if durable.version and self.configs.peer_versions.get(to, -1) < durable.version:
            text = durable.text()
        return Notification(self.sid, state, leader, zxid, epoch, self.round, durable.version, text)

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
            case SubmitReconfig():
                rid = event.request_id
                if not 0 <= rid <= RID_MASK:
                    raise ValueError(f"request id {rid} is not in [0, 2**{RID_BITS})")
                role.on_submit_reconfig(self.rid_tag | rid, event.value)
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
        if self.configs.activating and self.configs.persisted(upto):
            self.role.on_config_durable()
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
        activated: Membership | None = None
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
            if txn.config is not None and self.activate(txn.config):
                activated = txn.config
        if runs:  # traced ahead of the step's replies, as if one record per txn had been
            out[start:start] = [Trace(trace.Delivered(first >> 32, first, tuple(ds))) for first, ds in runs]
        if activated is not None:
            self.role.on_activated(activated)
        return limit is None or len(txns) < limit or not self.history.after(self.applied, z, 1)

    def resume_later(self) -> None:
        """Have the shell step the role again (``on_resumed``) at its next loop turn; one at a time."""
        if not self._yielded:
            self._yielded = True
            self._out.append(Yield())

    def new_iteration(self, why: str, leader: int = -1) -> None:
        """End the current iteration: close its channels, drop what it held, look for a leader;
        or, with ``leader`` (a reconfiguration's designated leader), go straight to following it
        (leading, if it is this replica), as ZooKeeper's hand-off skips the election. A replica
        that left the ensemble departs instead."""
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
        if self.left:
            self.role = Departed(self)
        elif leader == self.sid and self.candidate:
            self.vote = (self.sid, self.history.last, self.current_epoch)
            self.role = Leader(self)
        elif leader >= 0 and leader != self.sid and self.sid != leader:
            self.vote = (leader, self.history.last, self.current_epoch)
            self.role = Learner(self, leader)
        else:
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
        self._image_config = self.configs.active
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
        self.role.on_image(event.zxid, event.data, self._image_config)

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
        note = event.note
        self.configs.peer_versions[event.sender] = note.config_version
        if isinstance(self.role, Departed):
            self.role.on_notification(note)
        elif self.state == PeerState.LOOKING:
            self.role.on_notification(note)  # type: ignore[union-attr]
        elif note.state == PeerState.LOOKING:
            self.role.answer_looking(event.sender)

    # -- introspection for shells and tests ------------------------------------------------

    @property
    def last_zxid(self) -> Zxid:
        return self.history.last

    def status(self) -> NodeStatus:
        active = self.configs.active
        return NodeStatus(
            state=self.state, leader=self.leader_sid,
            accepted_epoch=self.accepted_epoch, current_epoch=self.current_epoch, last_zxid=self.history.last,
            applied=self.applied, iteration=self.iteration, incarnation=self.incarnation, phase=self.role.phase,
            rejoining=self.rejoining, config_version=active.version, voters=tuple(sorted(active.voters)),
            observers=tuple(sorted(active.observers)), left=self.left)
