"""Znode records: the Stat clients see, the change events watches need, and the compact views
the request processor reasons about."""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Stat:
    """A znode's metadata, in ZooKeeper's field order.

    czxid/mzxid: zxid of the create / last data change; pzxid: zxid of the last child create or
    delete (the create's zxid while childless). ctime/mtime come from the requests (ms), never
    from a clock. version counts data changes, cversion counts child *creations* (ZooKeeper does
    not bump it on child deletes, which is why sequential names never repeat), aversion is
    always 0 (no ACLs). ephemeral_owner is the owning session id, 0 for persistent znodes.
    """

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int

    def as_tuple(self) -> tuple[int, ...]:
        return (
            self.czxid,
            self.mzxid,
            self.ctime,
            self.mtime,
            self.version,
            self.cversion,
            self.aversion,
            self.ephemeral_owner,
            self.data_length,
            self.num_children,
            self.pzxid,
        )


ROOT_STAT = Stat(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


class EventType(enum.Enum):
    """What happened to a path, for watches: CREATED/DELETED/CHANGED fire data and exists
    watches on the path; CHILD fires child watches on the path (a child was created or deleted).
    A DELETED path's child watches fire too, as in ZooKeeper."""

    CREATED = "created"
    DELETED = "deleted"
    CHANGED = "changed"
    CHILD = "child"


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    event: EventType


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the request processor needs to know of a znode in the future state."""

    version: int
    cversion: int
    ephemeral_owner: int
    num_children: int
