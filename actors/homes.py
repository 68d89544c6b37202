"""Where a replica lives: its home host, named so that it survives its Ray node.

A Ray node id names one run of a node: a host cut off long enough for Ray to declare its node
dead, or a host that crashed and came back, returns as a new node with a new id, same address,
same disk. A replica's home is therefore named by the host: the ``zabray.io/host`` node label
when the node has one (``ray start --labels``; the lab gives every host one), else its IP if no
other node shares it, else (several nodes on one address, as ``ray.cluster_utils.Cluster`` makes
them) only that node's id. Pure: it works on the node rows ``ray.nodes()`` returns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

HOST_LABEL = "zabray.io/host"

Node = Mapping[str, Any]


def _label(node: Node) -> str | None:
    labels = node.get("Labels") or {}
    value = labels.get(HOST_LABEL) if isinstance(labels, Mapping) else None
    return str(value) if value else None


def _ip(node: Node) -> str:
    return str(node.get("NodeManagerAddress") or "")


def home_of(node: Node, nodes: Sequence[Node]) -> str:
    """The home key of a replica placed on ``node``, given every node known now."""
    label = _label(node)
    if label:
        return f"label:{label}"
    ip = _ip(node)
    sharing = [n for n in nodes if n.get("Alive") and _ip(n) == ip and n.get("NodeID") != node.get("NodeID")]
    if ip and not sharing:
        return f"ip:{ip}"
    return f"node:{node['NodeID']}"


def node_for(home: str, nodes: Sequence[Node]) -> str | None:
    """The id of the live node that is ``home`` now (the newest registered if Ray lists
    several: an old run of the host may linger as alive until its health checks fail), or None."""
    kind, _, value = home.partition(":")
    live = [n for n in nodes if n.get("Alive")]
    if kind == "label":
        match = [n for n in live if _label(n) == value]
    elif kind == "ip":
        match = [n for n in live if _ip(n) == value]
    elif kind == "node":
        match = [n for n in live if n.get("NodeID") == value]
    else:
        return None
    if not match:
        return None
    return str(max(match, key=lambda n: float(n.get("StartTime", 0) or 0))["NodeID"])


def describe(home: str) -> str:
    """For people: ``host h2``, ``host 10.0.0.5``, ``node 1a2b3c4d``."""
    kind, _, value = home.partition(":")
    return f"node {value[:8]}" if kind == "node" else f"host {value}"


def _natural(text: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def placement(members: Sequence[int], nodes: Sequence[Node]) -> dict[int, str]:
    """Members to live nodes, round robin in the order of their homes (``h1``, ``h2``, ...,
    ``h10``; addresses by value), so that replica 1 goes to the first host: node ids."""
    live = [n for n in nodes if n.get("Alive")]
    if not live:
        return {}
    order = sorted(live, key=lambda n: _natural(home_of(n, nodes)))
    return {sid: str(order[i % len(order)]["NodeID"]) for i, sid in enumerate(members)}


def rebuild_target(sid: int, homes: Mapping[int, str], nodes: Sequence[Node]) -> str | None:
    """A live node to rebuild ``sid`` on when its home is gone for good: one that is home to
    no other member if there is one (spreading the replicas), else any live node; None if none."""
    live = [n for n in nodes if n.get("Alive")]
    taken = {node_for(h, nodes) for s, h in homes.items() if s != sid}
    free = [n for n in live if n["NodeID"] not in taken]
    pool = sorted(free or live, key=lambda n: _natural(home_of(n, nodes)))
    return str(pool[0]["NodeID"]) if pool else None
