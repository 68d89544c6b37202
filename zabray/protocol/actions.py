"""What the core asks of the IO shell: send, persist, deliver, reply, trace.

Persist actions carry a ``token``; tokens increase and the shell makes them durable in token
order, reporting ``Persisted(upto)``. The core never emits a message that promises durability
(ACKEPOCH, ACK of NEWLEADER, ACK) until the ``Persisted`` covering its backing write arrives:
the rule is in the data flow, so a shell cannot break it by acting promptly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from zabray.fastinit import fast_inits
from zabray.protocol.events import ChannelId
from zabray.protocol.messages import Message, Notification, Txn
from zabray.protocol.statemachine import Encoded, SnapshotImage, SnapshotRestore
from zabray.protocol.zxid import Zxid


class ActionBase:
    """What every action derives from; ``Action`` is the closed union of them all."""

    __slots__ = ()


# -- network ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Open(ActionBase):
    """Open ``channel`` to its leader (learner side). Messages follow with ``Send``."""

    channel: ChannelId


@dataclass(frozen=True, slots=True)
class Send(ActionBase):
    channel: ChannelId
    msg: Message


@dataclass(frozen=True, slots=True)
class Close(ActionBase):
    """End ``channel``: undelivered messages on it are dropped, the peer sees ``ChannelClosed``."""

    channel: ChannelId


@dataclass(frozen=True, slots=True)
class Notify(ActionBase):
    """Send an election notification to replica ``to`` (best effort; election re-sends)."""

    to: int
    note: Notification


# -- durability (all carry a token) ------------------------------------------------------------


class Persist(ActionBase):
    __slots__ = ()
    token: int


@dataclass(frozen=True, slots=True)
class AppendTxns(Persist):
    token: int
    txns: tuple[Txn, ...]


@dataclass(frozen=True, slots=True)
class TruncateLog(Persist):
    """Drop every logged txn after ``zxid``."""

    token: int
    zxid: Zxid


@dataclass(frozen=True, slots=True)
class WriteAcceptedEpoch(Persist):
    """acceptedEpoch = ``epoch``, promised to ``leader`` (so the same leader may re-offer it)."""

    token: int
    epoch: int
    leader: int


@dataclass(frozen=True, slots=True)
class WriteCurrentEpoch(Persist):
    token: int
    epoch: int


@dataclass(frozen=True, slots=True)
class InstallSnapshot(Persist):
    """SNAP from the leader: the state as of ``zxid`` replaces the whole log and any snapshot."""

    token: int
    zxid: Zxid
    state: bytes


@dataclass(frozen=True, slots=True)
class EncodeSnapshot(ActionBase):
    """Encode ``image``, the delivered state at ``zxid``, and answer with ``SnapshotEncoded``.

    Not a persist: the shell may take its time (in slices between other work, so a large state
    does not stall the replica), and the core goes on meanwhile. The bytes come back to the core,
    which persists them as ``PersistSnapshot`` in its token order."""

    image: SnapshotImage
    zxid: Zxid


@dataclass(frozen=True, slots=True)
class DecodeSnapshot(ActionBase):
    """Decode ``restore``, a SNAP of the state at ``zxid``, and answer with ``SnapshotDecoded``.

    Not a persist: the shell decodes it in slices between other work, so that a large state does
    not keep the learner from answering its leader; the core installs it and persists it once it
    is decoded, and stops the shell by marking it ``stale`` if it no longer wants it."""

    restore: SnapshotRestore
    zxid: Zxid


@dataclass(frozen=True, slots=True)
class PersistSnapshot(Persist):
    """A local snapshot of the delivered state at ``zxid``; the log is kept. ``state`` is its bytes,
    whole or in parts (``Encoded``)."""

    token: int
    zxid: Zxid
    state: bytes | Encoded


# -- the application and clients ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Deliver(ActionBase):
    """``txn`` is committed and has been applied to the state machine, in zxid order."""

    txn: Txn
    result: object = None


@dataclass(frozen=True, slots=True)
class Committed(ActionBase):
    request_id: int
    zxid: Zxid
    result: object = None


@dataclass(frozen=True, slots=True)
class Failed(ActionBase):
    """The request did not commit here. ``uncertain``: it may still commit (it left this replica)."""

    request_id: int
    reason: str
    uncertain: bool


@dataclass(frozen=True, slots=True)
class SessionsTouched(ActionBase):
    """Leader only: these sessions are alive (heard here or reported by a learner)."""

    sessions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Yield(ActionBase):
    """The core has more to do (a learner's backlog to deliver) and lets other work in first:
    step it with ``Resumed`` at the next loop turn, once the sockets have been polled."""


@dataclass(frozen=True, slots=True)
class Trace(ActionBase):
    """A trace record (``zabray.trace.records``); the shell stamps run, replica, incarnation and time."""

    record: object


PersistAction: TypeAlias = (AppendTxns | TruncateLog | WriteAcceptedEpoch | WriteCurrentEpoch | InstallSnapshot
                            | PersistSnapshot)
"""The persist actions: each carries a token, and the shell makes them durable in token order."""

Outcome: TypeAlias = Deliver | Committed | Failed | SessionsTouched
"""What the hosted service (the clients' side of a replica) hears of a step."""

Action: TypeAlias = (Send | Trace | PersistAction | Deliver | Committed | Failed | SessionsTouched | Notify | Open
                     | Close | EncodeSnapshot | DecodeSnapshot | Yield)
"""Every action the core emits, a closed union: ``zabray.protocol.executor.execute`` matches it
exhaustively, so an action added here without a case there fails the type check."""

fast_inits(globals())  # built on every message or write: see zabray.fastinit
