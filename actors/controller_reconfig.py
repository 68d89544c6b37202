"""The controller's membership operations: add a replica, remove one, reconfigure in bulk.

Every one is a reconfiguration txn the ensemble itself judges and commits (``zabray.protocol``):
the controller only places and starts replicas, asks the leader, and stops the replicas a
committed configuration removed. Adding a replica places it on a Ray node as ``start`` places
replicas (the node with the fewest), starts it outside the configuration (``joining``: it learns
the leader from the members and is synced, DIFF, TRUNC or SNAP, as a follower without a vote),
and asks for the reconfiguration only once the leader reports it synced, so a new voter never
counts before it holds the history. A removed replica leaves the ensemble by itself when it
delivers (or learns) the configuration without it; the controller stops its process only once
every running member of the new configuration has that configuration in force, since until
then one that missed the commit may still need to hear it from the removed one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

import ray

from actors import homes
from actors.ray_errors import innermost
from actors.status import ReplicaReport, ReplicaStatus
from zabray.errors import ConfigError, NoQuorumError, NotRunningError, ReconfigError, RequestTimeoutError
from zabray.protocol.membership import OBSERVER, PARTICIPANT, ConfigChange, Membership

if TYPE_CHECKING:
    from actors.controller import EnsembleController

log = logging.getLogger(__name__)


# -- what the configuration says ------------------------------------------------------------


def spec(ctl: EnsembleController, sid: int, role: str) -> str:
    """``server.N=host:quorum:election:role;clienthost:clientport`` for a running replica,
    its client port the ZooKeeper port (the bespoke one for a broadcast ensemble)."""
    info = ctl.info[sid]
    host, quorum = info["quorum"]
    election = info["election"][1]
    client = info.get("zk_client") or info["client"]
    return f"server.{sid}={host}:{quorum}:{election}:{role};{client[0]}:{client[1]}"


def servers(ctl: EnsembleController) -> dict[int, str]:
    """Where each known replica listens, for a replica's static configuration."""
    out = {}
    for sid, info in ctl.info.items():
        if info.get("election"):
            s = spec(ctl, sid, PARTICIPANT).partition("=")[2]
            server, _, client = s.partition(";")
            out[sid] = f"{server.rsplit(':', 1)[0]};{client}"
    return out


def _adopt(ctl: EnsembleController, text: str) -> Membership:
    """Take the committed configuration ``text`` as the controller's view of the members."""
    config = Membership.parse(text)
    ctl.voters = sorted(config.voters)
    ctl.observers = sorted(config.observers)
    ctl.joining -= config.sids
    ctl.members = ctl.voters + ctl.observers + sorted(ctl.joining)
    ctl.config_version = config.version
    ctl._save()  # a controller Ray restarts adopts this membership, not the one it started with
    return config

# -- asking the ensemble --------------------------------------------------------------------


async def _leader(ctl: EnsembleController, deadline: float) -> tuple[int, ReplicaReport]:
    while True:
        for st in await ctl.status():
            if st.established_leader and st.report is not None:
                return st.sid, st.report
        if time.monotonic() > deadline:
            raise NoQuorumError(f"ensemble {ctl.name!r} has no established leader")
        await asyncio.sleep(0.05)


async def reconfig(ctl: EnsembleController, joining: str | None = None, leaving: str | None = None,
                   members: str | None = None, from_version: int = -1, timeout: float = 60.0) -> dict[str, Any]:
    """One reconfiguration, as ZooKeeper's reconfig: at the leader, as the superuser;
    retried while there is no leader to take it. Returns {"zxid", "version", "config"}; a
    refusal raises ``ReconfigError``. Replicas it removes are then stopped (see the module)."""
    if not ctl.cfg.reconfig_enabled:
        raise ReconfigError("RECONFIG_DISABLED", f"ensemble {ctl.name!r} runs with reconfig_enabled off")
    change = ConfigChange(joining, leaving, members, from_version)
    deadline = time.monotonic() + timeout
    before = set(ctl.voters) | set(ctl.observers)
    while True:
        leader, _ = await _leader(ctl, deadline)
        try:
            got = await ctl.handles[leader].reconfigure.remote(
                {"joining": joining, "leaving": leaving, "members": members, "from_version": from_version},
                max(1.0, deadline - time.monotonic()))
            break
        except Exception as e:  # a RayTaskError around the replica's typed error
            err = innermost(e)
            if isinstance(err, (NoQuorumError, NotRunningError)) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)  # the leader changed under it: ask the next one
                continue
            raise err from None
    config = _adopt(ctl, got["config"])
    ctl._fault("reconfig", f"{config.version:x}")
    gone = sorted(before - config.sids - ctl.retiring)
    if gone:
        ctl.retiring.update(gone)
        await _retire(ctl, gone, config, deadline)
    log.info("ensemble %s: configuration %x in force (%s)", ctl.name, config.version, change)
    return got


