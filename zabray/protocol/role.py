"""What every role (election, leader, learner) offers the node."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from zabray.protocol.actions import Failed, Notify
from zabray.protocol.events import ChannelId
from zabray.protocol.messages import Message, Notification

if TYPE_CHECKING:
    from zabray.protocol.node import Node
    from zabray.protocol.statemachine import Encoded, SnapshotRestore
    from zabray.protocol.zxid import Zxid


class Phase(enum.StrEnum):
    """Where a replica is in an iteration of Zab: election (phase 0), discovery (1),
    synchronization (2), broadcast (3). Its value is the name traces and crash points use."""

    ELECTION = "election"
    DISCOVERY = "discovery"
    SYNCHRONIZATION = "synchronization"
    BROADCAST = "broadcast"


class Role:
    phase: Phase
    """Kept current by each role as it moves on (read on every step by the shells)."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def on_message(self, channel: ChannelId, msg: Message) -> None:
        raise NotImplementedError

    def on_persisted(self, upto: int) -> None:
        pass

    def on_tick(self) -> None:
        pass

    def on_closed(self, channel: ChannelId) -> None:
        pass

    def on_submit(self, request_id: int, value: bytes) -> None:
        self.node.emit(Failed(self.node.untag(request_id), "no leader is established", uncertain=False))

    def on_touch(self, sessions: tuple[int, ...]) -> None:
        """Session liveness: dropped unless a leader (or a learner with a leader) is there."""

    def on_image(self, zxid: Zxid, encoded: Encoded) -> None:
        """An image of the delivered state at ``zxid`` is encoded (only a leader waits for one)."""

    def on_decoded(self, restore: SnapshotRestore) -> None:
        """The shell has decoded a SNAP (only a learner asks for that; an ended one has let it go)."""

    def on_resumed(self) -> None:
        """The turn ``Node.resume_later`` asked for."""

    def forget_request(self, request_id: int) -> None:
        """The request committed and was answered; it is no longer in doubt."""

    def end(self) -> None:
        """The iteration is over; drop any state that only made sense inside it."""

    def channels(self) -> list[ChannelId]:
        return []

    def uncertain_requests(self) -> list[int]:
        return []

    def history_floor(self) -> int | None:
        """The lowest zxid whose successors this role still has to send from the history (a SNAP
        in parts is followed by the txns after its image), or None: compaction stays below it."""
        return None

    def answer_looking(self, to: int) -> None:
        """Tell a looking replica whom we follow (or that we lead), so a late joiner finds us."""
        n = self.node
        leader, zxid, epoch = n.vote
        n.emit(Notify(to, Notification(n.sid, int(n.state), leader, zxid, epoch, n.round)))
