"""ZooKeeper's four-letter words on the client port, pure: the text a replica answers.

A connection whose first four bytes are a word (``ruok``, ``srvr``...) gets one plain-text answer
and is closed. Only words in the configured allow-list are answered (ZooKeeper's
``4lw.commands.whitelist``); any other gets ZooKeeper's refusal line. The layouts follow
ZooKeeper 3.8's, so scripts that parse ``srvr``/``mntr`` output keep working.
"""

from __future__ import annotations

from dataclasses import dataclass, field

VERSION = "3.8.0-zabray"
"""What ``srvr``/``mntr`` report as the version: ZooKeeper's protocol level, and who serves it."""

DEFAULT_WORDS = "ruok,srvr,stat,mntr,conf,isro"
"""The words answered unless the config says otherwise (``zk_four_letter_words``)."""

ALL_WORDS = frozenset({"ruok", "srvr", "stat", "mntr", "conf", "cons", "envi", "wchs", "isro", "dump"})


class Latency:
    """Request latencies in whole ms (receipt to reply), as ZooKeeper's ServerStats keeps them
    for ``srvr``'s "Latency min/avg/max" and ``mntr``'s ``zk_*_latency``. The shell measures."""

    __slots__ = ("count", "total", "min", "max")

    def __init__(self) -> None:
        self.count = self.total = self.min = self.max = 0

    def add(self, ms: int) -> None:
        self.min = ms if self.count == 0 else min(self.min, ms)
        self.max = max(self.max, ms)
        self.count += 1
        self.total += ms

    def view(self) -> tuple[int, float, int]:
        """(min, avg, max); all 0 before any request."""
        return self.min, (self.total / self.count if self.count else 0.0), self.max


@dataclass(frozen=True, slots=True)
class AdminView:
    """What a replica tells about itself. ``mode`` is leader/follower/observer, or ``standalone``
    for a single voter, or ``not serving``; ``sessions`` maps a session id to its ephemerals."""

    mode: str
    zxid: int
    znodes: int
    watches: int
    watched_paths: int
    watching_sessions: int
    connections: int
    outstanding: int
    received: int
    sent: int
    latency: tuple[int, float, int] = (0, 0.0, 0)  # min, avg, max ms (``Latency.view``)
    sessions: dict[int, list[str]] = field(default_factory=dict)
    config: dict[str, object] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    clients: list[str] = field(default_factory=list)


def parse_words(spec: str) -> frozenset[str]:
    """The allow-list from the config's comma-separated words; ValueError names an unknown one."""
    words = frozenset(w.strip() for w in spec.split(",") if w.strip())
    unknown = sorted(words - ALL_WORDS - {"*"})
    if unknown:
        raise ValueError(f"unknown four-letter word(s) {', '.join(unknown)} (known: {', '.join(sorted(ALL_WORDS))})")
    return ALL_WORDS if "*" in words else words


def _srvr(v: AdminView) -> list[str]:
    lo, avg, hi = v.latency
    return [f"Zookeeper version: {VERSION}", f"Latency min/avg/max: {lo}/{avg}/{hi}", f"Received: {v.received}",
            f"Sent: {v.sent}", f"Connections: {v.connections}", f"Outstanding: {v.outstanding}",
            f"Zxid: 0x{v.zxid:x}", f"Mode: {v.mode}", f"Node count: {v.znodes}"]


def answer(word: str, allowed: frozenset[str], v: AdminView) -> str:
    """The text ``word`` is answered with."""
    if word not in allowed:
        return f"{word} is not executed because it is not in the whitelist.\n"
    lines: list[str]
    match word:
        case "ruok":
            return "imok"
        case "isro":
            return "rw" if v.mode != "not serving" else "null"
        case "srvr":
            lines = _srvr(v)
        case "stat":
            lines = _srvr(v)
            lines[1:1] = ["Clients:", *(f" {c}" for c in v.clients), ""]
        case "mntr":
            eph = sum(len(p) for p in v.sessions.values())
            lo, avg, hi = v.latency
            rows = [("zk_version", VERSION), ("zk_server_state", v.mode), ("zk_avg_latency", avg),
                    ("zk_max_latency", hi), ("zk_min_latency", lo), ("zk_znode_count", v.znodes),
                    ("zk_watch_count", v.watches), ("zk_ephemerals_count", eph),
                    ("zk_num_alive_connections", v.connections),
                    ("zk_outstanding_requests", v.outstanding), ("zk_packets_received", v.received),
                    ("zk_packets_sent", v.sent), ("zk_global_sessions", len(v.sessions)),
                    ("zk_last_zxid", f"0x{v.zxid:x}")]
            lines = [f"{k}\t{val}" for k, val in rows]
        case "conf":
            lines = [f"{k}={val}" for k, val in sorted(v.config.items())]
        case "envi":
            lines = ["Environment:", *(f"{k}={val}" for k, val in sorted(v.environment.items()))]
        case "cons":
            lines = [f" {c}" for c in v.clients]
        case "wchs":
            lines = [f"{v.watching_sessions} connections watching {v.watched_paths} paths",
                     f"Total watches:{v.watches}"]
        case "dump":
            lines = ["SessionTracker dump:", f"Global Sessions({len(v.sessions)}):",
                     *(f"0x{s:x}" for s in sorted(v.sessions)), "ephemeral nodes dump:",
                     f"Sessions with Ephemerals ({sum(1 for p in v.sessions.values() if p)}):"]
            for s in sorted(v.sessions):
                if v.sessions[s]:
                    lines += [f"0x{s:x}:", *(f"\t{p}" for p in sorted(v.sessions[s]))]
        case _:
            return f"{word} is not executed because it is not in the whitelist.\n"
    return "\n".join(lines) + "\n"


__all__ = ["ALL_WORDS", "DEFAULT_WORDS", "VERSION", "AdminView", "Latency", "answer", "parse_words"]
