"""The trace schema (version 2, see ``SCHEMA_VERSION``), shared by the simulator and real runs.

A run directory holds ``trace/*.jsonl``: one JSON object per line, one file per writer
(a replica incarnation, a client, the fault injector, the simulator). Every row has the
envelope columns and the columns of its ``kind``; absent columns are null. Spark reads the
files directly with ``SCHEMA`` (see ``zabray.pipeline``), so adding a column is a compatible
change and renaming one needs a new ``SCHEMA_VERSION``.

Kinds and what they promise:

- ``state``: a replica entered ``state`` (LOOKING/FOLLOWING/LEADING/OBSERVING) for ``epoch``,
  following ``leader`` (-1 while looking); STARTED marks a new incarnation (a start or restart
  from disk).
- ``established``: a leader's epoch is established (a quorum acked NEWLEADER); ``zxid`` ends its
  initial history.
- ``propose``: leader ``replica`` broadcast ``zxid`` (epoch ``epoch``) with value ``digest``.
- ``deliver``: ``replica`` delivered ``zxid`` with value ``digest``; per incarnation, in order.
- ``snapshot``: ``replica`` holds the state through ``zxid`` without delivering each txn: it
  installed a SNAP from its leader, or this incarnation started from its own snapshot; its
  deliveries go on after ``zxid``.
- ``client``: one client operation: ``session``, ``op``, ``path``, ``invoke_t``, ``complete_t``,
  ``outcome`` (ok/failed/unknown), ``zxid`` (the zxid it wrote, or the zxid its read saw),
  ``digest`` of the value written.
- ``fault``: ``fault`` (kill, restart, restart-fresh, pause, partition, ...) was applied to
  ``target`` (replica sids as text, e.g. "2" or "1 | 2,3" for partition groups) from ``start``
  to ``end`` (``end`` = ``start`` for instant faults; a pause or partition gets a second row
  with its ``end`` once it is lifted). Message holds (``hold``, ``release``, ``unhold``) and
  scenario steps (``scenario-step``, with the step's text in ``target``) are ``fault`` rows too.
- ``message``: (only with ``trace_messages: true``) replica ``replica`` did ``dir`` with channel
  packet ``msg`` (its protocol NAME) to or from replica ``peer``, carrying ``zxid`` (null if
  none), while in ``phase`` (discovery/synchronization/broadcast). ``dir``: ``send`` (the core
  emitted it and it went on), ``hold`` (emitted, caught or queued behind a hold in this shell),
  ``release`` (left the hold queue), ``drop`` (died held, with its channel), ``recv`` (the core
  is about to see it). Rows of one replica incarnation are in the order it did them; PING and
  TOUCH are never traced.

``t`` is seconds (wall clock, float) in real runs and the simulated tick in simulated runs.

Run rows (version 2): a ``propose`` or ``deliver`` row may carry ``digests`` (a list of n
digests) instead of ``digest``. It stands for n rows of its kind, in order, for zxids ``zxid``,
``zxid + 1``, ..., ``zxid + n - 1`` of ``epoch``, the i-th with the i-th digest, all with the
row's ``t`` (when the first was recorded: the others were recorded in the same event-loop turn).
Readers expand them (``expand``; the pipeline's loader does the same in Spark), so no check
ever sees one. Replicas write them because a loaded replica delivers dozens of txns per turn,
and a row per txn cost 13-15% of the ensemble's throughput (3-4% with run rows).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from xxhash import xxh3_64_hexdigest as _xxh3_64_hexdigest

from zabray.fastinit import fast_inits

SCHEMA_VERSION = 2
# Version 1 had no run rows; its traces read as they are.
READABLE_VERSIONS = (1, 2)

# The column of run rows only (see above): never in a row a reader sees after ``expand``.
RUN_DIGESTS = "digests"

# column, JSON/Spark type, meaning. The single source of truth for the pipeline.
SCHEMA: tuple[tuple[str, str, str], ...] = (
    ("v", "int", "schema version"),
    ("run", "string", "run id"),
    ("src", "string", "writer: replica-<sid>, client-<n>, faults, sim"),
    ("replica", "int", "replica sid (-1 when not a replica)"),
    ("inc", "int", "incarnation of the replica (restarts so far)"),
    ("t", "double", "time: seconds (real runs) or ticks (simulation)"),
    ("kind", "string", "state | established | propose | deliver | snapshot | client | fault | message"),
    ("epoch", "long", "epoch"),
    ("zxid", "long", "zxid (epoch << 32 | counter)"),
    ("digest", "string", "hex digest of the value"),
    ("state", "string", "LOOKING | FOLLOWING | LEADING | OBSERVING"),
    ("leader", "int", "leader followed (-1 if none)"),
    ("session", "long", "client session id"),
    ("op", "string", "client op: write | read | create | set | delete | get | ..."),
    ("path", "string", "znode path of a client op"),
    ("invoke_t", "double", "when the client invoked the op"),
    ("complete_t", "double", "when the client saw the outcome (null if never)"),
    ("outcome", "string", "ok | failed | unknown"),
    ("fault", "string", "fault kind"),
    ("target", "string", "fault target replicas, e.g. '1,3'"),
    ("start", "double", "fault start"),
    ("end", "double", "fault end"),
    ("dir", "string", "message: send | hold | release | drop | recv"),
    ("msg", "string", "message: the packet's protocol NAME (PROPOSAL, NEWLEADER, ...)"),
    ("peer", "int", "message: the replica at the other end of the channel"),
    ("phase", "string", "message: the replica's phase (discovery | synchronization | broadcast)"),
)
COLUMNS = tuple(c for c, _, _ in SCHEMA)


def digest(value: bytes) -> str:
    """The value digest used in every trace: 16 hex characters of XXH3-64. Digests are compared
    within one run (replicas against each other and against what clients sent) to catch a wrong
    or diverged value, so a fast non-cryptographic hash does; it is computed once per txn on
    every replica and client, where BLAKE2b cost 15 times as much."""
    return _xxh3_64_hexdigest(value)


@dataclass(frozen=True, slots=True)
class StateChange:
    state: str
    epoch: int
    leader: int
    kind: str = "state"


@dataclass(frozen=True, slots=True)
class Established:
    epoch: int
    zxid: int
    kind: str = "established"


@dataclass(frozen=True, slots=True)
class Proposed:
    epoch: int
    zxid: int
    digest: str
    kind: str = "propose"


@dataclass(frozen=True, slots=True)
class Delivered:
    """The txns of ``epoch`` from ``zxid`` on, one per digest (consecutive zxids), delivered in
    order. One record per run: building one per txn was 12% of a loaded follower's CPU."""

    epoch: int
    zxid: int
    digests: tuple[str, ...]
    kind: str = "deliver"


