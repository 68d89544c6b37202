"""ZooKeeper's ``multi`` as a transaction, checked the way Elle checks them. Pure.

A multi is recorded as one history row per sub-operation (schema version 2: ``multi`` is the op
of its first row; every row shares its invocation, completion, outcome and zxid). ZooKeeper
commits a multi as one txn, so:

- atomic (``multi-atomic``): a committed multi's operations all take effect at its one zxid, a
  failed one's none. An ``unknown`` multi whose writes reads revealed (``key_states.reveal``) did
  commit, at the zxid those reads carry, and every read must carry the same one; once known,
  that zxid becomes every sub-operation's (``consolidate``), so the other keys' checks see all
  of its changes together: a session that saw one and then reads another key from before it
  goes back in time. A read of a value only a failed multi wrote is an aborted read (Elle's
  G1a), found by ``key_states``.
- isolated (``multi-isolated``): no other transaction comes between its operations. Replaying
  each key in zxid order (``key_states``) holds every sub-operation, a ``check`` included, to
  the state its key had at the multi's zxid; a value the multi overwrote within itself is never
  visible (Elle's G1b, intermediate read); on one key, its sub-operations are one step of the
  linearizability search.

Conflicting reveals of a single ``unknown`` write (one value read at two zxids) are
``read-state`` violations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zabray.pipeline.key_states import Violation, display, ref, z
from zabray.pipeline.linearizability import render


def consolidate(rows: Sequence[Mapping[str, Any]], reveals: Sequence[Mapping[str, Any]]
                ) -> tuple[list[dict[str, Any]], list[Violation]]:
    """The rows of one unit (a multi's rows, or one operation's row) with ``eff_zxid``: the
    recorded zxid of an ``ok`` unit, the one zxid its reveals agree on for an ``unknown`` one
    (``reveals``: ``{op, revealed, by}``, ``by`` naming the read), else None."""
    out = [dict(r) for r in rows]
    problems: list[Violation] = []
    first = min(out, key=lambda r: int(r["op"]))
    outcome = first["outcome"]
    eff: int | None = None
    if outcome == "ok":
        eff = z(first.get("zxid"))
    elif outcome == "unknown" and reveals:
        zs = sorted({int(v["revealed"]) for v in reveals})
        if len(zs) == 1:
            eff = zs[0]
        else:
            multi = z(first.get("multi")) is not None
            by = {int(v["revealed"]): v for v in reveals}
            seen = "; ".join(f"{by[x].get('by')} read {by[x].get('key', '')} at zxid 0x{x:x}" for x in zs[:4])
            name = f"multi {first.get('client')}#{z(first.get('multi'))}" if multi else ref(first)
            detail = (f"{name} (outcome unknown) was seen taking effect at {len(zs)} different zxids ({seen}): "
                      + ("a multi commits at one" if multi else "one write is one state"))
            ops = [display(r) for r in out]
            problems.append(Violation(f"{first.get('client')}/{first.get('session')}",
                                      "multi-atomic" if multi else "read-state",
                                      tuple(f"{r.get('client')}#{int(r['op'])}" for r in out), detail,
                                      render(str(first.get("key")), ops, title=detail)))
    for r in out:
        r["eff_zxid"] = eff if outcome != "fail" else None
    return out, problems
