"""Phase 0: fast leader election, as ZooKeeper's FastLeaderElection does it.

A vote names a candidate with the candidate's (currentEpoch, last zxid); votes are ordered by
(epoch, zxid, sid), so the winner holds the most up-to-date history of those that voted.
``round`` is the logical clock: a higher round resets what was counted. Election ends when a
quorum of this round's votes agree with ours and no better vote arrives within
``finalize_wait`` ticks (at once if every voter agrees), or when a quorum of replicas that
already left election name the same leader and that leader says it leads (the late joiner).
Notifications may be lost or reordered: a silent election re-sends its vote with backoff.
Observers and ``rejoining`` voters vote for nobody (leader -1) and are never counted: they wait
for a quorum of voters to name a leader that says it leads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zabray.protocol.actions import Close, Notify
from zabray.protocol.events import ChannelId
from zabray.protocol.leader import Leader
from zabray.protocol.learner import Learner
from zabray.protocol.messages import FollowerInfo, Message, Notification, ObserverInfo, PeerState
from zabray.protocol.role import Phase, Role

if TYPE_CHECKING:
    from zabray.protocol.node import Node

Vote = tuple[int, int, int]  # (leader sid, zxid, epoch)


def better(a_leader: int, a_zxid: int, a_epoch: int, b: Vote) -> bool:
    """Is vote a strictly better than vote b: by epoch, then zxid, then sid."""
    return (a_epoch, a_zxid, a_leader) > (b[2], b[1], b[0])


class Election(Role):
    phase = Phase.ELECTION

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        node.round += 1
        node.set_state(PeerState.LOOKING, -1, node.current_epoch)
        self.own: Vote = (node.sid, node.history.last, node.current_epoch)
        node.vote = self.own if node.votes else (-1, 0, 0)  # a non-voter's vote names nobody
        self.recv: dict[int, Vote] = {}
        self.outside: dict[int, Notification] = {}
        self.decide_at: int | None = None
        # Learners that connected before we knew we would lead: like a TCP accept backlog,
        # they wait for the outcome instead of being turned away (which would restart their
        # election with a higher round and could keep us from ever counting a quorum).
        self.backlog: dict[int, tuple[ChannelId, FollowerInfo | ObserverInfo]] = {}
        self.resend = node.cfg.election_resend
        self.resend_at = node.now + self.resend
        self.broadcast()

    # -- sending -------------------------------------------------------------------------------

    def _note(self) -> Notification:
        n = self.node
        leader, zxid, epoch = n.vote
        return Notification(n.sid, int(PeerState.LOOKING), leader, zxid, epoch, n.round)

    def broadcast(self) -> None:
        n = self.node
        note = self._note()
        for peer in sorted(n.cfg.members):
            if peer != n.sid:
                n.emit(Notify(peer, note))

    # -- receiving -----------------------------------------------------------------------------

    def on_message(self, channel: ChannelId, msg: Message) -> None:
        n = self.node
        if isinstance(msg, (FollowerInfo, ObserverInfo)) and channel.leader == n.sid and n.votes:
            old = self.backlog.get(channel.learner)
            if old is not None and old[0] != channel:
                n.emit(Close(old[0]))
            self.backlog[channel.learner] = (channel, msg)
        else:
            n.emit(Close(channel))  # a channel of an iteration we have left

    def on_closed(self, channel: ChannelId) -> None:
        old = self.backlog.get(channel.learner)
        if old is not None and old[0] == channel:
            del self.backlog[channel.learner]

    def channels(self) -> list[ChannelId]:
        return [ch for ch, _ in self.backlog.values()]

    def on_notification(self, note: Notification) -> None:
        n = self.node
        cfg = n.cfg
        sender = note.sender
        if sender not in cfg.members or sender == n.sid:
            return
        self.resend = cfg.election_resend
        self.resend_at = n.now + self.resend
        if sender not in cfg.voters or (note.state == PeerState.LOOKING and note.leader < 0):
            # Observers, and voters rejoining after losing their disk (they vote for nobody),
            # learn the outcome from voters; they never count.
            if note.state == PeerState.LOOKING and n.votes:
                n.emit(Notify(sender, self._note()))
            return
        if note.state == PeerState.LOOKING:
            self._on_looking(note)
        else:
            self._on_decided(note)

    def _on_looking(self, note: Notification) -> None:
        n = self.node
        if not n.votes:
            return
        if note.round > n.round:
            n.round = note.round
            self.recv.clear()
            n.vote = (
                (note.leader, note.zxid, note.epoch)
                if better(note.leader, note.zxid, note.epoch, self.own)
                else self.own
            )
            self.decide_at = None
            self.broadcast()
        elif note.round < n.round:
            n.emit(Notify(note.sender, self._note()))
            return
        elif better(note.leader, note.zxid, note.epoch, n.vote):
            n.vote = (note.leader, note.zxid, note.epoch)
            self.decide_at = None
            self.broadcast()
        elif (note.leader, note.zxid, note.epoch) != n.vote:
            # The sender votes worse than we do: tell it our vote now. It may have missed our
            # broadcast (it was still following when it arrived) and would otherwise wait for
            # our resend timer. Only strictly worse votes get a reply, so this cannot ping-pong.
            n.emit(Notify(note.sender, self._note()))
        if note.leader in n.cfg.voters:
            self.recv[note.sender] = (note.leader, note.zxid, note.epoch)
        self._check_quorum()

    def _on_decided(self, note: Notification) -> None:
        n = self.node
        vote = (note.leader, note.zxid, note.epoch)
        if note.round == n.round and n.votes:
            self.recv[note.sender] = vote
            if self._agree(vote, self.recv) and self._leader_ok(note.leader, note.round):
                self._decide(vote)
                return
        self.outside[note.sender] = note
        agreeing = {s for s, o in self.outside.items() if o.leader == note.leader}
        if n.cfg.is_quorum(agreeing) and self._leader_ok(note.leader, None):
            n.round = max(n.round, note.round)
            self._decide(vote)

    def _agree(self, vote: Vote, votes: dict[int, Vote]) -> bool:
        n = self.node
        sids = {s for s, v in votes.items() if v[0] == vote[0]}
        if n.vote[0] == vote[0] and n.votes:
            sids.add(n.sid)
        return n.cfg.is_quorum(sids)

    def _leader_ok(self, leader: int, round_: int | None) -> bool:
        """ZooKeeper's checkLeader: follow another replica only once it says it leads."""
        n = self.node
        if leader == n.sid:
            return round_ == n.round
        o = self.outside.get(leader)
        return o is not None and o.state == PeerState.LEADING

    def _check_quorum(self) -> None:
        n = self.node
        if not self._agree(n.vote, self.recv):
            self.decide_at = None
            return
        everyone = all(self.recv.get(v, (None,))[0] == n.vote[0] for v in n.cfg.voters if v != n.sid)
        if everyone:
            self._decide(n.vote)
        elif self.decide_at is None:
            self.decide_at = n.now + n.cfg.finalize_wait

    def on_tick(self) -> None:
        n = self.node
        if self.decide_at is None and n.votes:
            self._check_quorum()  # a lone voter is its own quorum
            if n.role is not self:
                return
        if self.decide_at is not None and n.now >= self.decide_at:
            if self._agree(n.vote, self.recv):
                self._decide(n.vote)
                return
            self.decide_at = None
        if n.now >= self.resend_at:
            self.resend = min(self.resend * 2, n.cfg.election_resend_max)
            self.resend_at = n.now + self.resend
            self.broadcast()

    # -- the outcome ---------------------------------------------------------------------------

    def _decide(self, vote: Vote) -> None:
        n = self.node
        n.vote = vote
        leader = vote[0]
        if leader == n.sid:
            n.role = Leader(n, list(self.backlog.values()))
        else:
            for ch in self.channels():
                n.emit(Close(ch))
            n.role = Learner(n, leader)

    def answer_looking(self, to: int) -> None:  # pragma: no cover - only non-looking roles answer
        pass
