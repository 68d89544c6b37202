"""What the leader knows of each learner: where it is in discovery and synchronization
(``Stage``), what it promised and what it holds durably. ``Leader`` and its reconfiguration
rules (``leader_reconfig``) both read it; it depends on neither."""

from __future__ import annotations

import enum
from collections import deque

from zabray.protocol.events import ChannelId
from zabray.protocol.messages import Snap
from zabray.protocol.zxid import ZERO, Zxid


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
