"""A connection's requests in order: the FIFO under ``zabray.zk.service.ZkService``, pure.

Ordering. Each connection has a FIFO of its requests. Writes (and sync) go to the core at once
(pipelined: the core forwards a replica's requests in order); a read runs only when it reaches
the head of its connection's FIFO, after every earlier request of that connection was answered,
so a read issued after a write sees it (a write is answered only once this replica delivered
it). Replies leave in issue order. A write issued after a read is held until the read ran:
the core applies a whole batch of commits before the service hears of them, so a read must
never wait on its own session's later writes. Reads unblocked by a core step run at
``StepEnd``, once every ``TxnDelivered`` of the step (and the watches it fires) went out.

Refusals. A write the core refused (``TxnFailed``, not uncertain: certainly not applied) is
answered ``NOT_READY``, and so is everything after it on that connection: the client retries
them all, in order, elsewhere, so a later request can never take effect before an earlier one.

What a read returns, what a connect does and what happens once a connection closes are the
layers above (``zabray.zk.sessions``, ``zabray.zk.service``): the hooks below.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from typing import Any

from zabray.protocol.events import RID_MASK
from zabray.tree import AuthId, DataTree
from zabray.zk.digest_md5 import DigestMD5Server
from zabray.zk.messages import ClientOp, CloseConn, ErrorInfo, Read, Reply, ServiceAction, SubmitTxn


class Entry:
    """One request in a connection's FIFO (or an internal expiry, ``st`` None)."""

    __slots__ = ("xid", "st", "read", "done", "reply", "on_ok", "held", "close_after", "reconfig")

    def __init__(self, xid: int, st: Conn | None, read: Read | None = None) -> None:
        self.xid = xid
        self.st = st
        self.read = read
        self.done = False
        self.reply: Reply | None = None
        self.on_ok: Callable[[], None] | None = None
        self.held: bytes | None = None  # a write held back behind an earlier read
        self.close_after = False  # close the connection once this reply is out (failed auth)
        self.reconfig = False  # a reconfig: submitted as one


class Conn:
    __slots__ = ("conn", "session", "queue", "closing", "reads", "refusing", "auth", "opening", "waiting", "sasl")

    def __init__(self, conn: int) -> None:
        self.conn = conn
        self.session = 0
        self.queue: deque[Entry] = deque()
        self.closing = False
        self.reads = 0  # unanswered reads in the queue
        self.refusing: str | None = None  # why every further request is NOT_READY
        self.auth: tuple[AuthId, ...] = ()  # the connection's ids: its address, then addAuth's
        self.opening: Entry | None = None  # the connect creating the session, until answered
        self.waiting: list[tuple[int, ClientOp]] = []  # requests that arrived behind it meanwhile
        self.sasl: DigestMD5Server | None = None  # the connection's SASL exchange, once begun


class ConnectionQueues(ABC):
    """The connections' FIFOs, the core requests in flight (``pending``) and the actions out."""

    def __init__(self, tree: DataTree) -> None:
        self.tree = tree
        self.conns: dict[int, Conn] = {}
        self.pending: dict[int, Entry] = {}  # core request id -> entry
        self.dirty: set[int] = set()  # connections to drain at the end of the core step
        self._next_rid = 1
        self._out: list[ServiceAction] = []

    @abstractmethod
    def _read(self, st: Conn, e: Entry) -> None:
        """Run the read ``e`` at the head of ``st``'s FIFO: set its reply."""

    @abstractmethod
    def _opened(self, st: Conn) -> None:
        """The connect creating ``st``'s session is answered: take the requests behind it."""

    @abstractmethod
    def _conn_closed(self, conn: int) -> None:
        """Forget the connection ``conn``."""

    @abstractmethod
    def _internal_done(self, rep: Reply) -> None:
        """An internal request (``Entry.st`` None) was answered ``rep``."""

    def _drain_dirty(self) -> None:
        """At ``StepEnd``: drain the connections the core step's answers left to drain."""
        while self.dirty:
            conn = min(self.dirty)
            self.dirty.discard(conn)
            st = self.conns.get(conn)
            if st is not None:
                self._drain(st)

    def _answer_now(self, st: Conn, xid: int, error: ErrorInfo | None, value: Any = None) -> None:
        e = Entry(xid, st)
        st.queue.append(e)
        self._finish(e, Reply(st.conn, xid, self.tree.last_zxid, error, value))

    def _finish(self, e: Entry, rep: Reply, defer: bool = False) -> None:
        e.reply = rep
        e.done = True
        st = e.st
        if st is not None:
            if defer:
                # The core applied every txn of this step before the service saw the first
                # delivery: a read run now could see state whose watches are not sent yet.
                self.dirty.add(st.conn)
            else:
                self._drain(st)
        else:
            self._internal_done(rep)

    def _drain(self, st: Conn) -> None:
        q = st.queue
        while q:
            e = q[0]
            if not e.done:
                if e.read is None:
                    break
                self._read(st, e)
            q.popleft()
            if e.read is not None:
                st.reads -= 1
            assert e.reply is not None
            self._out.append(e.reply)
            if e.close_after:
                self._out.append(CloseConn(st.conn))
                self._conn_closed(st.conn)
                return
        self._release(st)
        if st.opening is not None and st.opening.done and (not q or q[0] is not st.opening):
            self._opened(st)

    def _release(self, st: Conn) -> None:
        """Submit the writes held behind reads that are now answered."""
        for e in st.queue:
            if e.read is not None and not e.done:
                break
            if e.held is not None:
                value, e.held = e.held, None
                self._submit(e, value)

    def _refuse_rest(self, st: Conn, after: Entry, why: str) -> None:
        """``after`` was refused: so is everything behind it not yet submitted, and everything
        that arrives later, so no later request of the connection takes effect before it."""
        st.refusing = why
        behind = False
        for e in st.queue:
            if e is after:
                behind = True
            elif behind and not e.done and (e.read is not None or e.held is not None):
                e.held = None
                e.reply = Reply(st.conn, e.xid, self.tree.last_zxid, ErrorInfo("NOT_READY", why), None)
                e.done = True

    def _submit(self, e: Entry, value: bytes) -> int:
        st = e.st
        if st is not None and st.refusing is not None:
            self._finish(e, Reply(st.conn, e.xid, self.tree.last_zxid, ErrorInfo("NOT_READY", st.refusing)))
            return 0
        rid = self._next_rid
        self._next_rid = rid + 1 if rid < RID_MASK else 1  # (a core request id has 40 bits)
        self.pending[rid] = e
        self._out.append(SubmitTxn(rid, value, e.reconfig))
        return rid
