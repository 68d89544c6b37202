"""Who is in the ensemble: a configuration (``Membership``) and a request to change it.

A configuration lists every member with its role (participant, i.e. voter, or observer) and its
addresses as ZooKeeper writes them (``server.N=host:quorum:election:role;clienthost:clientport``),
and carries a version: the zxid of the reconfiguration txn that made it (0 for the static
configuration a replica is started with, which no txn made). It is part of the replicated state:
``Txn.config`` carries the next one, and a replica activates it when it delivers that txn.

``ConfigChange`` is a reconfiguration request in ZooKeeper's two forms, incremental (``joining``
server specs, ``leaving`` sids) and bulk (``members``), with ZooKeeper's ``from_config`` version
check. ``next_membership`` computes the configuration it asks for from the current one, or
raises ``ReconfigError`` with ZooKeeper's error name (``BAD_ARGUMENTS``), as ZooKeeper 3.8's
``PrepRequestProcessor`` judges it. Pure: no sockets, no name resolution (addresses are compared
as written).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import msgpack

from zabray.errors import CodecError, ReconfigError

PARTICIPANT = "participant"
OBSERVER = "observer"


__all__ = ["OBSERVER", "PARTICIPANT", "ConfigChange", "Member", "Membership", "ReconfigError", "next_membership"]


def _bad(message: str) -> ReconfigError:
    return ReconfigError("BAD_ARGUMENTS", message)


def _host_port(s: str) -> list[str]:
    """ZooKeeper's ``ConfigUtils.getHostAndPort``: split on ':' outside an IPv6 ``[...]`` host."""
    s = s.strip()
    if s.startswith("["):
        end = s.find("]")
        if end < 0:
            raise _bad(f"{s}: an IPv6 address starts with '[' but has no ']'")
        host = s[: end + 1]
        rest = s[end + 1 :]
        if rest and not rest.startswith(":"):
            raise _bad(f"{s}: expected ':' after the IPv6 address")
        return [host, *rest[1:].split(":")] if rest else [host]
    return s.split(":")


def _port(s: str, what: str) -> int:
    try:
        p = int(s)
    except ValueError:
        raise _bad(f"{what}: {s!r} is not a port number") from None
    if not 0 <= p <= 65535:
        raise _bad(f"{what}: port {p} is out of range")
    return p


@dataclass(frozen=True, slots=True)
class Member:
    """One member. ``host``/``quorum_port``/``election_port`` and ``client_host``/``client_port``
    as ZooKeeper's ``QuorumServer`` holds them; ``host`` is empty when the addresses are not
    known (a configuration built from bare sids: the simulator's, a static one)."""

    sid: int
    role: str = PARTICIPANT
    host: str = ""
    quorum_port: int = 0
    election_port: int = 0
    client_host: str = ""
    client_port: int = -1  # -1: no client port given

    @property
    def voter(self) -> bool:
        return self.role == PARTICIPANT

    def spec(self) -> str:
        """The right-hand side of its ``server.N=`` line, as ZooKeeper 3.8 prints it."""
        out = f"{self.host}:{self.quorum_port}:{self.election_port}:{self.role}" if self.host else self.role
        if self.client_port >= 0:
            out += f";{self.client_host}:{self.client_port}"
        return out

    def line(self) -> str:
        return f"server.{self.sid}={self.spec()}"

    def addresses(self) -> set[tuple[str, int]]:
        return {(self.host, self.quorum_port), (self.host, self.election_port)} if self.host else set()

    @staticmethod
    def parse(sid: int, spec: str) -> Member:
        """``host:quorum:election[:role][;[clienthost:]clientport]`` (ZooKeeper's server spec);
        ``BAD_ARGUMENTS`` naming what is wrong otherwise."""
        parts = spec.strip().split(";")
        if len(parts) > 2 and any(p.strip() for p in parts[2:]):
            raise _bad(f"server.{sid}: a secure client port ({';'.join(parts[2:])}) is not served by zabray")
        server = parts[0].strip()
        if "|" in server:
            raise _bad(f"server.{sid}: several addresses ({server}) are not supported (ZooKeeper's "
                       "multiAddress.enabled is off by default)")
        sp = _host_port(server)
        if not 3 <= len(sp) <= 4 or not sp[0]:
            raise _bad(f"server.{sid}={spec}: expected host:port:port or host:port:port:type")
        quorum = _port(sp[1], f"server.{sid} quorum port")
        election = _port(sp[2], f"server.{sid} election port")
        if quorum == election:
            raise _bad(f"server.{sid}: the quorum and election ports must differ (both {quorum})")
        role = PARTICIPANT
        if len(sp) == 4:
            r = sp[3].strip().lower()
            if r not in (PARTICIPANT, OBSERVER):
                raise _bad(f"server.{sid}: unrecognised peer type {sp[3]!r} (participant or observer)")
            role = r
        client_host, client_port = "", -1
        if len(parts) >= 2 and parts[1].strip():
            cp = _host_port(parts[1])
            if len(cp) > 2:
                raise _bad(f"server.{sid}: client address {parts[1]!r} is not [host:]port")
            client_host = cp[0] if len(cp) == 2 else "0.0.0.0"
            client_port = _port(cp[-1], f"server.{sid} client port")
        return Member(sid, role, sp[0], quorum, election, client_host, client_port)


