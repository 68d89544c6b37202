"""The controller's memory of its ensemble, on its own disk, so that a controller Ray restarts
(its process died; it is a detached actor with ``max_restarts=-1``) finds the replicas again.

The replicas are detached actors too: losing the controller takes none of them with it (an
owned actor dies with its owner), and they go on serving clients meanwhile. The file is in the
run directory, on the controller's node, where Ray restarts it (it is pinned to that node).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
FILE = "controller.json"


def save(run_dir: str, state: dict[str, Any]) -> None:
    """Write ``state`` atomically (a crash mid-write leaves the previous one)."""
    path = Path(run_dir) / FILE
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(state, default=list))
        os.replace(tmp, path)
    except OSError as e:  # a full disk must not stop the controller: it only loses this memory
        log.warning("cannot save the controller's state to %s: %s", path, e)


def load(run_dir: str) -> dict[str, Any] | None:
    path = Path(run_dir) / FILE
    try:
        return dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("cannot read the controller's state from %s: %s", path, e)
        return None


def state_of(c: Any) -> dict[str, Any]:
    """What a restarted controller needs of controller ``c`` (``EnsembleController``)."""
    return {"info": {str(s): i for s, i in c.info.items()}, "node_of": {str(s): n for s, n in c.node_of.items()},
            "home": {str(s): h for s, h in c.home.items()}, "paused": sorted(c.paused), "wiped": sorted(c.wiped),
            "lost": {str(s): t for s, t in c.lost.items()}, "groups": c.groups,
            "started": c._watch is not None or bool(c.info),
            # The membership as reconfigurations left it (the constructor's is the first one).
            "voters": c.voters, "observers": c.observers, "joining": sorted(c.joining),
            "departed": sorted(c.departed), "retiring": sorted(c.retiring), "config_version": c.config_version}


def adopt(c: Any, state: dict[str, Any], get_actor: Any) -> list[int]:
    """Fill controller ``c`` from ``state`` and find its replicas' actors by name (``get_actor``
    raises ``ValueError`` for a name Ray does not know: that replica is down). Returns the sids
    found running."""
    c.info = {int(s): i for s, i in state.get("info", {}).items()}
    c.node_of = {int(s): n for s, n in state.get("node_of", {}).items()}
    c.home = {int(s): h for s, h in state.get("home", {}).items()}
    c.paused = {int(s) for s in state.get("paused", [])}
    c.wiped = {int(s) for s in state.get("wiped", [])}
    c.lost = {int(s): float(t) for s, t in state.get("lost", {}).items()}
    c.groups = state.get("groups")
    if "voters" in state:
        c.voters, c.observers = list(state["voters"]), list(state["observers"])
        c.joining, c.departed = set(state["joining"]), set(state["departed"])
        c.retiring, c.config_version = set(state["retiring"]), int(state["config_version"])
        c.members = c.voters + c.observers + sorted(c.joining)
    found = []
    for sid, info in c.info.items():
        try:
            c.handles[sid] = get_actor(f"{c.name}:replica-{sid}:{info.get('incarnation', 0)}")
            found.append(sid)
        except ValueError:
            c.paused.discard(sid)
    return found
