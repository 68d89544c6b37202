"""A trace row reads back the same whichever way the writer encoded it (the hot path for propose
and deliver rows, run rows for consecutive ones, json.dumps for the rest): the pipeline must
never see the difference."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from zabray.protocol.messages import Zxid
from zabray.trace import records as trace
from zabray.trace.writer import TraceWriter

ints = st.integers(min_value=0, max_value=2**32 - 1)
times = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=0, max_value=2**40))
digests = st.one_of(st.binary(max_size=64).map(trace.digest), st.text(max_size=20))
names = st.text(max_size=12)


def _read(buf: io.StringIO) -> list[dict[str, Any]]:
    return [r for line in buf.getvalue().splitlines() for r in trace.expand(json.loads(line))]


def _in_a_loop(w: TraceWriter, *records: tuple[Any, float]) -> None:
    """Write ``records`` in one turn of a running loop (where rows are gathered into runs)."""
    async def main() -> None:
        for rec, t in records:
            w.write(rec, t)

    asyncio.run(main())


@given(kind=st.sampled_from([trace.Delivered, trace.Proposed]), epoch=ints, counter=ints,
       digests=st.lists(digests, min_size=1, max_size=3), t=times, run=names, src=names,
       replica=st.integers(-1, 300), inc=st.integers(0, 1000), loop=st.booleans())
def test_a_txn_row_reads_back_as_json_dumps_would_write_it(kind: type, epoch: int, counter: int, digests: list[str],
                                                           t: float, run: str, src: str, replica: int,
                                                           inc: int, loop: bool) -> None:
    if kind is trace.Proposed:
        digests = digests[:1]
    record = kind(epoch, Zxid.of(epoch, counter), tuple(digests) if kind is trace.Delivered else digests[0])
    buf = io.StringIO()
    w = TraceWriter(buf, run=run, src=src, replica=replica, inc=inc)
    if loop:
        _in_a_loop(w, (record, t))
    else:
        w.write(record, t)
    assert buf.getvalue().endswith("\n") and buf.getvalue().count("\n") == 1
    want = trace.expand(json.loads(json.dumps(trace.row(record, run=run, src=src, replica=replica, inc=inc, t=t))))
    got = _read(buf)
    assert len(got) == len(want) == len(digests)
    for g, r in zip(got, want, strict=True):
        assert g.keys() == r.keys()
        for k, v in r.items():
            assert g[k] == v or (v != v and g[k] != g[k]), k  # NaN equals NaN here


def test_other_rows_are_written_whole() -> None:
    buf = io.StringIO()
    w = TraceWriter(buf, run="r", src="replica-1", replica=1, inc=2)
    w.write(trace.StateChange("LEADING", 3, 1), 1.5)
    w.write(trace.Fault("kill", "2", 1.0, None), 2.0)
    rows = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert rows[0] == {"v": trace.SCHEMA_VERSION, "run": "r", "src": "replica-1", "replica": 1, "inc": 2, "t": 1.5, "state": "LEADING",
                       "epoch": 3, "leader": 1, "kind": "state"}
    assert rows[1]["fault"] == "kill" and rows[1]["end"] is None


# Records as a loaded replica traces them: mostly consecutive zxids, sometimes a gap, an epoch
# change, the other kind, or a row of another kind between them; ``turn`` ends the loop turn.
steps = st.lists(st.one_of(
    st.tuples(st.sampled_from(["next", "next", "next", "gap", "epoch", "kind"]), digests),
    st.just(("state", "")), st.just(("turn", ""))), max_size=60)


@given(steps=steps)
def test_run_rows_expand_to_the_records_written_in_order(steps: list[tuple[str, str]]) -> None:
    buf = io.StringIO()
    want: list[tuple[Any, ...]] = []

    async def main() -> None:
        w = TraceWriter(buf, run="r", src="replica-1", replica=1, inc=0)
        cls: type = trace.Delivered
        epoch, counter, t = 1, 0, 100.0
        for what, digest in steps:
            t += 0.001
            if what == "turn":
                await asyncio.sleep(0)
                continue
            if what == "state":
                w.write(trace.StateChange("LEADING", epoch, 1), t)
                want.append(("state", epoch, None, None))
                continue
            counter += 2 if what == "gap" else 1
            if what == "epoch":
                epoch, counter = epoch + 1, 1
            if what == "kind":
                cls = trace.Proposed if cls is trace.Delivered else trace.Delivered
            zxid = Zxid.of(epoch, counter)
            rec = cls(epoch, zxid, (digest,) if cls is trace.Delivered else digest)
            w.write(rec, t)
            want.append((rec.kind, epoch, int(zxid), digest))
        w.flush()

    asyncio.run(main())
    rows = _read(buf)
    assert [(r["kind"], r["epoch"], r.get("zxid"), r.get("digest")) for r in rows] == want
    assert all(r["replica"] == 1 and r["src"] == "replica-1" and r["v"] == trace.SCHEMA_VERSION for r in rows)
    assert [r["t"] for r in rows] == sorted(r["t"] for r in rows)  # a file's times never go back


def test_a_turns_consecutive_deliveries_are_one_row_and_reach_the_file_by_its_end() -> None:
    buf = io.StringIO()

    async def main() -> None:
        w = TraceWriter(buf, run="r", src="replica-2", replica=2, inc=1)
        w.write(trace.Delivered(3, Zxid.of(3, 1), tuple(trace.digest(b"%d" % c) for c in range(1, 51))), 8.0)
        w.write(trace.Delivered(3, Zxid.of(3, 51), tuple(trace.digest(b"%d" % c) for c in range(51, 101))), 9.0)
        w.write(trace.Proposed(3, Zxid.of(3, 101), trace.digest(b"p")), 200.0)
        assert len(buf.getvalue().splitlines()) <= 1  # the proposal's run is still gathering
        await asyncio.sleep(0)
        assert len(buf.getvalue().splitlines()) == 2  # the turn's flush wrote both rows

    asyncio.run(main())
    first, second = (json.loads(x) for x in buf.getvalue().splitlines())
    assert first["zxid"] == Zxid.of(3, 1) and len(first["digests"]) == 100 and "digest" not in first
    assert first["t"] == 8.0 and second == {**second, "kind": "propose", "digest": trace.digest(b"p"), "t": 200.0}
    rows = _read(buf)
    assert [r["zxid"] for r in rows] == [Zxid.of(3, c) for c in range(1, 102)]
    assert rows[99]["digest"] == trace.digest(b"100") and rows[99]["t"] == 8.0


def test_expand_leaves_other_and_malformed_rows_alone() -> None:
    plain = {"kind": "state", "state": "LEADING"}
    assert trace.expand(plain) == [plain]
    for bad in ({"kind": "deliver", "digests": ["ab"]}, {"kind": "deliver", "zxid": "1", "digests": ["ab"]},
                {"kind": "deliver", "zxid": 5, "digests": "ab"}):
        assert trace.expand(bad) == [bad]
    assert trace.expand({"kind": "deliver", "zxid": 5, "digests": ["a", "b"], "t": 1.0}) == [
        {"kind": "deliver", "zxid": 5, "digest": "a", "t": 1.0}, {"kind": "deliver", "zxid": 6, "digest": "b", "t": 1.0}]
