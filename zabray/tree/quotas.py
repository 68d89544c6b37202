"""ZooKeeper's quotas, as its server keeps them: the size of every subtree that has one.

A quota on ``P`` (zkCli's ``setquota``) is the znode ``/zookeeper/quota/P/zookeeper_limits``,
whose data holds the limits. Its sibling ``zookeeper_stats`` holds what ``P``'s subtree uses,
``P`` included: ``count=N,bytes=M`` (znodes and data bytes). ZooKeeper 3.8's server, not the
client, keeps the stats: creating the stats znode sets it to the subtree's size, and each
create, delete and setData below ``P`` adjusts the stats of the deepest quota'd prefix of its
path. The stats znode's data is rewritten in place: no new version, mzxid or watch event, only
its dataLength follows. Every replica does this as it applies a txn, so the stats are part of
the replicated tree and its snapshots.

Limits are not enforced (ZooKeeper's ``zookeeper.enforceQuota`` is off by default), and going
over one is not logged either.
"""

from __future__ import annotations

import re

from zabray.tree.paths import QUOTA

LIMIT_NODE = "zookeeper_limits"
STAT_NODE = "zookeeper_stats"
_PAIRS = re.compile(r"[,;]+")


def _quota_of(path: str, name: str) -> str | None:
    """``P`` if ``path`` is ``/zookeeper/quota/P/<name>`` with ``P`` not empty, else None."""
    if not path.endswith("/" + name) or not path.startswith(QUOTA + "/"):
        return None
    return path[len(QUOTA) : -len(name) - 1] or None


def quota_of_limit_node(path: str) -> str | None:
    return _quota_of(path, LIMIT_NODE)


def quota_of_stat_node(path: str) -> str | None:
    return _quota_of(path, STAT_NODE)


def stat_path(quota: str) -> str:
    return f"{QUOTA}{quota}/{STAT_NODE}"


def parse(data: bytes) -> dict[str, int]:
    """ZooKeeper's ``StatsTrack`` format: ``key=value`` pairs split by ``,`` or ``;``, an empty
    value meaning -1. A pair ZooKeeper could not parse is skipped, not fatal."""
    out: dict[str, int] = {}
    for pair in _PAIRS.split(data.decode("utf-8", "replace")):
        parts = pair.split("=")
        while len(parts) > 1 and parts[-1] == "":  # Java's split drops trailing empty strings
            parts.pop()
        if not parts or not parts[0]:
            continue
        try:
            out[parts[0]] = int(parts[1]) if len(parts) > 1 else -1
        except ValueError:
            continue
    return out


def render(stats: dict[str, int]) -> bytes:
    """``count=N,bytes=M``, then any other keys sorted after ``=;`` (the form 3.4-era parsers read)."""
    text = f"count={stats.get('count', -1)},bytes={stats.get('bytes', -1)}"
    rest = sorted(k for k in stats if k not in ("count", "bytes"))
    if rest:
        text += "=" + "".join(f";{k}={stats[k]}" for k in rest)
    return text.encode()


def adjusted(data: bytes, count: int, nbytes: int) -> bytes:
    """The stats ``data`` after ``count`` more znodes and ``nbytes`` more bytes (either may be < 0)."""
    stats = parse(data)
    stats["count"] = stats.get("count", -1) + count
    stats["bytes"] = stats.get("bytes", -1) + nbytes
    return render(stats)
