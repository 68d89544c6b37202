"""Writing trace rows (``zabray.trace.records``) to a file: the shells' side of the trace."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any, TextIO

from zabray.trace.records import SCHEMA_VERSION, Delivered, Proposed, row


class TraceWriter:
    """Appends rows as JSON lines to an open text file and hands them to the kernel promptly.

    Promptly matters: a replica killed with rows in a userspace buffer would leave a trace that
    says less than its messages did (a txn delivered elsewhere that "nobody proposed"). On an
    asyncio loop the buffer is flushed once per loop turn, by a callback scheduled when the
    turn's first row is written, and by the owner before it writes any frame (``pending``
    says whether there is anything to flush); without a loop every row is flushed at once.
    Rows are not fsynced: a trace is evidence, not state, and a killed process leaves the page
    cache behind.

    Within a loop turn, propose (or deliver) records of consecutive zxids become one run row
    (``digests``, see ``expand``): under load a turn delivers dozens of txns, and one row for
    them costs what one row per txn cost for a single txn. A run ends at any other record, a
    gap, an epoch change and the turn's flush, so the file's order of rows is the order of the
    records. Without a loop there are no runs.
    """

    def __init__(self, fh: TextIO, *, run: str, src: str, replica: int = -1, inc: int = 0) -> None:
        self._fh = fh
        self._env: dict[str, Any] = {"run": run, "src": src, "replica": replica, "inc": inc}
        # The envelope up to "t", encoded once for the propose and deliver rows.
        self._head = (f'{{"v":{SCHEMA_VERSION},"run":{json.dumps(run)},"src":{json.dumps(src)},'
                      f'"replica":{int(replica)},"inc":{int(inc)},"t":')
        self._scheduled = False
        # The run being gathered: its kind ("" if none), first record's t, epoch, first zxid
        # and digests (the zxid that would extend it is the first plus their count).
        self._run_kind = ""
        self._run_t = 0.0
        self._run_epoch = 0
        self._run_zxid = 0
        self._run_digests: list[str] = []

    def write(self, record: Any, t: float) -> None:
        cls = type(record)
        if cls is Proposed:
            self._txns(record, "propose", record.epoch, record.zxid, (record.digest,), t)
        elif cls is Delivered:
            self._txns(record, "deliver", record.epoch, record.zxid, record.digests, t)
        else:
            if self._run_kind:
                self._end_run()
            self._whole(record, t)

    def _txns(self, record: Any, kind: str, epoch: int, zxid: int, digests: tuple[str, ...], t: float) -> None:
        """Extend the run being gathered, or end it and start one (or write ``record`` whole)."""
        hexes = "".join(digests).isalnum()  # digests are hex: nothing in them needs escaping
        if (kind == self._run_kind and zxid == self._run_zxid + len(self._run_digests)
                and epoch == self._run_epoch and hexes):
            self._run_digests.extend(digests)
            return
        if self._run_kind:
            self._end_run()
        if hexes and math.isfinite(t) and self._schedule():
            self._run_kind, self._run_t, self._run_epoch = kind, float(t), int(epoch)
            self._run_zxid = int(zxid)
            self._run_digests = list(digests)
        else:
            self._whole(record, t)

    def _whole(self, record: Any, t: float) -> None:
        self._fh.write(json.dumps(row(record, t=t, **self._env), separators=(",", ":")) + "\n")
        if not self._schedule():
            self._fh.flush()

    def _schedule(self) -> bool:
        """Make sure this turn's flush is scheduled; False if there is no running loop."""
        if self._scheduled:
            return True
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:
            return False
        self._scheduled = True
        return True

    def _end_run(self) -> None:
        """Write the gathered run as one row, as ``json.dumps`` would write it (a run of one as
        a plain row): ints, a finite float, hex digests."""
        digests = self._run_digests
        kind, self._run_kind = self._run_kind, ""
        if len(digests) == 1:
            self._fh.write(f'{self._head}{self._run_t!r},"epoch":{self._run_epoch},"zxid":{self._run_zxid},'
                           f'"digest":"{digests[0]}","kind":"{kind}"}}\n')
        else:
            joined = '","'.join(digests)
            self._fh.write(f'{self._head}{self._run_t!r},"epoch":{self._run_epoch},"zxid":{self._run_zxid},'
                           f'"digests":["{joined}"],"kind":"{kind}"}}\n')

    @property
    def pending(self) -> bool:
        """Rows are buffered that the kernel has not been handed yet (only ever on a loop)."""
        return self._scheduled

    def flush(self) -> None:
        self._scheduled = False
        if self._fh.closed:
            return
        if self._run_kind:
            self._end_run()
        self._fh.flush()

    def close(self) -> None:
        if self._run_kind and not self._fh.closed:
            self._end_run()
        self._fh.close()