@dataclass(frozen=True, slots=True)
class SnapshotInstalled:
    epoch: int
    zxid: int
    kind: str = "snapshot"


@dataclass(frozen=True, slots=True)
class ClientOp:
    session: int
    op: str
    invoke_t: float
    complete_t: float | None
    outcome: str
    zxid: int | None = None
    digest: str | None = None
    path: str | None = None
    kind: str = "client"


@dataclass(frozen=True, slots=True)
class Fault:
    fault: str
    target: str
    start: float
    end: float | None = None
    kind: str = "fault"


@dataclass(frozen=True, slots=True)
class PeerMessage:
    dir: str
    msg: str
    peer: int
    zxid: int | None
    phase: str | None
    kind: str = "message"


def expand(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows a run row stands for (see the module doc), in order; any other row alone."""
    digests, first = r.get(RUN_DIGESTS), r.get("zxid")
    if not isinstance(digests, list | tuple) or not isinstance(first, int):
        return [r]  # not a run row, or a malformed one: left for the checks to report
    base = {k: v for k, v in r.items() if k != RUN_DIGESTS}
    return [{**base, "zxid": first + i, "digest": d} for i, d in enumerate(digests)]


_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def row(record: Any, *, run: str, src: str, replica: int, inc: int, t: float) -> dict[str, Any]:
    """One trace row: the envelope plus the record's own fields (records hold only scalars)."""
    out: dict[str, Any] = {"v": SCHEMA_VERSION, "run": run, "src": src, "replica": replica, "inc": inc, "t": t}
    for name in _fields(type(record)):
        out[name] = getattr(record, name)
    return out


fast_inits(globals())  # built on every message or write: see zabray.fastinit
