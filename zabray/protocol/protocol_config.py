"""The core's configuration: who votes, and every timeout in ticks.

Pure data: the IO shell decides how long a tick is (``configs/*.yaml``); the simulator uses
abstract ticks. Validation happens here so a bad value fails at start, naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zabray.errors import ConfigError


@dataclass(frozen=True, slots=True)
class ProtocolConfig:
    voters: frozenset[int]
    observers: frozenset[int] = frozenset()
    init_limit: int = 10
    """Ticks a leader may spend in discovery+synchronization, and a learner waiting for UPTODATE."""
    sync_limit: int = 5
    """Ticks of silence after which a learner drops its leader, or a leader without a quorum steps down."""
    ping_interval: int = 1
    """The leader pings every learner every this many ticks."""
    finalize_wait: int = 1
    """Ticks an election waits for a better vote once a quorum agrees (unless every voter agrees)."""
    election_resend: int = 2
    election_resend_max: int = 16
    """Election re-broadcasts its vote after this many silent ticks, doubling up to the max."""
    max_outstanding: int = 1000
    """Proposals in flight (proposed, not committed) before the leader queues requests."""
    diff_window: int = 100_000
    """Txns kept in memory below the newest snapshot so a lagging learner gets a DIFF, not a SNAP."""
    diff_chunk: int = 1000
    """Txns per DIFF message."""
    snap_chunk: int = 16 << 20
    """Bytes per SNAP message: a larger state goes in parts (a frame holds at most 64 MiB)."""
    snap_tick_bytes: int = 16 << 20
    """SNAP bytes a leader sends one learner per tick (at least one part): a large state goes over
    several ticks, so that encoding and framing its parts never holds the leader for as long as
    ``sync_limit``, whatever ``snap_chunk`` is."""
    deliver_chunk: int = 2000
    """Txns a learner delivers per step: a large backlog (a long DIFF, or the commits that waited
    for a SNAP's decode) is delivered a chunk per loop turn (``Yield``), so the learner answers
    its leader meanwhile (100,000 ZooKeeper creates in one step held one 3.2 and 5.8 s in two
    runs)."""
    reconfig_enabled: bool = False
    """Reconfiguration requests are served (ZooKeeper's ``reconfigEnabled``, off by default there
    too); when off every one is answered RECONFIG_DISABLED."""
    servers: tuple[tuple[int, str], ...] = ()
    """Where each member of the static configuration listens, as ZooKeeper writes it
    (``host:quorum:election;clienthost:clientport``), by sid; any not listed: not known."""
    members: frozenset[int] = field(init=False)
    quorum: int = field(init=False)

    def __post_init__(self) -> None:
        if not self.voters:
            raise ConfigError("voters: at least one voter is needed")
        if self.voters & self.observers:
            raise ConfigError(f"observers: {sorted(self.voters & self.observers)} are also voters")
        for name in ("init_limit", "sync_limit", "ping_interval", "finalize_wait", "election_resend",
                     "max_outstanding", "diff_chunk", "snap_chunk", "snap_tick_bytes", "deliver_chunk"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}: must be at least 1, got {getattr(self, name)}")
        if self.diff_window < 0:
            raise ConfigError(f"diff_window: must be >= 0, got {self.diff_window}")
        if self.election_resend_max < self.election_resend:
            raise ConfigError("election_resend_max: must be >= election_resend")
        if self.sync_limit <= self.ping_interval:
            raise ConfigError("sync_limit: must exceed ping_interval, or every learner looks dead")
        object.__setattr__(self, "members", self.voters | self.observers)
        object.__setattr__(self, "quorum", len(self.voters) // 2 + 1)

    def is_quorum(self, sids: set[int] | frozenset[int]) -> bool:
        return len(sids & self.voters) >= self.quorum
