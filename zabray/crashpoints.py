"""The named crash points of a replica: what a fault schedule or ``arm_crash`` may name.

A point is named by what the replica is about to do or has just done (``recv:NEWLEADER``,
``send-before:ACK_NEWLEADER``, ``persist-after:current-epoch``). Pure data shared by the driver
(validating schedules and arguments) and the replica shell (``actors.faultpoints``, which fires them).
"""

from __future__ import annotations

from zabray.errors import ConfigError
from zabray.protocol.messages import ALL_MESSAGES

LEARNER_RECEIVES = ("LEADERINFO", "DIFF", "TRUNC", "SNAP", "NEWLEADER", "UPTODATE", "PROPOSAL", "COMMIT",
                    "INFORM", "PING")
LEADER_RECEIVES = ("FOLLOWERINFO", "OBSERVERINFO", "ACKEPOCH", "ACK_NEWLEADER", "ACK", "REQUEST", "PING")
PERSIST_KINDS = {
    "txns": "AppendTxns",
    "truncate": "TruncateLog",
    "accepted-epoch": "WriteAcceptedEpoch",
    "current-epoch": "WriteCurrentEpoch",
    "snapshot": "PersistSnapshot",
    "snap-install": "InstallSnapshot",
}
PERSIST_KIND_OF = {v: k for k, v in PERSIST_KINDS.items()}


def all_points() -> dict[str, str]:
    """Every crash point with a one-line description."""
    names = [m.NAME for m in ALL_MESSAGES]
    out: dict[str, str] = {}
    for n in names:
        out[f"recv:{n}"] = f"on receiving {n}, before the core sees it"
    for n in names:
        out[f"send-before:{n}"] = f"about to send {n} (it never leaves)"
        out[f"send-after:{n}"] = f"right after {n} is written to the socket"
    for kind, action in PERSIST_KINDS.items():
        out[f"persist-before:{kind}"] = f"before a group commit holding {action} is written (it is lost)"
        out[f"persist-after:{kind}"] = f"after {action} is durable, before the core hears it (no ACK leaves)"
    return out


def check_point(point: str) -> str:
    base = point.split("@", 1)[0]
    if base not in all_points():
        raise ConfigError(f"unknown crash point {point!r}; `zabray faults points` lists them")
    if "@" in point and point.split("@", 1)[1] not in ("discovery", "synchronization", "broadcast", "election"):
        raise ConfigError(f"crash point phase must be discovery, synchronization, broadcast or election: {point!r}")
    return point
