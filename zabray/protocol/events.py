"""What the IO shell tells the core. The core's only entry point is ``Node.step(event)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from zabray.fastinit import fast_inits
from zabray.protocol.messages import Message, Notification
from zabray.protocol.statemachine import Encoded, SnapshotImage, SnapshotRestore
from zabray.protocol.zxid import Zxid


@dataclass(frozen=True, slots=True)
class ChannelId:
    """One FIFO channel between a learner and a leader for one iteration of the learner.

    The learner opens it when it starts following and both ends close it when either ends its
    iteration; (``incarnation``, ``iteration``) make it unique for the life of the ensemble, so a
    message from an old iteration can never be taken for one of the current iteration.
    """

    learner: int
    leader: int
    incarnation: int
    iteration: int

    def peer_of(self, sid: int) -> int:
        return self.leader if sid == self.learner else self.learner


class EventBase:
    """What every event derives from; ``Event`` is the closed union of them all."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Tick(EventBase):
    """One unit of time passed. All timeouts in the core are counted in ticks."""


@dataclass(frozen=True, slots=True)
class Received(EventBase):
    """``msg`` arrived on ``channel`` (the first message on a channel the leader has not seen opens it)."""

    channel: ChannelId
    msg: Message


@dataclass(frozen=True, slots=True)
class Notified(EventBase):
    """An election notification arrived from ``sender``."""

    sender: int
    note: Notification


@dataclass(frozen=True, slots=True)
class ChannelClosed(EventBase):
    """The channel broke or the peer closed it; the iteration that used it is over."""

    channel: ChannelId


@dataclass(frozen=True, slots=True)
class Persisted(EventBase):
    """Every persist action with ``token <= upto`` is durable (they complete in token order)."""

    upto: int


RID_BITS = 40
RID_MASK = (1 << RID_BITS) - 1
"""A ``Submit``'s request id is below ``1 << RID_BITS``. In the txn it becomes ``tag | id``, the tag
being the node's incarnation (mod 2**23) above those bits: a txn the replica's previous
incarnation forwarded may commit after a restart, when its shell's request ids have started
again at 1, so without the tag the old txn would answer a new request of the same id (with
another write's zxid)."""


@dataclass(frozen=True, slots=True)
class Submit(EventBase):
    """A client asks for ``value`` to be broadcast; answered by ``Committed`` or ``Failed`` with
    the same ``request_id``, which must be in [0, 2**40) and not reused while one is pending."""

    request_id: int
    value: bytes


@dataclass(frozen=True, slots=True)
class Resumed(EventBase):
    """The turn a ``Yield`` asked for."""


@dataclass(frozen=True, slots=True)
class TouchSessions(EventBase):
    """Clients of these sessions were heard from at this replica. A learner passes them to its
    leader (TOUCH); the leader reports them to its own shell (``SessionsTouched``)."""

    sessions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SnapshotRequested(EventBase):
    """The shell wants a snapshot of the delivered state (answered with ``EncodeSnapshot``)."""


@dataclass(frozen=True, slots=True)
class SnapshotEncoded(EventBase):
    """The shell has encoded the image an ``EncodeSnapshot`` asked for: ``data`` is its bytes, in
    parts."""

    image: SnapshotImage
    zxid: Zxid
    data: Encoded


@dataclass(frozen=True, slots=True)
class SnapshotDecoded(EventBase):
    """The shell has decoded (and checked) the SNAP a ``DecodeSnapshot`` asked it to."""

    restore: SnapshotRestore


Event: TypeAlias = (Tick | Received | Notified | ChannelClosed | Persisted | Submit | Resumed | TouchSessions
                    | SnapshotRequested | SnapshotEncoded | SnapshotDecoded)
"""Every event the core takes, a closed union: ``Node.step`` matches it exhaustively, so an event
added here without a case there fails the type check."""

fast_inits(globals())  # built on every message or write: see zabray.fastinit
