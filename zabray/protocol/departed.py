"""The role of a replica that has left the ensemble: a reconfiguration it delivered (or learned)
removed it. It takes part in nothing more (no votes, no channels, no requests) but one thing:
a looking replica that does not have its configuration is told it, so that members of the new
configuration that missed its commit (the old leader committed it and left) can adopt it and
elect a leader without the members that left. The shell stops serving clients when the
``Removed`` action (released once its ``WriteConfig`` is durable) arrives, and stops the replica
once the new configuration's members all have it (ZooKeeper's removed servers likewise go on
running until an operator shuts them down)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zabray.protocol.actions import Close, Failed, Notify
from zabray.protocol.events import ChannelId
from zabray.protocol.messages import Message, Notification, PeerState
from zabray.protocol.role import Phase, Role

if TYPE_CHECKING:
    from zabray.protocol.node import Node


class Departed(Role):
    phase = Phase.LEFT

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        node.set_state(PeerState.LOOKING, -1, node.current_epoch)

    def on_message(self, channel: ChannelId, msg: Message) -> None:
        self.node.emit(Close(channel))

    def on_submit(self, request_id: int, value: bytes) -> None:
        self.node.emit(Failed(self.node.untag(request_id), f"replica {self.node.sid} left the ensemble",
                              uncertain=False))

    def on_notification(self, note: Notification) -> None:
        n = self.node
        if note.state == PeerState.LOOKING and note.config_version < n.configs.durable.version:
            n.emit(Notify(note.sender, n.note(note.sender, int(PeerState.LOOKING), -1, 0, 0)))

    def answer_looking(self, to: int) -> None:
        pass
