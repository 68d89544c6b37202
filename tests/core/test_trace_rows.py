"""A trace row reads back the same whichever way the writer encoded it (the hot path for propose
and deliver rows, json.dumps for the rest): the pipeline must never see the difference."""

from __future__ import annotations

import io
import json

from hypothesis import given
from hypothesis import strategies as st

from zabray import trace
from zabray.protocol.messages import Zxid

ints = st.integers(min_value=0, max_value=2**32 - 1)
times = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=0, max_value=2**40))
digests = st.one_of(st.binary(max_size=64).map(trace.digest), st.text(max_size=20))
names = st.text(max_size=12)


@given(kind=st.sampled_from([trace.Delivered, trace.Proposed]), epoch=ints, counter=ints, digest=digests,
       t=times, run=names, src=names, replica=st.integers(-1, 300), inc=st.integers(0, 1000))
def test_a_txn_row_reads_back_as_json_dumps_would_write_it(kind: type, epoch: int, counter: int, digest: str,
                                                           t: float, run: str, src: str, replica: int,
                                                           inc: int) -> None:
    record = kind(epoch, Zxid.of(epoch, counter), digest)
    buf = io.StringIO()
    trace.TraceWriter(buf, run=run, src=src, replica=replica, inc=inc).write(record, t)
    line = buf.getvalue()
    assert line.endswith("\n") and line.count("\n") == 1
    want = json.loads(json.dumps(trace.row(record, run=run, src=src, replica=replica, inc=inc, t=t)))
    got = json.loads(line)
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == v or (v != v and got[k] != got[k]), k  # NaN equals NaN here


def test_other_rows_are_written_whole() -> None:
    buf = io.StringIO()
    w = trace.TraceWriter(buf, run="r", src="replica-1", replica=1, inc=2)
    w.write(trace.StateChange("LEADING", 3, 1), 1.5)
    w.write(trace.Fault("kill", "2", 1.0, None), 2.0)
    rows = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert rows[0] == {"v": 1, "run": "r", "src": "replica-1", "replica": 1, "inc": 2, "t": 1.5, "state": "LEADING",
                       "epoch": 3, "leader": 1, "kind": "state"}
    assert rows[1]["fault"] == "kill" and rows[1]["end"] is None