def follow(ctl: EnsembleController, statuses: list[ReplicaStatus]) -> None:
    """Keep the controller's view of the membership up with reconfigurations it did not ask for
    (a ZooKeeper client's reconfig, zkCli's): the newest configuration a running replica has
    in force becomes its view, and a replica that reports it left is stopped as ``reconfig``
    stops the ones it removes (in the background, once the new configuration is everywhere)."""
    live = [st.report for st in statuses if st.report is not None and st.report.node is not None and st.report.config]
    if not live:
        return
    top = max(live, key=lambda r: r.node.config_version if r.node else 0)
    if top.node is not None and top.node.config_version > ctl.config_version:
        before = set(ctl.voters) | set(ctl.observers)
        config = _adopt(ctl, top.config)
        gone = sorted((before - config.sids) - ctl.departed - ctl.retiring)
        gone += [r.sid for r in live if r.departed is not None and r.sid not in gone
                 and r.sid not in ctl.retiring and r.sid not in ctl.departed]
        if gone:
            ctl.retiring.update(gone)
            task = asyncio.get_running_loop().create_task(_retire(ctl, gone, config, time.monotonic() + 60))
            ctl.background.add(task)
            task.add_done_callback(ctl.background.discard)


async def _retire(ctl: EnsembleController, gone: list[int], config: Membership, deadline: float) -> None:
    """Stop the replicas ``config`` removed, once every running member has it in force."""
    while time.monotonic() < deadline:
        running = [st for st in await status_of(ctl, sorted(config.sids)) if not st.stale]
        if all((st.config_version or 0) >= config.version for st in running):
            break
        await asyncio.sleep(0.05)
    for sid in gone:
        h = ctl.handles.pop(sid, None)
        if h is not None:
            try:
                await asyncio.wait_for(h.stop.remote(), 5)
            except Exception:  # already gone
                pass
            ray.kill(h, no_restart=True)
        ctl.departed.add(sid)
        ctl.retiring.discard(sid)
        ctl._fault("removed", [sid])
    ctl._save()

# -- adding replicas --------------------------------------------------------------------------


def _place(ctl: EnsembleController) -> str:
    """The live Ray node holding the fewest of this ensemble's replicas (ties: by node id)."""
    live = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    if not live:
        raise NotRunningError("no live Ray node to place a replica on")
    load = {n: 0 for n in live}
    for sid in ctl.members:
        if ctl.node_of.get(sid) in load:
            load[ctl.node_of[sid]] += 1
    return min(live, key=lambda n: (load[n], n))


async def _start_joiner(ctl: EnsembleController, sid: int, node: str | None) -> None:
    if node is not None:
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        match = [n for n in alive if n.startswith(node) or ctl.node_addr.get(n) == node]
        if len(match) != 1:
            raise ConfigError(f"node {node!r} names {len(match)} live Ray nodes; give a node id or address")
        ctl.node_of[sid] = match[0]
    else:
        ctl.node_of[sid] = _place(ctl)
    nodes = await ctl._nodes()
    ctl.home[sid] = homes.home_of(next(n for n in nodes if n["NodeID"] == ctl.node_of[sid]), nodes)
    ctl.joining.add(sid)
    ctl.members = ctl.voters + ctl.observers + sorted(ctl.joining)
    await ctl._launch(sid, joining=True)
    await ctl._publish_peers()
    if ctl.groups is not None:
        await ctl._apply_partition()
    ctl._fault("join", [sid])


