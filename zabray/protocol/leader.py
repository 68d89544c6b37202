"""Phases 1-3 on the leader: discovery, synchronization and broadcast.

Discovery: on FOLLOWERINFO from a quorum (the leader included) pick e' above every
acceptedEpoch seen, make acceptedEpoch = e' durable, then send LEADERINFO(e'). A quorum of
ACKEPOCHs must not report a history better than the leader's (it would then hold txns the
leader lacks: the leader steps down and a new election picks that replica).

Synchronization: each learner gets DIFF, TRUNC+DIFF or SNAP+DIFF from its last zxid, then
NEWLEADER(e'). The leader is *established* once a quorum (itself counted only after its own
currentEpoch = e' is durable) has acknowledged NEWLEADER; it then commits its whole initial
history and sends UPTODATE.

Observers never count. While syncing they receive PROPOSALs like a follower (FIFO then covers
everything after their sync point); once active, INFORMs of committed txns.

Broadcast: proposals are pipelined up to ``max_outstanding``; ACKs are cumulative; the commit
point is the highest zxid durable at a quorum (the leader's own log counted only once its
write is durable). A learner that connects during broadcast is synced the same way and joins
the broadcast right after its NEWLEADER, so FIFO order makes it see every later proposal.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import TYPE_CHECKING

from zabray.errors import ProtocolError
from zabray.protocol.actions import (
    AppendTxns,
    Close,
    Send,
    SessionsTouched,
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
    Request,
    Requests,
    Snap,
    Touch,
    Trunc,
    Txn,
    UpToDate,
)
from zabray.protocol.role import Phase, Role
from zabray.protocol.statemachine import Encoded, joined
from zabray.protocol.zxid import ZERO, Zxid
from zabray.trace import records as trace

if TYPE_CHECKING:
    from zabray.protocol.node import Node


class Stage(enum.IntEnum):
    INFO = 0  # FOLLOWERINFO received; waiting for e' to be chosen
    EPOCH_SENT = 1  # LEADERINFO sent; waiting for ACKEPOCH
    EPOCH_ACKED = 2  # ACKEPOCH received; waiting to be synced
    SNAPPING = 3  # needs a SNAP: waiting for the image of the delivered state, then its parts going out
    SYNCING = 4  # history + NEWLEADER sent; in the broadcast set
    ACTIVE = 5  # NEWLEADER acknowledged


class LearnerHandle:
    __slots__ = ("channel", "sid", "observer", "stage", "accepted_epoch", "last_zxid",
                 "current_epoch", "counted", "acked", "heard", "snap", "snap_zxid")

    def __init__(self, channel: ChannelId, sid: int, observer: bool, accepted_epoch: int,
                 last_zxid: int, now: int) -> None:
        self.channel = channel
        self.sid = sid
        self.observer = observer
        self.stage = Stage.INFO
        self.accepted_epoch = accepted_epoch
        self.last_zxid = last_zxid
        self.current_epoch = -1
        self.counted = False  # its epoch promise counts toward the discovery quorum
        self.acked: Zxid = ZERO  # highest zxid known durable at this learner, this epoch
        self.heard = now
        self.snap: deque[Snap] = deque()  # SNAP parts not yet sent (SNAPPING): snap_tick_bytes a tick
        self.snap_zxid: Zxid = ZERO  # the image they are of


class Leader(Role):

    def __init__(self, node: Node, backlog: list[tuple[ChannelId, FollowerInfo | ObserverInfo]] = ()) -> None:  # type: ignore[assignment]
        super().__init__(node)
        self.epoch: int | None = None
        self.learners: dict[int, LearnerHandle] = {}  # by sid; one channel per learner
        self.started = node.now
        self.quorum_seen = node.now
        self.epoch_token: int | None = None  # own acceptedEpoch = e' durable at this token
        self.epoch_durable = False
        self.newleader_token: int | None = None
        self.newleader_durable = False
        self.established = False
        self.phase = Phase.DISCOVERY  # SYNCHRONIZATION once NEWLEADER is issued, BROADCAST once established
        self.committed: Zxid = ZERO
        self.next_counter = 1
        self.self_acked: Zxid = ZERO
        self._marks: deque[tuple[int, Zxid]] = deque()  # (token, zxid) of own appends
        self._queue: deque[tuple[int, int, bytes]] = deque()  # requests beyond max_outstanding
        self.proposal_sizes = (-1, -1, -1)  # last/min/max txn bytes proposed (srvr, mntr; ZooKeeper's BufferStats)
        node.set_state(PeerState.LEADING, node.sid, node.current_epoch)
        for channel, info in backlog:
            self._on_info(channel, info)
        self._maybe_choose_epoch()

    # -- helpers ----------------------------------------------------------------------------------

    def _send(self, h: LearnerHandle, msg: Message) -> None:
        self.node.emit(Send(h.channel, msg))

    def _drop(self, h: LearnerHandle, close: bool = True) -> None:
        del self.learners[h.sid]
        if close:
            self.node.emit(Close(h.channel))

    def _voters_at(self, stage: Stage) -> set[int]:
        return {s for s, h in self.learners.items() if not h.observer and h.stage >= stage}

    # -- discovery -------------------------------------------------------------------------------

    def _maybe_choose_epoch(self) -> None:
        n = self.node
        if self.epoch is not None:
            return
        infos = self._voters_at(Stage.INFO) | {n.sid}
        if not n.cfg.is_quorum(infos):
            return
        e = max([n.accepted_epoch, n.current_epoch] + [h.accepted_epoch for h in self.learners.values()]) + 1
        self.epoch = e
        n.accepted_epoch, n.accepted_leader = e, n.sid
        self.epoch_token = n.persist(WriteAcceptedEpoch, e, n.sid)
        for h in self.learners.values():
            self._offer_epoch(h)

    def _offer_epoch(self, h: LearnerHandle) -> None:
        assert self.epoch is not None
        h.stage = Stage.EPOCH_SENT
        # LEADERINFO promises e' is ours: only once our own acceptedEpoch = e' is durable.
        self.node.hold(Send(h.channel, LeaderInfo(self.epoch)))

    def _on_info(self, channel: ChannelId, msg: FollowerInfo | ObserverInfo) -> None:
        n = self.node
        observer = isinstance(msg, ObserverInfo)
        if msg.sid != channel.learner or msg.sid not in (n.cfg.observers if observer else n.cfg.voters):
            n.emit(Close(channel))
            return
        if self.epoch is not None and msg.accepted_epoch > self.epoch:
            # It promised a later epoch, to a leader that never got established: it can never
            # follow ours (ZooKeeper's learner loops back to election forever then). Stepping
            # down lets the next discovery hear that promise and pick an epoch above it.
            raise ProtocolError(f"learner {msg.sid} accepted epoch {msg.accepted_epoch}, above ours ({self.epoch})")
        old = self.learners.get(msg.sid)
        if old is not None:
            self._drop(old, close=old.channel != channel)
        h = LearnerHandle(channel, msg.sid, observer, msg.accepted_epoch, msg.last_zxid, n.now)
        self.learners[msg.sid] = h
        if self.epoch is None:
            self._maybe_choose_epoch()
        else:
            self._offer_epoch(h)

    def _on_ack_epoch(self, h: LearnerHandle, msg: AckEpoch) -> None:
        if h.stage != Stage.EPOCH_SENT:
            raise ProtocolError(f"ACKEPOCH from {h.sid} out of order")
        h.stage = Stage.EPOCH_ACKED
        h.current_epoch = msg.current_epoch
        h.last_zxid = msg.last_zxid
        h.counted = msg.counted and not h.observer
        if not self.established and h.counted:
            self._check_not_behind(h)
        if self.newleader_token is None:
            self._maybe_start_sync()
        else:
            self._sync(h)

    def _check_not_behind(self, h: LearnerHandle) -> None:
        """Zab: the leader must hold the most up-to-date history of its quorum. Election makes
        that the usual case; if a counted learner is ahead, step down so it can be elected."""
        n = self.node
        if (h.current_epoch, h.last_zxid) > (n.current_epoch, int(n.history.last)):
            raise ProtocolError(f"learner {h.sid} is ahead (epoch {h.current_epoch}, zxid {Zxid(h.last_zxid)!r})")

    def _maybe_start_sync(self) -> None:
        n = self.node
        if not self.epoch_durable or self.newleader_token is not None:
            return
        promised = {s for s, h in self.learners.items() if h.counted and h.stage >= Stage.EPOCH_ACKED}
        if not n.cfg.is_quorum(promised | {n.sid}):
            return
        assert self.epoch is not None
        n.current_epoch = self.epoch
        self.newleader_token = n.persist(WriteCurrentEpoch, self.epoch)
        self.phase = Phase.SYNCHRONIZATION
        for h in list(self.learners.values()):
            if h.stage == Stage.EPOCH_ACKED:
                self._sync(h)

    # -- synchronization -------------------------------------------------------------------------

    def _sync(self, h: LearnerHandle) -> None:
        """Send the learner what it needs to hold exactly our history, then NEWLEADER."""
        n = self.node
        hist = n.history
        lz = h.last_zxid
        if hist.contains(lz):
            start = lz
        else:
            floor = hist.floor(lz)
            if floor is not None:
                self._send(h, Trunc(floor))  # the learner holds txns we never had: uncommitted
                start = floor
            else:
                # A SNAP: the node's shell encodes an image of the delivered state in slices
                # (a large tree would stall the leader); ``on_image`` goes on from there.
                h.stage = Stage.SNAPPING
                n.request_image()
                return
        self._send_history(h, start)

    def _send_history(self, h: LearnerHandle, start: int) -> None:
        """DIFF everything after ``start``, then NEWLEADER; the learner joins the broadcast set."""
        hist = self.node.history
        chunk = self.node.cfg.diff_chunk
        txns = hist.after(start)
        for i in range(0, len(txns), chunk):
            self._send(h, Diff(tuple(txns[i : i + chunk])))
        assert self.epoch is not None
        self._send(h, NewLeader(self.epoch, hist.last))
        h.stage = Stage.SYNCING

    def on_image(self, zxid: Zxid, encoded: Encoded) -> None:
        """The delivered state at ``zxid`` is encoded: SNAP it to every learner waiting for it,
        in parts over ticks (``_send_snap``), then the history after it (everything proposed
        meanwhile included)."""
        # Compaction stays below every image: it follows only snapshots persisted from older ones.
        assert zxid >= self.node.history.base, f"image {zxid!r} below the history's base"
        # A learner already being sent an earlier image goes on with that one.
        waiting = [h for h in self.learners.values() if h.stage == Stage.SNAPPING and not h.snap]
        if not waiting:
            return  # a local snapshot: its bytes are not copied here
        state = joined(encoded)
        size = self.node.cfg.snap_chunk
        parts = [Snap(zxid, state[i : i + size], i + size >= len(state)) for i in range(0, len(state), size)]
        for h in waiting:
            h.snap, h.snap_zxid = deque(parts or [Snap(zxid, state)]), zxid
            self._send_snap(h)

    def _send_snap(self, h: LearnerHandle) -> None:
        """Send the learner its next SNAP parts (``snap_tick_bytes`` of them: the rest go at the
        next ticks), and once the last has gone, the history after the image (``history_floor``
        kept it) and NEWLEADER."""
        budget = self.node.cfg.snap_tick_bytes
        while h.snap and budget > 0:
            part = h.snap.popleft()
            self._send(h, part)
            budget -= len(part.state)
        if not h.snap:
            self._send_history(h, h.snap_zxid)

    def history_floor(self) -> int | None:
        pending = [h.snap_zxid for h in self.learners.values() if h.snap]
        return min(pending) if pending else None

    def _on_ack_newleader(self, h: LearnerHandle, msg: AckNewLeader) -> None:
        if h.stage != Stage.SYNCING or msg.epoch != self.epoch:
            raise ProtocolError(f"ACK of NEWLEADER from {h.sid} out of order")
        h.stage = Stage.ACTIVE
        h.acked = Zxid(msg.zxid)
        if self.established:
            self._send(h, UpToDate(self.committed))
            self._advance_commit()
        else:
            self._maybe_establish()

    def _maybe_establish(self) -> None:
        n = self.node
        if self.established or not self.newleader_durable:
            return
        if not n.cfg.is_quorum(self._voters_at(Stage.ACTIVE) | {n.sid}):
            return
        assert self.epoch is not None
        self.established = True
        self.phase = Phase.BROADCAST
        last = n.history.last
        self.committed = last
        self.self_acked = last
        n.trace(trace.Established(self.epoch, last))
        n.deliver_to(last)
        for h in self.learners.values():
            if h.stage == Stage.ACTIVE:
                self._send(h, UpToDate(last))
        self._drain_queue()

    # -- broadcast -------------------------------------------------------------------------------

    def on_submit(self, request_id: int, value: bytes) -> None:
        self._request(self.node.sid, request_id, value)

    def on_touch(self, sessions: tuple[int, ...]) -> None:
        if self.established and sessions:
            self.node.emit(SessionsTouched(sessions))

    def _request(self, origin: int, request_id: int, value: bytes) -> None:
        if not self.established:
            if origin == self.node.sid:
                super().on_submit(request_id, value)
            return  # a learner only forwards once synced, so this is a stale request
        if self._queue or self._outstanding() >= self.node.cfg.max_outstanding:
            self._queue.append((origin, request_id, value))
        else:
            self._propose(origin, request_id, value)

    @property
    def outstanding(self) -> int:
        """Proposals made and not yet committed; 0 before this leader has an epoch."""
        return 0 if self.epoch is None else self._outstanding()

    def _outstanding(self) -> int:
        assert self.epoch is not None
        if self.committed.epoch != self.epoch:
            return self.next_counter - 1
        return self.next_counter - 1 - self.committed.counter

    def _drain_queue(self) -> None:
        limit = self.node.cfg.max_outstanding
        while self._queue and self._outstanding() < limit:
            self._propose(*self._queue.popleft())

    def _propose(self, origin: int, request_id: int, value: bytes) -> None:
        n = self.node
        assert self.epoch is not None
        zxid = Zxid.of(self.epoch, self.next_counter)
        self.next_counter += 1
        txn = Txn(zxid, n.app.prepare(value, zxid), origin, request_id)
        n.history.append(txn)
        size = len(txn.value)
        _, lo, hi = self.proposal_sizes
        self.proposal_sizes = (size, size if lo < 0 else min(lo, size), max(hi, size))
        token = n.persist(AppendTxns, (txn,))
        self._marks.append((token, zxid))
        if n.tracing:
            n.trace(trace.Proposed(self.epoch, zxid, trace.digest(txn.value)))
        msg = Proposal(txn)
        for h in self.learners.values():
            # Observers see proposals only while syncing (so FIFO hands them everything after
            # their sync point); once active they get INFORMs of committed txns instead.
            if h.stage == Stage.SYNCING or (h.stage == Stage.ACTIVE and not h.observer):
                n.emit(Send(h.channel, msg))

    def _advance_commit(self) -> None:
        n = self.node
        if not self.established:
            return
        acks = sorted(
            [self.self_acked] + [h.acked for h in self.learners.values()
                                 if not h.observer and h.stage == Stage.ACTIVE],
            reverse=True,
        )
        if len(acks) < n.cfg.quorum:
            return
        point = acks[n.cfg.quorum - 1]
        if point <= self.committed:
            return
        prev = self.committed
        self.committed = point
        commit = Commit(point)
        inform: Inform | None = None
        for h in self.learners.values():
            if h.stage != Stage.ACTIVE:
                continue
            if h.observer:
                if inform is None:
                    inform = Inform(tuple(n.history.after(prev, point)))
                n.emit(Send(h.channel, inform))
            else:
                n.emit(Send(h.channel, commit))
        n.deliver_to(point)
        self._drain_queue()

    def on_persisted(self, upto: int) -> None:
        if not self.epoch_durable and self.epoch_token is not None and upto >= self.epoch_token:
            self.epoch_durable = True
            self._maybe_start_sync()
        if not self.newleader_durable and self.newleader_token is not None and upto >= self.newleader_token:
            self.newleader_durable = True
            self._maybe_establish()
        marks = self._marks
        if marks and marks[0][0] <= upto:
            while marks and marks[0][0] <= upto:
                self.self_acked = marks.popleft()[1]
            self._advance_commit()

    # -- dispatch ------------------------------------------------------------------------------

    def on_message(self, channel: ChannelId, msg: Message) -> None:
        n = self.node
        if channel.leader != n.sid:
            n.emit(Close(channel))
            return
        if isinstance(msg, (FollowerInfo, ObserverInfo)):
            self._on_info(channel, msg)
            return
        h = self.learners.get(channel.learner)
        if h is None or h.channel != channel:
            n.emit(Close(channel))  # not a channel of this iteration
            return
        h.heard = n.now
        match msg:
            case Ack():
                if h.stage == Stage.ACTIVE and msg.zxid > h.acked:
                    h.acked = Zxid(msg.zxid)
                    self._advance_commit()
            case Request():
                self._request(msg.origin, msg.request_id, msg.value)
            case Requests():
                for rid, value in msg.requests:
                    self._request(msg.origin, rid, value)
            case Ping():
                pass
            case Touch():
                if self.established and msg.sessions:
                    n.emit(SessionsTouched(msg.sessions))
            case AckEpoch():
                self._on_ack_epoch(h, msg)
            case AckNewLeader():
                self._on_ack_newleader(h, msg)
            case _:
                # A learner breaking the protocol loses its channel; the leader carries on.
                self._drop(h)

    def on_closed(self, channel: ChannelId) -> None:
        h = self.learners.get(channel.learner)
        if h is not None and h.channel == channel:
            self._drop(h, close=False)

    def on_tick(self) -> None:
        n = self.node
        cfg = n.cfg
        for h in [h for h in self.learners.values() if h.snap]:
            self._send_snap(h)
        if n.now % cfg.ping_interval == 0:
            # Every learner past its epoch hears from us, established or not (it answers PING
            # in any stage): one waiting for a large tree's image and SNAP, one decoding it, or
            # one waiting for the others to sync would otherwise outlast its sync_limit.
            ping = Ping(self.committed)
            for h in self.learners.values():
                if h.stage >= Stage.SNAPPING:
                    n.emit(Send(h.channel, ping))
        if not self.established:
            if n.now - self.started > cfg.init_limit:
                n.new_iteration("no quorum synchronized within init_limit")
            return
        for h in list(self.learners.values()):
            # As ZooKeeper's leader does, a learner still syncing (installing a large SNAP, say)
            # has init_limit to answer; once it has acknowledged NEWLEADER, sync_limit.
            if n.now - h.heard > (cfg.sync_limit if h.stage == Stage.ACTIVE else cfg.init_limit):
                self._drop(h)
        live = {s for s, h in self.learners.items() if not h.observer and h.stage == Stage.ACTIVE}
        if cfg.is_quorum(live | {n.sid}):
            self.quorum_seen = n.now
        elif n.now - self.quorum_seen > cfg.sync_limit:
            n.new_iteration("lost its quorum")
            return

    def channels(self) -> list[ChannelId]:
        return [h.channel for h in self.learners.values()]

    def end(self) -> None:
        self.node.app.abandon_prepared()

    def uncertain_requests(self) -> list[int]:
        # Our own clients' proposals not yet committed may still commit under the next leader.
        n = self.node
        return [t.request_id for t in n.history.after(self.committed) if t.origin == n.sid] + [
            rid for origin, rid, _ in self._queue if origin == n.sid
        ]
