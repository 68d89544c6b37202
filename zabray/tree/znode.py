"""Znode records: the Stat clients see, the change events watches need, and the compact views
the request processor reasons about."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from zabray.fastinit import fast_inits


@dataclass(frozen=True, slots=True)
class Stat:
    """A znode's metadata, in ZooKeeper's field order.

    This is the Stat a client sees, filled as ZooKeeper 3.8 fills it. czxid/mzxid: zxid of the
    create / last data change; pzxid: zxid of the last child create or delete (the create's zxid
    while childless). ctime/mtime come from the txns (ms), never from a clock. version counts data
    changes, aversion ACL changes. cversion counts child *changes*: ZooKeeper stores the number of
    child creations (which names sequential children, so they never repeat) and reports
    ``2 * creations - num_children`` (a fresh ``/`` with only ``zookeeper`` shows -1).
    ephemeral_owner is the owning session id of an ephemeral znode and 0 otherwise: containers
    and TTL znodes keep a marker in their stored owner (``CONTAINER_OWNER``, ``TTL_OWNER | ttl``)
    but report 0, as ZooKeeper's DataNode.copyStat does.
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



#: An ACL entry: (perms, scheme, id), as ZooKeeper's ``ACL(perms, Id(scheme, id))``.
ACL = tuple[int, str, str]
#: An authenticated identity of a requester: (scheme, id), e.g. ("digest", "bob:..."), ("ip", "10.0.0.7").
AuthId = tuple[str, str]

PERM_READ, PERM_WRITE, PERM_CREATE, PERM_DELETE, PERM_ADMIN, PERM_ALL = 1, 2, 4, 8, 16, 31
OPEN_ACL: tuple[ACL, ...] = ((PERM_ALL, "world", "anyone"),)
READ_ACL: tuple[ACL, ...] = ((PERM_READ, "world", "anyone"),)
CREATOR_ALL_ACL: tuple[ACL, ...] = ((PERM_ALL, "auth", ""),)

# Stored owners of the special znode kinds (ZooKeeper's EphemeralType): a container's owner is
# the sign bit; a TTL znode's is 0xff in the top byte and the TTL (ms, at most 2^40 - 1) below.
# Session ids are below 2^63, so the kinds never collide.
CONTAINER_OWNER = 1 << 63
TTL_OWNER = 0xFF << 56
TTL_MAX = (1 << 40) - 1
SESSION_ID_LIMIT = 1 << 63


class Kind(enum.Enum):
    PERSISTENT = "persistent"
    EPHEMERAL = "ephemeral"
    CONTAINER = "container"
    TTL = "ttl"


def kind_of(owner: int) -> Kind:
    """The znode kind a stored owner encodes."""
    if owner == 0:
        return Kind.PERSISTENT
    if owner == CONTAINER_OWNER:
        return Kind.CONTAINER
    if owner & TTL_OWNER == TTL_OWNER:
        return Kind.TTL
    return Kind.EPHEMERAL


def ttl_of(owner: int) -> int:
    """The TTL (ms) of a TTL znode's stored owner."""
    return owner & TTL_MAX


def valid_owner(owner: int) -> bool:
    """Is ``owner`` 0, a session id, the container marker or a TTL marker with 0 < ttl <= TTL_MAX?"""
    if 0 <= owner < SESSION_ID_LIMIT or owner == CONTAINER_OWNER:
        return True
    return owner & ~TTL_MAX == TTL_OWNER and 0 < ttl_of(owner)


def client_stat(st: Stat) -> Stat:
    """The Stat a client sees for a stored stat (whose cversion counts creations and whose
    ephemeral_owner is the raw owner)."""
    owner = st.ephemeral_owner
    if st.cversion == st.num_children and (owner == 0 or 0 < owner < SESSION_ID_LIMIT):
        return st  # the same numbers (no child ever deleted, no kind marker): Stats are immutable
    # Built field by field: ``dataclasses.replace`` costs twice as much, on every write's reply.
    return Stat(st.czxid, st.mzxid, st.ctime, st.mtime, st.version, 2 * st.cversion - st.num_children,
                st.aversion, owner if 0 < owner < SESSION_ID_LIMIT else 0, st.data_length, st.num_children,
                st.pzxid)


def signed64(v: int) -> int:
    """A u64 (session ids, zxids) as the Java long the wire carries."""
    return v - (1 << 64) if v >= 1 << 63 else v


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
    """A watch fires on (``path``, ``event``). ``acl`` is the ACL of the znode the event is about
    (the parent's for CHILD): ZooKeeper 3.8 tells a watcher only if its connection may READ it.
    Not part of equality: two changes to one path are the same firing whatever the ACL."""

    path: str
    event: EventType
    acl: tuple[ACL, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the request processor needs to know of a znode in the future state.

    ``cversion`` counts child creations, ``ephemeral_owner`` is the stored owner (kind markers
    included)."""

    version: int
    cversion: int
    ephemeral_owner: int
    num_children: int
    aversion: int = 0
    acl: tuple[ACL, ...] = OPEN_ACL
    mtime: int = 0


fast_inits(globals())  # built on every message or write: see zabray.fastinit