async def _wait_synced(ctl: EnsembleController, sids: list[int], deadline: float) -> None:
    """Until the leader reports each of ``sids`` synced and following."""
    while True:
        _, st = await _leader(ctl, deadline)
        if set(sids) <= set(st.synced or ()):
            return
        if time.monotonic() > deadline:
            missing = sorted(set(sids) - set(st.synced or ()))
            raise RequestTimeoutError(f"replica(s) {missing} not synced with the leader in time")
        await asyncio.sleep(0.05)


async def add_replica(ctl: EnsembleController, role: str = PARTICIPANT, node: str | None = None,
                      timeout: float = 120.0) -> dict[str, Any]:
    """Start a new replica on a Ray node, sync it, and make it a member with ``role``."""
    if role not in (PARTICIPANT, OBSERVER):
        raise ConfigError(f"role must be {PARTICIPANT!r} or {OBSERVER!r}, got {role!r}")
    if not ctl.cfg.reconfig_enabled:
        raise ReconfigError("RECONFIG_DISABLED", f"ensemble {ctl.name!r} runs with reconfig_enabled off")
    deadline = time.monotonic() + timeout
    sid = max([*ctl.members, *ctl.departed, 0]) + 1
    await _start_joiner(ctl, sid, node)
    try:
        await _wait_synced(ctl, [sid], deadline)
        got = await reconfig(ctl, joining=spec(ctl, sid, role), timeout=max(1.0, deadline - time.monotonic()))
    except BaseException:
        await _drop_joiners(ctl, [sid])
        raise
    return {"sid": sid, **got}


async def _drop_joiners(ctl: EnsembleController, sids: list[int]) -> None:
    for sid in sids:
        if sid in ctl.joining:
            ctl.joining.discard(sid)
            h = ctl.handles.pop(sid, None)
            if h is not None:
                ray.kill(h, no_restart=True)
    ctl.members = ctl.voters + ctl.observers + sorted(ctl.joining)


async def remove_replica(ctl: EnsembleController, sid: int, timeout: float = 60.0) -> dict[str, Any]:
    ctl._check(sid)
    if sid in ctl.joining:
        await _drop_joiners(ctl, [sid])
        return {"zxid": 0, "version": ctl.config_version, "config": ""}
    return await reconfig(ctl, leaving=str(sid), timeout=timeout)


async def reconfigure(ctl: EnsembleController, voters: list[int], observers: list[int] | tuple[int, ...] = (),
                      timeout: float = 180.0) -> dict[str, Any]:
    """Make the membership exactly ``voters`` and ``observers``: sids not running yet are
    started (on the least loaded nodes) and synced first; those left out are removed."""
    voters, observers = [int(v) for v in voters], [int(o) for o in observers]
    if set(voters) & set(observers):
        raise ConfigError(f"replica(s) {sorted(set(voters) & set(observers))} cannot be both voter and observer")
    if not voters:
        raise ConfigError("at least one voter is needed")
    deadline = time.monotonic() + timeout
    new = [s for s in [*voters, *observers] if s not in ctl.members]
    for sid in new:
        if sid < 1:
            raise ConfigError(f"replica ids are positive, got {sid}")
        await _start_joiner(ctl, sid, None)
    try:
        await _wait_synced(ctl, [s for s in new], deadline)
        lines = [spec(ctl, s, PARTICIPANT) for s in voters] + [spec(ctl, s, OBSERVER) for s in observers]
        return await reconfig(ctl, members=",".join(lines), timeout=max(1.0, deadline - time.monotonic()))
    except BaseException:
        await _drop_joiners(ctl, new)
        raise


async def status_of(ctl: EnsembleController, sids: list[int]) -> list[ReplicaStatus]:
    return [st for st in await ctl.status() if st.sid in sids]


async def initial_config(ctl: EnsembleController, timeout: float = 60.0) -> None:
    """With reconfiguration on: commit the starting configuration, with every member's
    addresses, so /zookeeper/config shows it from the start (ZooKeeper's servers write theirs
    when they start; here it is replicated state like every later one)."""
    lines = [spec(ctl, s, PARTICIPANT) for s in ctl.voters] + [spec(ctl, s, OBSERVER) for s in ctl.observers]
    await reconfig(ctl, members=",".join(lines), timeout=timeout)

