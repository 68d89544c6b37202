"""Every Zab packet as a frozen, slotted dataclass, named after the protocol's own packets.

Election notifications travel between any two replicas; everything else travels on a
per-iteration channel between a learner (follower or observer) and its leader, in FIFO order.
``TAG`` is the packet's number on the wire (see ``codec``); tags are never reused.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

from zabray.fastinit import fast_inits
from zabray.protocol.membership import Membership
from zabray.protocol.zxid import Zxid


class PeerState(enum.IntEnum):
    LOOKING = 0
    FOLLOWING = 1
    LEADING = 2
    OBSERVING = 3


@dataclass(frozen=True, slots=True)
class Txn:
    """A proposal's payload. ``origin``/``request_id`` name the replica and request that asked for it,
    so that replica can answer its client when it delivers the txn; (-1, 0) when no client waits."""

    zxid: Zxid
    value: bytes
    origin: int = -1
    request_id: int = 0
    config: Membership | None = None
    """A reconfiguration txn: the configuration it makes (its version is ``zxid``), activated by
    every replica that delivers it. None for every other txn."""


class Message:
    """Base of all packets."""

    __slots__ = ()
    TAG: ClassVar[int]
    NAME: ClassVar[str]


# -- phase 0: fast leader election ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Notification(Message):
    """A vote: ``leader`` proposed, with that candidate's ``zxid`` and ``epoch`` (its currentEpoch),
    in election ``round`` (ZooKeeper's logical clock), from ``sender`` whose state is ``state``.

    ``config_version`` is the version of the sender's durable configuration; ``config`` is that
    configuration's text (``Membership.text``) when the sender does not know the receiver to have
    it, else empty: a replica that missed a reconfiguration learns the committed configuration
    from its peers, as ZooKeeper's notifications carry it."""

    TAG: ClassVar[int] = 1
    NAME: ClassVar[str] = "NOTIFICATION"
    sender: int
    state: int
    leader: int
    zxid: int
    epoch: int
    round: int
    config_version: int = 0
    config: str = ""


# -- phase 1: discovery ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FollowerInfo(Message):
    """CEPOCH: a follower's acceptedEpoch and last zxid, the first packet on a new channel."""

    TAG: ClassVar[int] = 10
    NAME: ClassVar[str] = "FOLLOWERINFO"
    sid: int
    accepted_epoch: int
    last_zxid: int


@dataclass(frozen=True, slots=True)
class ObserverInfo(Message):
    """As FOLLOWERINFO, from an observer: it is synced and informed but never counted in a quorum."""

    TAG: ClassVar[int] = 11
    NAME: ClassVar[str] = "OBSERVERINFO"
    sid: int
    accepted_epoch: int
    last_zxid: int


@dataclass(frozen=True, slots=True)
class LeaderInfo(Message):
    """NEWEPOCH(e'): the prospective leader's new epoch."""

    TAG: ClassVar[int] = 12
    NAME: ClassVar[str] = "LEADERINFO"
    epoch: int


@dataclass(frozen=True, slots=True)
class AckEpoch(Message):
    """ACK-E: sent only once acceptedEpoch = e' is durable; carries currentEpoch and last zxid.

    ``counted`` is False when the learner had already promised e' to another leader: it may
    still be synced (as ZooKeeper does), but its promise cannot count toward this leader's
    quorum, so at most one leader per epoch gathers a counted quorum."""

    TAG: ClassVar[int] = 13
    NAME: ClassVar[str] = "ACKEPOCH"
    current_epoch: int
    last_zxid: int
    counted: bool


# -- phase 2: synchronization ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Diff(Message):
    """Txns the learner lacks, in zxid order (possibly one of several chunks)."""

    TAG: ClassVar[int] = 20
    NAME: ClassVar[str] = "DIFF"
    txns: tuple[Txn, ...]


@dataclass(frozen=True, slots=True)
class Trunc(Message):
    """Cut the learner's log back to ``zxid``: what follows was never committed."""

    TAG: ClassVar[int] = 21
    NAME: ClassVar[str] = "TRUNC"
    zxid: int


@dataclass(frozen=True, slots=True)
class Snap(Message):
    """Replace the learner's state with the leader's state as of ``zxid`` (all committed).

    A state larger than ``snap_chunk`` comes in parts, in order, one frame each: every part but
    the last has ``last=False``, and the learner restores the state once the last arrives."""

    TAG: ClassVar[int] = 22
    NAME: ClassVar[str] = "SNAP"
    zxid: int
    state: bytes
    last: bool = True
    config: str = ""
    """The configuration in force at ``zxid`` (``Membership.text``; on the last part): the
    learner's state then is the image's, membership included."""


@dataclass(frozen=True, slots=True)
class NewLeader(Message):
    """NEWLEADER(e'): the history sent so far ends at ``zxid``; acknowledge it once it and
    currentEpoch = e' are durable."""

    TAG: ClassVar[int] = 23
    NAME: ClassVar[str] = "NEWLEADER"
    epoch: int
    zxid: int


@dataclass(frozen=True, slots=True)
class AckNewLeader(Message):
    """ACK of NEWLEADER: the learner's history through ``zxid`` and currentEpoch are durable."""

    TAG: ClassVar[int] = 24
    NAME: ClassVar[str] = "ACK_NEWLEADER"
    epoch: int
    zxid: int


@dataclass(frozen=True, slots=True)
class UpToDate(Message):
    """COMMIT-LD: the leader is established; everything through ``zxid`` is committed."""

    TAG: ClassVar[int] = 25
    NAME: ClassVar[str] = "UPTODATE"
    zxid: int


# -- phase 3: broadcast -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Proposal(Message):
    TAG: ClassVar[int] = 30
    NAME: ClassVar[str] = "PROPOSAL"
    txn: Txn


@dataclass(frozen=True, slots=True)
class Proposals(Message):
    """Consecutive PROPOSALs in one frame, in zxid order: received, the same as each in turn (the
    channel is FIFO). The transport packs what a leader proposes in one burst; the core never
    emits it, and a learner must take it wherever it takes a PROPOSAL."""

    TAG: ClassVar[int] = 37
    NAME: ClassVar[str] = "PROPOSALS"
    txns: tuple[Txn, ...]


@dataclass(frozen=True, slots=True)
class Ack(Message):
    """Cumulative: every proposal of this epoch through ``zxid`` is durable at the sender."""

    TAG: ClassVar[int] = 31
    NAME: ClassVar[str] = "ACK"
    zxid: int


@dataclass(frozen=True, slots=True)
class Commit(Message):
    """Cumulative: every txn through ``zxid`` is committed."""

    TAG: ClassVar[int] = 32
    NAME: ClassVar[str] = "COMMIT"
    zxid: int


@dataclass(frozen=True, slots=True)
class Inform(Message):
    """Committed txns for an observer, which sees no PROPOSAL and sends no ACK."""

    TAG: ClassVar[int] = 33
    NAME: ClassVar[str] = "INFORM"
    txns: tuple[Txn, ...]


@dataclass(frozen=True, slots=True)
class Ping(Message):
    """Heartbeat both ways; from the leader ``zxid`` is its last committed zxid."""

    TAG: ClassVar[int] = 34
    NAME: ClassVar[str] = "PING"
    zxid: int


@dataclass(frozen=True, slots=True)
class Request(Message):
    """A client write forwarded by the learner ``origin`` to its leader."""

    TAG: ClassVar[int] = 35
    NAME: ClassVar[str] = "REQUEST"
    origin: int
    request_id: int
    value: bytes


@dataclass(frozen=True, slots=True)
class Requests(Message):
    """Consecutive REQUESTs of one learner in one frame: ``(request_id, value)`` pairs in the
    order they were forwarded, the same at the leader as each REQUEST in turn."""

    TAG: ClassVar[int] = 38
    NAME: ClassVar[str] = "REQUESTS"
    origin: int
    requests: tuple[tuple[int, bytes], ...]


@dataclass(frozen=True, slots=True)
class Touch(Message):
    """Sessions a learner's clients were heard from; the leader's session tracker expires the rest
    (ZooKeeper piggybacks these on learner pings)."""

    TAG: ClassVar[int] = 36
    NAME: ClassVar[str] = "TOUCH"
    sessions: tuple[int, ...]


# -- reconfiguration ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReconfigRequest(Message):
    """A reconfiguration request forwarded by the learner ``origin`` to its leader: ``value`` is
    the hosted service's encoding of it (the leader's state machine reads it)."""

    TAG: ClassVar[int] = 39
    NAME: ClassVar[str] = "RECONFIG"
    origin: int
    request_id: int
    value: bytes


@dataclass(frozen=True, slots=True)
class CommitAndActivate(Message):
    """COMMIT of the reconfiguration txn ``zxid`` (and everything before it): activate its
    configuration, and follow ``leader`` (ZooKeeper's designated leader) from now on. A learner
    whose leader changes closes its channel: the old leader sends nothing after this."""

    TAG: ClassVar[int] = 40
    NAME: ClassVar[str] = "COMMITANDACTIVATE"
    zxid: int
    leader: int


@dataclass(frozen=True, slots=True)
class InformAndActivate(Message):
    """INFORM for an observer of committed txns ending with a reconfiguration txn, with the
    designated ``leader`` (as COMMITANDACTIVATE)."""

    TAG: ClassVar[int] = 41
    NAME: ClassVar[str] = "INFORMANDACTIVATE"
    txns: tuple[Txn, ...]
    leader: int


@dataclass(frozen=True, slots=True)
class Refused(Message):
    """The leader refused the learner's reconfiguration request ``request_id`` without a txn
    (``reason`` starts with ZooKeeper's error name): nothing changed."""

    TAG: ClassVar[int] = 42
    NAME: ClassVar[str] = "REFUSED"
    request_id: int
    reason: str


ALL_MESSAGES: tuple[type[Message], ...] = (
    Notification,
    FollowerInfo,
    ObserverInfo,
    LeaderInfo,
    AckEpoch,
    Diff,
    Trunc,
    Snap,
    NewLeader,
    AckNewLeader,
    UpToDate,
    Proposal,
    Proposals,
    Ack,
    Commit,
    Inform,
    Ping,
    Request,
    Requests,
    Touch,
    ReconfigRequest,
    CommitAndActivate,
    InformAndActivate,
    Refused,
)

BATCHES: tuple[type[Message], ...] = (Proposals, Requests)
"""Frames the transport makes of a burst; a replica's holds and crash points see their messages."""


def unbatch(msg: Proposals | Requests) -> list[Message]:
    """The PROPOSALs or REQUESTs a batch frame stands for, in order."""
    if type(msg) is Proposals:
        return [Proposal(t) for t in msg.txns]
    assert type(msg) is Requests
    return [Request(msg.origin, rid, value) for rid, value in msg.requests]


fast_inits(globals())  # built on every message or write: see zabray.fastinit
