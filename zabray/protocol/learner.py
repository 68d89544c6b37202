"""Phases 1-3 on a learner: a follower, or an observer (which never votes or ACKs proposals).

Every acknowledgement waits for the write it promises: ACKEPOCH for acceptedEpoch = e',
ACK of NEWLEADER for the synced history and then currentEpoch = e' (in that order of
durability), ACK(z) for every proposal through z. Delivery starts only at UPTODATE, which
tells the learner its leader is established and what is committed.

A NEWEPOCH equal to acceptedEpoch is acknowledged but counts toward the leader's quorum only
when it comes from the leader it was promised to: a leader makes acceptedEpoch = e' durable
before offering it, so (e', leader) names one leader iteration, and a promise made to another
leader of the same epoch must not count twice.

A SNAP changes nothing until the shell has decoded and checked it (``DecodeSnapshot``, answered
by ``SnapshotDecoded``): then the state, the history and the log are replaced at once. Meanwhile
the learner answers its leader's pings and keeps every other message for after the install, in
order, so no acknowledgement is sent for a state that might still fail its checks.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import TYPE_CHECKING

from zabray.errors import ProtocolError
from zabray.protocol.actions import (
    AppendTxns,
    Close,
    DecodeSnapshot,
    InstallSnapshot,
    Open,
    Send,
    TruncateLog,
    WriteAcceptedEpoch,
    WriteCurrentEpoch,
)
from zabray.protocol.events import ChannelId
from zabray.protocol.messages import (
    Ack,
    AckEpoch,
    AckNewLeader,
    Commit,
    Diff,
    FollowerInfo,
    Inform,
    LeaderInfo,
    Message,
    NewLeader,
    ObserverInfo,
    PeerState,
    Ping,
    Proposal,
    Proposals,
    Request,
    Snap,
    Touch,
    Trunc,
    Txn,
    UpToDate,
)
from zabray.protocol.role import Phase, Role
from zabray.protocol.zxid import ZERO, Zxid
from zabray.trace import records as trace

if TYPE_CHECKING:
    from zabray.protocol.node import Node
    from zabray.protocol.statemachine import SnapshotRestore


class Stage(enum.IntEnum):
    INFO_SENT = 0
    EPOCH_ACKED = 1  # ACKEPOCH sent (or held); receiving the sync
    NEWLEADER = 2  # NEWLEADER received; proposals may follow
    BROADCAST = 3  # UPTODATE received: delivering



class Learner(Role):
    def __init__(self, node: Node, leader: int) -> None:
        super().__init__(node)
        self.leader = leader
        self.observer = node.is_observer
        self.channel = ChannelId(node.sid, leader, node.incarnation, node.iteration)
        self.stage = Stage.INFO_SENT
        self.phase = Phase.DISCOVERY
        self.epoch = -1
        self.started = node.now
        self.heard = node.now
        self.commit_target: Zxid = ZERO
        self.last_acked: Zxid = ZERO
        self._marks: deque[tuple[int, Zxid]] = deque()
        self._forwarded: set[int] = set()
        self._snap_parts: list[bytes] = []  # a SNAP's parts so far, all of ``_snap_zxid``
        self._snap_zxid = -1
        # A SNAP the shell is decoding (state, zxid and the bytes to persist), and the leader's
        # messages after it, taken in order once it is installed.
        self._restore: tuple[SnapshotRestore, Zxid, bytes] | None = None
        self._after_snap: list[Message] = []
        node.set_state(PeerState.OBSERVING if self.observer else PeerState.FOLLOWING, leader,
                       node.current_epoch)
        node.emit(Open(self.channel))
        info = ObserverInfo if self.observer else FollowerInfo
        self._send(info(node.sid, node.accepted_epoch, node.history.last))

    def channels(self) -> list[ChannelId]:
        return [self.channel]

    def uncertain_requests(self) -> list[int]:
        return sorted(self._forwarded)

    def _send(self, msg: Message) -> None:
        self.node.emit(Send(self.channel, msg))

    # -- dispatch ------------------------------------------------------------------------------

    def on_message(self, channel: ChannelId, msg: Message) -> None:
        n = self.node
        if channel != self.channel:
            n.emit(Close(channel))
            return
        self.heard = n.now
        if self._restore is not None and type(msg) is not Ping:
            self._after_snap.append(msg)
            return
        match msg:
            case Proposal():
                self._on_proposals((msg.txn,))
            case Proposals():
                self._on_proposals(msg.txns)
            case Commit():
                self._on_commit(msg.zxid)
            case Ping():
                self._send(Ping(n.history.last))
            case Inform():
                self._on_inform(msg)
            case LeaderInfo():
                self._on_leader_info(msg)
            case Diff() | Trunc() | Snap():
                self._on_sync(msg)
            case NewLeader():
                self._on_newleader(msg)
            case UpToDate():
                self._on_uptodate(msg)
            case _:
                raise ProtocolError(f"unexpected {msg.NAME} from leader {self.leader}")

    # -- discovery -------------------------------------------------------------------------------

    def _on_leader_info(self, msg: LeaderInfo) -> None:
        n = self.node
        if self.stage != Stage.INFO_SENT:
            raise ProtocolError("LEADERINFO twice")
        e = msg.epoch
        if e > n.accepted_epoch:
            n.accepted_epoch, n.accepted_leader = e, self.leader
            n.persist(WriteAcceptedEpoch, e, self.leader)
            counted = True
        elif e == n.accepted_epoch:
            counted = n.accepted_leader == self.leader
        else:
            raise ProtocolError(f"NEWEPOCH {e} is below acceptedEpoch {n.accepted_epoch}")
        self.epoch = e
        self.stage = Stage.EPOCH_ACKED
        self.phase = Phase.SYNCHRONIZATION
        counted = counted and not n.rejoining  # its promise stands for nothing it had before
        n.hold(Send(self.channel, AckEpoch(n.current_epoch, n.history.last, counted)))

    # -- synchronization -------------------------------------------------------------------------

    def _on_sync(self, msg: Message) -> None:
        n = self.node
        if self.stage != Stage.EPOCH_ACKED:
            raise ProtocolError(f"{msg.NAME} outside synchronization")
        if self._snap_parts and not (isinstance(msg, Snap) and msg.zxid == self._snap_zxid):
            raise ProtocolError(f"{msg.NAME} inside a SNAP of {Zxid(self._snap_zxid)!r} sent in parts")
        if isinstance(msg, Diff):
            self._append(msg.txns)
        elif isinstance(msg, Trunc):
            if msg.zxid < n.applied:
                raise ProtocolError(f"TRUNC to {Zxid(msg.zxid)!r} would undo delivered {n.applied!r}")
            n.history.truncate(msg.zxid)
            n.persist(TruncateLog, Zxid(msg.zxid))
        elif isinstance(msg, Snap):
            if not msg.last:
                self._snap_parts.append(msg.state)
                self._snap_zxid = msg.zxid
                return
            state = b"".join([*self._snap_parts, msg.state]) if self._snap_parts else msg.state
            self._snap_parts = []
            z = Zxid(msg.zxid)
            restore = n.app.restoring(state)
            self._restore = (restore, z, state)
            n.emit(DecodeSnapshot(restore, z))

    def on_decoded(self, restore: SnapshotRestore) -> None:
        """The SNAP is decoded and checked: install it, then take what the leader sent after it."""
        if self._restore is None or restore is not self._restore[0]:
            return
        self._install()
        # What is left of the sync (the history after the image, NEWLEADER made durable,
        # UPTODATE) gets init_limit of its own: a 300,000-znode SNAP took longer than
        # init_limit to arrive and decode, and the learner then gave up just short of the end.
        self.started = self.node.now
        n, after, self._after_snap = self.node, self._after_snap, []
        for msg in after:
            if n.role is not self:
                return  # one of them ended the iteration
            self.on_message(self.channel, msg)

    def _install(self) -> None:
        """The SNAP replaces the delivered state, the history and the log (all of it committed:
        the leader's image of what it delivered)."""
        assert self._restore is not None
        n = self.node
        restore, z, state = self._restore
        self._restore = None
        n.install_app(restore)
        restore.stale = True  # done with: the shell stops, whatever it was doing
        n.history.reset(z)
        n.applied = z
        n.persist(InstallSnapshot, z, state)
        n.trace(trace.SnapshotInstalled(z.epoch, z))

    def _append(self, txns: tuple) -> None:  # type: ignore[type-arg]
        if not txns:
            return
        n = self.node
        for t in txns:
            n.history.append(t)
        self._marks.append((n.persist(AppendTxns, txns), txns[-1].zxid))

    def _on_newleader(self, msg: NewLeader) -> None:
        n = self.node
        if self.stage != Stage.EPOCH_ACKED or msg.epoch != self.epoch or self._snap_parts:
            raise ProtocolError("NEWLEADER out of order")
        if msg.zxid != n.history.last:
            raise ProtocolError(f"NEWLEADER at {Zxid(msg.zxid)!r} but synced to {n.history.last!r}")
        n.current_epoch = msg.epoch
        n.persist(WriteCurrentEpoch, msg.epoch)  # durable after the history synced before it
        n.rejoining = False  # it holds an established leader's history: it may count from now on
        self.stage = Stage.NEWLEADER
        self.phase = Phase.SYNCHRONIZATION
        self._marks.clear()  # the NEWLEADER ack covers everything synced so far
        self.last_acked = n.history.last
        n.hold(Send(self.channel, AckNewLeader(msg.epoch, n.history.last)))
        n.set_state(n.state, self.leader, msg.epoch)

    def _on_uptodate(self, msg: UpToDate) -> None:
        if self.stage != Stage.NEWLEADER:
            raise ProtocolError("UPTODATE before NEWLEADER")
        self.stage = Stage.BROADCAST
        self.phase = Phase.BROADCAST
        self._on_commit(msg.zxid)

    # -- broadcast -------------------------------------------------------------------------------

    def _on_proposals(self, txns: tuple[Txn, ...]) -> None:
        """One PROPOSAL or a PROPOSALS frame: every txn checked before any is appended, so a bad
        one ends the iteration with none of its frame taken (a frame is one unit, as a PROPOSAL is)."""
        for txn in txns:
            if self.stage < Stage.NEWLEADER or txn.zxid.epoch != self.epoch:
                raise ProtocolError(f"PROPOSAL {txn.zxid!r} out of place")
        self._append(txns)

    def on_persisted(self, upto: int) -> None:
        marks = self._marks
        if not marks or marks[0][0] > upto:
            return
        z = ZERO
        while marks and marks[0][0] <= upto:
            z = marks.popleft()[1]
        if self.stage >= Stage.NEWLEADER and not self.observer and z > self.last_acked:
            self.last_acked = z
            self._send(Ack(z))

    def _on_commit(self, z: int) -> None:
        if z > self.commit_target:
            self.commit_target = Zxid(z)
        if self.stage == Stage.BROADCAST:
            self._deliver()

    def _deliver(self) -> None:
        """Deliver what is committed, a chunk a step: a long backlog goes on at the next loop turn."""
        n = self.node
        if not n.deliver_to(self.commit_target, n.cfg.deliver_chunk):
            n.resume_later()

    def on_resumed(self) -> None:
        if self.stage == Stage.BROADCAST:
            self._deliver()

    def _on_inform(self, msg: Inform) -> None:
        n = self.node
        if not self.observer or self.stage < Stage.NEWLEADER:
            raise ProtocolError("INFORM out of place")
        fresh = tuple(t for t in msg.txns if t.zxid > n.history.last)
        self._append(fresh)
        if msg.txns:
            self._on_commit(msg.txns[-1].zxid)

    def on_touch(self, sessions: tuple[int, ...]) -> None:
        if self.stage == Stage.BROADCAST and sessions:
            self._send(Touch(tuple(sessions)))

    def on_submit(self, request_id: int, value: bytes) -> None:
        if self.stage != Stage.BROADCAST:
            super().on_submit(request_id, value)
            return
        self._forwarded.add(request_id)
        self._send(Request(self.node.sid, request_id, value))

    def on_tick(self) -> None:
        n = self.node
        if n.now - self.heard > n.cfg.sync_limit:
            n.new_iteration(f"leader {self.leader} silent")
        elif self.stage != Stage.BROADCAST and n.now - self.started > n.cfg.init_limit and self._restore is None:
            # (A learner decoding a SNAP is getting on, and its leader pings it meanwhile.)
            n.new_iteration(f"not synchronized with {self.leader} within init_limit")

    def end(self) -> None:
        """A SNAP still being decoded is finished now, as it was before SNAPs were decoded in
        slices: its state is committed, and a learner that dropped it would be sent it again
        from the start, by a leader that may wait for this very learner."""
        if self._restore is not None:
            restore = self._restore[0]
            while not restore.decode(1 << 62):
                pass
            self._install()

    def on_closed(self, channel: ChannelId) -> None:
        if channel == self.channel:
            self.node.new_iteration(f"channel to leader {self.leader} closed")

    def forget_request(self, request_id: int) -> None:
        self._forwarded.discard(request_id)
