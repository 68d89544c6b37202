"""Deliberately broken ZooKeeper services (each a few lines), for tests/sim/test_zk_service.py.

Measured with the CI sweep's first seeds (3 voters, every fault, 250 steps), each is caught after:
read served before an earlier write: 2 seeds (read freshness); watch dropped on a move: 5 (watch
lost before a reply showing its change); expired session's ephemeral left behind: 32 (a vanished
client's session still live after healing); reply sent before its txn is delivered: 1 (told ok
for a txn that is not the session's); write held behind a read never submitted: 2 (calls
unanswered after healing; no safety property sees it, so all 1,100 seeds pass without the
liveness check).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from zabray.zk import messages as zm
from zabray.zk.service import ZkService, _Conn, _Entry


def read_before_earlier_write(self: ZkService, st: _Conn) -> None:
    """Runs a read as soon as it arrives, even with an earlier write of its connection unanswered."""
    for e in st.queue:
        if e.read is not None and not e.done:
            self._read(st, e)
    ORIGINAL["_drain"](self, st)


def drop_watches_on_move(self: ZkService, st: _Conn, sid: int, watches: zm.Watches, last_zxid: int) -> None:
    """Forgets the watches a moving session re-registers."""
    ORIGINAL["_bind"](self, st, sid, zm.Watches(), last_zxid)


def tracker_forgets_old_sessions(self: ZkService) -> dict[int, int]:
    """A new leader tracks only the sessions created under it: older ones never expire."""
    return {}


def reply_before_delivery(self: ZkService, e: _Entry, value: bytes) -> int:
    """Answers a write as soon as it is handed to the core, guessing its zxid and result."""
    rid: int = ORIGINAL["_submit"](self, e, value)
    if e.st is not None and e.on_ok is None:
        self.pending.pop(rid, None)
        self._finish(e, zm.Reply(e.st.conn, e.xid, self.tree.last_zxid + 1, None, None))
    return rid


def never_release_held_writes(self: ZkService, st: _Conn) -> None:
    """Forgets a write held behind an earlier read of its connection: it is never submitted,
    and everything behind it waits forever."""


def take_calls_behind_a_connect(self: ZkService, st: _Conn, xid: int, op: zm.Connect) -> None:
    """Takes the calls a client sent right behind its connect at once, before the session is
    there (they are answered SESSION_EXPIRED): zabray before a6f82c3."""
    ORIGINAL["_connect"](self, st, xid, op)
    st.opening = None


def read_only_takes_sessions_that_saw_more(self: ZkService, st: _Conn, xid: int, op: zm.Connect) -> None:
    """A read-only replica takes a session that has seen more than its tree (no BEHIND check)."""
    if self.ro.serving and op.read_only:
        op = dataclasses.replace(op, last_zxid=min(op.last_zxid, self.tree.last_zxid))
    ORIGINAL["_connect"](self, st, xid, op)


def read_only_acknowledges_writes(self: ZkService, st: _Conn, xid: int, op: zm.ClientOp) -> None:
    """A read-only replica answers writes ok though no quorum could have taken them."""
    self._answer_now(st, xid, None, None)


ORIGINAL: dict[str, Any] = {name: getattr(ZkService, name) for name in ("_drain", "_bind", "_submit", "_connect")}

PLANTED = {
    "read served before an earlier write": ("_drain", read_before_earlier_write),
    "watch dropped on a move": ("_bind", drop_watches_on_move),
    "expired session's ephemeral left behind": ("_start_tracker", tracker_forgets_old_sessions),
    "reply sent before its txn is delivered": ("_submit", reply_before_delivery),
    "write held behind a read never submitted": ("_release", never_release_held_writes),
}

# Caught only in read-only runs (``ZkSimOptions(read_only=True, read_only_clients=...)``).
PLANTED_READ_ONLY = {
    "read-only replica takes a session that saw more": ("_connect", read_only_takes_sessions_that_saw_more),
    "read-only replica acknowledges writes": ("_read_only_write", read_only_acknowledges_writes),
}

# Caught only with clients that send calls behind their connect (``ZkSimOptions(eager=True)``):
# after 1 seed of test_zk_service's eager sweep ("told SESSION_EXPIRED while ... is live").
PLANTED_EAGER = {
    "calls behind a connect taken before the session": ("_connect", take_calls_behind_a_connect),
}
