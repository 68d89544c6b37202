"""ZooKeeper's four-letter words on the client port, pure: the text a replica answers.

A connection whose first four bytes are a word (``ruok``, ``srvr``...) gets one plain-text answer
and is closed. Only words in the configured allow-list are answered (ZooKeeper's
``4lw.commands.whitelist``; ``srvr`` always, ``isro`` whenever read-only mode is on, as
ZooKeeper adds them); any other known word gets ZooKeeper's refusal line. Each answer has
ZooKeeper 3.8's lines, names and order (checked against Debian's 3.8.0 in
``tests/zkcompat/test_four_letter_oracle.py``), so scripts that parse them, and kazoo's
``server_version()`` (the ``zookeeper.version=`` line of ``envi``), keep working. Where a
ZooKeeper line names a JVM fact (``java.*`` in ``envi``) zabray answers ``<NA>``, ZooKeeper's
own word for a property it cannot read, and adds its Python facts after ZooKeeper's lines.

Not served: ``gtmk``/``stmk`` (ZooKeeper's ZooTrace mask; zabray has no such switch), ``hash``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

ZK_VERSION = "3.8.0"
"""The ZooKeeper release whose protocol and answers zabray follows."""
VERSION = f"{ZK_VERSION}-zabray"
"""What ``srvr``, ``mntr`` and ``envi`` report as the version: ZooKeeper's, and who serves it
(kazoo's ``server_version()`` reads the digits before the first '-')."""

DEFAULT_WORDS = "ruok,srvr,stat,mntr,conf,isro"
"""The words answered unless the config says otherwise (``zk_four_letter_words``)."""

ALL_WORDS = frozenset({"ruok", "srvr", "stat", "mntr", "conf", "cons", "crst", "envi", "wchs", "wchc", "wchp",
                       "isro", "dump", "dirs", "srst"})
RESETS = frozenset({"srst", "crst"})
"""Words that reset counters (the shell does it, after answering): server stats, connection stats."""
NOT_SERVING = "This ZooKeeper instance is not currently serving requests"
"""ZooKeeper's answer to most words while it has no quorum behind it."""


class Latency:
    """Request latencies in whole ms (receipt to reply), as ZooKeeper's ServerStats keeps them
    for ``srvr``'s "Latency min/avg/max" and ``mntr``'s ``zk_*_latency``. The shell measures."""

    __slots__ = ("count", "total", "min", "max", "last")

    def __init__(self) -> None:
        self.count = self.total = self.min = self.max = self.last = 0

    def add(self, ms: int) -> None:
        self.min = ms if self.count == 0 else min(self.min, ms)
        self.max = max(self.max, ms)
        self.count += 1
        self.total += ms
        self.last = ms

    def view(self) -> tuple[int, float, int]:
        """(min, avg, max); all 0 before any request."""
        return self.min, (self.total / self.count if self.count else 0.0), self.max


@dataclass(frozen=True, slots=True)
class ConnInfo:
    """One client connection as ``stat``/``cons`` show it. ``interest`` is 1 while the server
    reads it (0 for a four-letter word's own connection); ``session`` 0 before a session."""

    address: str  # "/127.0.0.1:52000"
    interest: int = 1
    queued: int = 0
    received: int = 0
    sent: int = 0
    session: int = 0
    last_op: str = "NA"
    established_ms: int = 0
    timeout_ms: int = 0
    last_cxid: int = -1
    last_zxid: int = -1
    last_response_ms: int = 0
    latency: tuple[int, int, int, int] = (0, 0, 0, 0)  # last, min, avg, max


@dataclass(frozen=True, slots=True)
class AdminView:
    """What a replica tells about itself. ``mode`` is leader/follower/observer, ``standalone``
    for a single voter, ``read-only`` (read-only mode, cut off from its quorum) or ``not
    serving``; ``sessions`` maps a session id to its ephemerals."""

    mode: str
    zxid: int
    znodes: int
    watches: int  # data and child watches, as mntr's zk_watch_count counts them
    connections: int = 0
    outstanding: int = 0
    received: int = 0
    sent: int = 0
    latency: tuple[int, float, int] = (0, 0.0, 0)  # min, avg, max ms (``Latency.view``)
    sessions: dict[int, list[str]] = field(default_factory=dict)
    config: list[tuple[str, str | None]] = field(default_factory=list)
    """``conf``'s lines as (key, value), in order; a value of None prints the key alone."""
    environment: list[tuple[str, str]] = field(default_factory=list)
    clients: list[ConnInfo] = field(default_factory=list)
    data_watches: dict[int, list[str]] = field(default_factory=dict)
    """Session -> paths of its data watches: ``wchs``/``wchc``/``wchp`` show only these, as
    ZooKeeper's DataTree.dumpWatches does."""
    session_timeouts: dict[int, int] = field(default_factory=dict)
    expiry: dict[int, int] | None = None
    """Leader only: session -> deadline, wall-clock ms (``dump``'s expiry sets)."""
    tick_ms: int = 2000
    peer_state: str = ""  # "leading - broadcast"
    quorum_size: int = 0
    learners: int = 0
    synced_followers: int = 0
    synced_observers: int = 0
    proposal_sizes: tuple[int, int, int] | None = None  # leader: last/min/max, -1 before any
    approximate_data_size: int = 0
    uptime_ms: int = 0
    open_fds: int = -1
    max_fds: int = -1
    auth_failed: int = 0
    dirs: tuple[int, int] = (0, 0)  # bytes of snapshots (dataDir) and of the log (dataLogDir)


def parse_words(spec: str) -> frozenset[str]:
    """The allow-list from the config's comma-separated words; ValueError names an unknown one."""
    words = frozenset(w.strip() for w in spec.split(",") if w.strip())
    unknown = sorted(words - ALL_WORDS - {"*"})
    if unknown:
        raise ValueError(f"unknown four-letter word(s) {', '.join(unknown)} (known: {', '.join(sorted(ALL_WORDS))})")
    return ALL_WORDS if "*" in words else words


def allowed_words(spec: str, read_only: bool) -> frozenset[str]:
    """What a replica answers: the configured words, ``srvr`` always and ``isro`` with read-only
    mode on (ZooKeeper's FourLetterCommands.isEnabled adds both whatever the whitelist says)."""
    return parse_words(spec) | {"srvr"} | ({"isro"} if read_only else set())


def _avg(x: float) -> str:
    """A double as Java prints one, rounded to 4 places as ZooKeeper's AvgMinMaxCounter does."""
    r = round(x, 4)
    return repr(float(r))


def _serving(v: AdminView) -> bool:
    return v.mode != "not serving"


def _srvr(v: AdminView, clients: bool) -> list[str]:
    lo, avg, hi = v.latency
    out = [f"Zookeeper version: {VERSION}"]
    if v.mode == "read-only":
        out.append("READ-ONLY mode; serving only read-only clients")
    if clients:
        out += ["Clients:", *(_conn(c, brief=True) for c in v.clients), ""]
    out += [f"Latency min/avg/max: {lo}/{_avg(avg)}/{hi}", f"Received: {v.received}", f"Sent: {v.sent}",
            f"Connections: {v.connections}", f"Outstanding: {v.outstanding}", f"Zxid: 0x{v.zxid:x}",
            f"Mode: {v.mode}", f"Node count: {v.znodes}"]
    if v.proposal_sizes is not None:
        last, lo_p, hi_p = v.proposal_sizes
        out.append(f"Proposal sizes last/min/max: {last}/{lo_p}/{hi_p}")
    return out


def _conn(c: ConnInfo, brief: bool) -> str:
    s = f" {c.address}[{c.interest:x}](queued={c.queued},recved={c.received},sent={c.sent}"
    if not brief and c.session:
        last, lo, avg, hi = c.latency
        s += f",sid=0x{c.session:x},lop={c.last_op},est={c.established_ms},to={c.timeout_ms}"
        if c.last_cxid >= 0:
            s += f",lcxid=0x{c.last_cxid:x}"
        s += f",lzxid=0x{c.last_zxid & 0xFFFFFFFFFFFFFFFF:x},lresp={c.last_response_ms},llat={last},minlat={lo}"
        s += f",avglat={avg},maxlat={hi}"
    return s + ")"


def _java_date(ms: int) -> str:
    """``java.util.Date.toString()``: 'Sat Nov 28 04:19:26 UTC 2026' (local time, as the JVM prints)."""
    return time.strftime("%a %b %d %H:%M:%S %Z %Y", time.localtime(ms / 1000))


def _mntr(v: AdminView) -> list[str]:
    lo, avg, hi = v.latency
    rows: list[tuple[str, object]] = [
        ("version", VERSION), ("server_state", v.mode), ("peer_state", v.peer_state),
        ("ephemerals_count", sum(len(p) for p in v.sessions.values())),
        ("num_alive_connections", v.connections), ("avg_latency", _avg(avg)),
        ("outstanding_requests", v.outstanding), ("znode_count", v.znodes),
        ("global_sessions", len(v.sessions)), ("local_sessions", 0),
        ("packets_sent", v.sent), ("packets_received", v.received), ("watch_count", v.watches),
        ("auth_failed_count", v.auth_failed), ("min_latency", lo), ("max_latency", hi),
        ("max_file_descriptor_count", v.max_fds), ("open_file_descriptor_count", v.open_fds),
        ("approximate_data_size", v.approximate_data_size), ("uptime", v.uptime_ms), ("quorum_size", v.quorum_size),
    ]
    if v.mode == "leader":
        last, lo_p, hi_p = v.proposal_sizes or (-1, -1, -1)
        rows += [("learners", v.learners), ("synced_followers", v.synced_followers),
                 ("synced_non_voting_followers", 0), ("synced_observers", v.synced_observers),
                 ("pending_syncs", 0), ("last_proposal_size", last), ("min_proposal_size", lo_p),
                 ("max_proposal_size", hi_p)]
    return [f"zk_{k}\t{val}" for k, val in rows]


def _dump(v: AdminView) -> list[str]:
    out = ["SessionTracker dump:"]
    if v.expiry is not None:
        # The leader's expiry queue: sessions grouped by deadline, rounded up to a tick.
        tick = max(1, v.tick_ms)
        sets: dict[int, list[int]] = {}
        for s, deadline in v.expiry.items():
            sets.setdefault(-(-deadline // tick) * tick, []).append(s)
        out.append(f"Session Sets ({len(sets)})/({len(v.expiry)}):")
        for t in sorted(sets):
            out.append(f"{len(sets[t])} expire at {_java_date(t)}:")
            out += [f"\t0x{s:x}" for s in sorted(sets[t])]
    else:
        out.append(f"Global Sessions({len(v.sessions)}):")
        out += [f"0x{s:x}\t{v.session_timeouts.get(s, 0)}ms" for s in sorted(v.sessions)]
    with_eph = {s: p for s, p in v.sessions.items() if p}
    out += ["ephemeral nodes dump:", f"Sessions with Ephemerals ({len(with_eph)}):"]
    for s in sorted(with_eph):
        out += [f"0x{s:x}:", *(f"\t{p}" for p in sorted(with_eph[s]))]
    out.append("Connections dump:")
    return out


def answer(word: str, allowed: frozenset[str], v: AdminView) -> str:
    """The text ``word`` is answered with."""
    if word not in allowed or word not in ALL_WORDS:
        return f"{word} is not executed because it is not in the whitelist.\n"
    match word:
        case "ruok":
            return "imok"
        case "isro":
            return "null" if not _serving(v) else "ro" if v.mode == "read-only" else "rw"
        case "envi":
            return "\n".join(["Environment:", *(f"{k}={val}" for k, val in v.environment)]) + "\n"
        case "srst":
            return "Server stats reset.\n"
        case "crst":
            return "Connection stats reset.\n"
    if not _serving(v):
        return NOT_SERVING + "\n"
    lines: list[str]
    match word:
        case "srvr" | "stat":
            lines = _srvr(v, clients=word == "stat")
        case "mntr":
            lines = _mntr(v)
        case "conf":
            lines = [k if val is None else f"{k}={val}" for k, val in v.config]
            return "\n".join(lines)  # (ZooKeeper's last line, version=, has no newline)
        case "cons":
            lines = [*(_conn(c, brief=False) for c in v.clients), ""]
        case "wchs":
            paths = {p for ps in v.data_watches.values() for p in ps}
            lines = [f"{sum(1 for ps in v.data_watches.values() if ps)} connections watching {len(paths)} paths",
                     f"Total watches:{sum(len(ps) for ps in v.data_watches.values())}"]
        case "wchc":
            lines = []
            for s in sorted(v.data_watches):
                if v.data_watches[s]:
                    lines += [f"0x{s:x}", *(f"\t{p}" for p in sorted(v.data_watches[s]))]
            lines.append("")
        case "wchp":
            by_path: dict[str, list[int]] = {}
            for s, ps in v.data_watches.items():
                for p in ps:
                    by_path.setdefault(p, []).append(s)
            lines = []
            for p in sorted(by_path):
                lines += [p, *(f"\t0x{s:x}" for s in sorted(by_path[p]))]
            lines.append("")
        case "dump":
            lines = _dump(v)
        case "dirs":
            lines = [f"datadir_size: {v.dirs[0]}", f"logdir_size: {v.dirs[1]}"]
        case _:
            return f"{word} is not executed because it is not in the whitelist.\n"
    return "\n".join(lines) + "\n"


__all__ = ["ALL_WORDS", "DEFAULT_WORDS", "NOT_SERVING", "RESETS", "VERSION", "ZK_VERSION", "AdminView", "ConnInfo",
           "Latency", "allowed_words", "answer", "parse_words"]