def _sid_of_key(key: str) -> int:
    """``server.N`` (or the shorthand ``N``) -> N."""
    k = key.strip()
    num = k[k.rfind(".") + 1 :] if "." in k else k
    try:
        sid = int(num)
    except ValueError:
        raise _bad(f"{key!r} does not name a server (server.N)") from None
    if sid < 0:
        raise _bad(f"{key!r}: a server id is not negative")
    return sid


@dataclass(frozen=True, slots=True)
class Membership:
    """A configuration: its members (by sid) and its version (the zxid that committed it)."""

    members: tuple[Member, ...]
    version: int = 0
    voters: frozenset[int] = field(init=False, compare=False)
    observers: frozenset[int] = field(init=False, compare=False)
    sids: frozenset[int] = field(init=False, compare=False)
    quorum: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        ms = tuple(sorted(self.members, key=lambda m: m.sid))
        if len({m.sid for m in ms}) != len(ms):
            raise ValueError(f"a server is listed twice in {[m.sid for m in ms]}")
        object.__setattr__(self, "members", ms)
        object.__setattr__(self, "voters", frozenset(m.sid for m in ms if m.voter))
        object.__setattr__(self, "observers", frozenset(m.sid for m in ms if not m.voter))
        object.__setattr__(self, "sids", frozenset(m.sid for m in ms))
        object.__setattr__(self, "quorum", len(self.voters) // 2 + 1)

    @staticmethod
    def of(voters: Iterable[int], observers: Iterable[int] = (), version: int = 0,
           addresses: Mapping[int, str] | None = None) -> Membership:
        """From bare sids; ``addresses`` (sid -> ``host:quorum:election[;client]``) fills in
        where each listens, when known."""
        ms = []
        for sid, role in [*((v, PARTICIPANT) for v in voters), *((o, OBSERVER) for o in observers)]:
            spec = (addresses or {}).get(sid)
            if spec:
                server, _, client = spec.partition(";")
                m = Member.parse(sid, f"{server}:{role};{client}" if client else f"{server}:{role}")
            else:
                m = Member(sid, role)
            ms.append(m)
        return Membership(tuple(ms), version)

    def member(self, sid: int) -> Member | None:
        for m in self.members:
            if m.sid == sid:
                return m
        return None

    def is_quorum(self, sids: Iterable[int]) -> bool:
        return len(self.voters.intersection(sids)) >= self.quorum

    def role_of(self, sid: int) -> str | None:
        m = self.member(sid)
        return None if m is None else m.role

    def same_members(self, other: Membership) -> bool:
        return self.members == other.members

    def with_version(self, version: int) -> Membership:
        return Membership(self.members, version)

    # -- ZooKeeper's text form ------------------------------------------------------------------

    def text(self) -> str:
        """``/zookeeper/config``'s data as ZooKeeper writes it: one ``server.N=`` line per member
        by sid, then ``version=<hex>``."""
        return "".join(m.line() + "\n" for m in self.members) + f"version={self.version:x}"

    def body(self) -> str:
        """The member lines only (what a txn carries: its version is its zxid)."""
        return "\n".join(m.line() for m in self.members)

    @staticmethod
    def parse(text: str, version: int | None = None) -> Membership:
        """The inverse of ``text``/``body``; ``version`` overrides a ``version=`` line.
        ``CodecError`` on anything else (it comes from a log or a peer, not a user)."""
        ms = []
        v = 0
        try:
            for raw in text.splitlines():
                line = raw.strip()
                if not line:
                    continue
                key, sep, value = line.partition("=")
                if not sep:
                    raise CodecError(f"configuration line {line!r:.60} has no '='")
                if key.strip() == "version":
                    v = int(value.strip(), 16)
                else:
                    ms.append(_member_from_line(key, value))
            return Membership(tuple(ms), v if version is None else version)
        except (ReconfigError, ValueError) as e:
            raise CodecError(f"bad configuration: {e}") from None


def _member_from_line(key: str, value: str) -> Member:
    sid = _sid_of_key(key)
    v = value.strip()
    if v in (PARTICIPANT, OBSERVER):  # a member whose addresses are not known
        return Member(sid, v)
    if v.startswith(PARTICIPANT + ";") or v.startswith(OBSERVER + ";"):
        role, _, client = v.partition(";")
        m = Member.parse(sid, f"h:1:2;{client}")
        return Member(sid, role, client_host=m.client_host, client_port=m.client_port)
    return Member.parse(sid, v)


# -- reconfiguration requests ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """A reconfig request as ZooKeeper's ``ReconfigRequest`` carries it: comma-separated
    ``joining`` server specs (``server.N=spec`` or ``N=spec``) and ``leaving`` sids, or a
    ``members`` list (comma- or newline-separated ``server.N=spec``) replacing everyone, and
    ``from_version`` (-1: any) the current configuration must have."""

    joining: str | None = None
    leaving: str | None = None
    members: str | None = None
    from_version: int = -1

    def encode(self) -> bytes:
        return msgpack.packb(["reconfig", self.joining, self.leaving, self.members, self.from_version])

    @staticmethod
    def decode(data: bytes) -> ConfigChange:
        try:
            tag, joining, leaving, members, from_version = msgpack.unpackb(data)
        except Exception as e:  # msgpack raises several unrelated types on garbage
            raise CodecError(f"not a reconfig request: {e}") from None
        if tag != "reconfig" or type(from_version) is not int or not all(
                x is None or type(x) is str for x in (joining, leaving, members)):
            raise CodecError("not a reconfig request")
        return ConfigChange(joining, leaving, members, from_version)


def next_membership(current: Membership, change: ConfigChange) -> Membership:
    """The configuration ``change`` asks for, made from ``current`` (its version left 0: the
    txn's zxid becomes it). ``ReconfigError("BAD_ARGUMENTS")`` when the request is malformed or
    the result is not a valid configuration: no voter at all, or observers without voters."""
    if change.members is not None:
        new = _bulk(change.members)
    else:
        new = _incremental(current, change.joining, change.leaving)
    if not new.voters:
        raise _bad("Reconfig failed - new configuration must include at least 1 follower")
    return new


def _bulk(text: str) -> Membership:
    ms: dict[int, Member] = {}
    for raw in text.replace(",", "\n").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep:
            raise _bad(f"{line!r}: expected server.N=spec")
        if key == "version":
            continue  # the txn's zxid is the new version, whatever is written here
        if key.startswith("group") or key.startswith("weight"):
            raise _bad(f"{key}: hierarchical quorums are not supported by zabray (majorities only)")
        if not key.startswith("server."):
            raise _bad(f"Unrecognised parameter: {key}")
        sid = _sid_of_key(key)
        ms[sid] = Member.parse(sid, value)
    return Membership(tuple(ms.values()))


def _incremental(current: Membership, joining: str | None, leaving: str | None) -> Membership:
    nxt = {m.sid: m for m in current.members}
    for item in (leaving or "").split(","):
        if item.strip():
            try:
                nxt.pop(int(item.strip()), None)
            except ValueError:
                raise _bad(f"leaving: {item.strip()!r} is not a server id") from None
    for item in (joining or "").split(","):
        if not item.strip():
            continue
        parts = item.split("=")
        if len(parts) != 2:
            raise _bad("Wrong format of server string")
        sid = _sid_of_key(parts[0])
        m = Member.parse(sid, parts[1])
        if m.client_port < 0:
            raise _bad("Wrong format of server string - each server should have at least 3 ports specified")
        for other in nxt.values():
            if other.sid != sid and m.addresses() & other.addresses():
                raise _bad("Reconfiguration failed")
        nxt[sid] = m
    return Membership(tuple(nxt.values()))
