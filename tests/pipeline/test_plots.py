"""What the plots draw, read back from matplotlib's artists (no Spark needed)."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure

from zabray.pipeline.plots import LABEL_CHARS, _active_from, _down_intervals, _faults, _with_gaps


def test_a_leader_kill_is_drawn_where_it_happened_and_labelled() -> None:
    ax = Figure().subplots()
    faults = pd.DataFrame([{"run": "r", "fault": "kill", "target": "3", "start": 105.0, "end": 105.0},
                           {"run": "r", "fault": "pause", "target": "1", "start": 107.0, "end": 108.5}])
    leaders = pd.DataFrame([{"run": "r", "epoch": 2, "t": 105.4, "leader": 1, "zxid": 0}])
    _faults(ax, faults, leaders, t0=100.0, window=(0.0, 10.0))
    xs = sorted(round(float(line.get_xdata()[0]), 3) for line in ax.get_lines())
    assert xs == [5.0, 5.4]  # the kill and the new leader, in seconds since the run's start
    spans = [p.get_x() for p in ax.patches]  # the pause as a shaded interval
    assert len(spans) == 1 and round(spans[0], 3) == 7.0
    texts = [t.get_text() for t in ax.texts]
    assert "kill 3" in " ".join(texts) and "pause 1" in " ".join(texts) and "leader 1 (epoch 2)" in texts
    assert {h.get_label() for h in ax.extra_handles} == {"fault (interval)", "fault (instant)", "leader established"}


def test_no_line_through_a_replica_s_downtime() -> None:
    uptime = pd.DataFrame([{"replica": 2, "inc": 0, "start": 0.0, "end": 2.2},
                           {"replica": 2, "inc": 1, "start": 4.6, "end": 9.0}])
    down = _down_intervals(uptime, 2)
    assert down == [(2.2, 4.6)]
    xs, ys = _with_gaps(pd.Series([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), pd.Series([1, 1, 1, 9, 9, 1, 1]), 1.0, down)
    assert xs == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert [math.isnan(y) for y in ys] == [False, False, True, True, True, False, False]
    # a bucket with no data at all is a gap too, never a straight line across it
    xs, ys = _with_gaps(pd.Series([0.0, 3.0]), pd.Series([1.0, 2.0]), 1.0, [])
    assert xs == [0.0, 1.0, 2.0, 3.0] and math.isnan(ys[1]) and math.isnan(ys[2])


def test_a_burst_of_faults_gets_labels_that_fit_and_say_how_many_more() -> None:
    """Faults closer than 1.5% of the axis share a label: it names what fits and counts the
    rest, instead of running off the figure (a schedule applies one every second or so)."""
    ax = Figure().subplots()
    faults = pd.DataFrame([{"run": "r", "fault": f"crash-point {i}:send-before:ACK", "target": "x",
                            "start": 100.0 + 0.01 * i, "end": 100.0 + 0.01 * i} for i in range(6)])
    _faults(ax, faults, pd.DataFrame(columns=["t", "leader", "epoch"]), t0=100.0, window=(0.0, 10.0))
    (label,) = [t.get_text() for t in ax.texts]
    assert len(label) <= LABEL_CHARS + len(" (+5 more)") and label.endswith("more)")
    assert label.startswith("crash-point 0:send-before:ACK x") and "(+5 more)" in label


def test_an_ensemble_left_idle_before_its_load_is_not_drawn_idle() -> None:
    """The time axes start shortly before the first commit or fault when the run idled for its
    first quarter or more (`zabray up`, then a load minutes later); otherwise at 0."""
    tp = pd.DataFrame({"bucket_start": [1000.0 + k for k in range(400, 460)], "commits": [50] * 60})
    faults = pd.DataFrame([{"fault": "kill", "target": "2", "start": 1420.0, "end": 1420.0}])
    lo = _active_from(tp, faults, t0=1000.0, t_end=460.0, bucket=1.0)
    assert 390.0 < lo < 400.0
    busy = pd.DataFrame({"bucket_start": [1000.0 + k for k in range(2, 60)], "commits": [50] * 58})
    assert _active_from(busy, faults.iloc[:0], t0=1000.0, t_end=60.0, bucket=1.0) == 0.0
