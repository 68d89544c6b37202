"""One replica's view of the ensemble's configurations, and which of them a quorum must satisfy.

Three kinds of configuration matter to a replica (Shraer et al., "Dynamic Reconfiguration of
Primary/Backup Clusters", and ZooKeeper's ``QuorumPeer``'s committed and last-seen verifiers):

- ``durable``: the newest configuration this replica has activated and made durable
  (``WriteConfig`` done), or the static one it was started with;
- ``activating``: configurations it has activated (delivered their txn, or installed a SNAP or
  learned one from a peer) whose ``WriteConfig`` is not yet durable;
- pending: the configurations of reconfiguration txns in its history that it has not delivered
  (proposed, perhaps committed elsewhere, not known committed here).

A set of replicas is a quorum only if it is a quorum of every one of them
(``quorum_configs``): a replica never counts votes or acks under a configuration it has not
durably learned alone, and while a reconfiguration may be in progress both the old and the new
configuration must agree. Requiring more quorums than needed only ever delays progress.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from zabray.protocol.history import History
from zabray.protocol.membership import Membership


class ConfigState:
    __slots__ = ("sid", "durable", "activating", "active", "_base", "peer_versions")

    def __init__(self, sid: int, static: Membership, durable: Membership | None) -> None:
        self.sid = sid
        self.durable = durable if durable is not None else static
        self.activating: deque[tuple[int, Membership]] = deque()  # (WriteConfig token, config)
        self.active = self.durable
        self._base = [self.durable]
        self.peer_versions: dict[int, int] = {}  # the durable config version each peer last told us

    def activate(self, config: Membership, token: int) -> None:
        self.activating.append((token, config))
        self.active = config

    def persisted(self, upto: int) -> bool:
        """WriteConfigs through token ``upto`` are durable; whether ``durable`` changed."""
        changed = False
        while self.activating and self.activating[0][0] <= upto:
            self.durable = self.activating.popleft()[1]
            changed = True
        if changed:
            self._base = [self.durable]
        return changed

    def quorum_configs(self, history: History, applied: int) -> list[Membership]:
        """Every configuration a quorum must satisfy now, oldest first (see the module doc)."""
        cfgs = history.configs
        if not self.activating and (not cfgs or cfgs[-1].zxid <= applied):
            return self._base
        out = [self.durable, *(m for _, m in self.activating)]
        top = out[-1].version
        for t in cfgs:
            if t.zxid > applied and t.zxid > top and t.config is not None:
                out.append(t.config)
                top = t.zxid
        return out

    def pending(self, history: History, above: int) -> list[Membership]:
        """The configurations of reconfiguration txns in ``history`` above ``above``."""
        return [t.config for t in history.configs if t.zxid > above and t.config is not None]

    def known(self, history: History, applied: int) -> Iterable[Membership]:
        yield from self.quorum_configs(history, applied)
        if self.active is not self.durable:
            yield self.active

    def peers(self, history: History, applied: int) -> list[int]:
        """Every other replica of any configuration this replica knows of, by sid."""
        sids: set[int] = set()
        for m in self.known(history, applied):
            sids |= m.sids
        sids.discard(self.sid)
        return sorted(sids)

    @property
    def newest_version(self) -> int:
        return self.active.version
