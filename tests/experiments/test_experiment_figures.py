"""What a reader sees in the experiments' figures: counts on integer ticks, log axes in plain
numbers, loads in words, fault labels off the data, and a fault that began late drawn as such.
The figures are drawn from small frames shaped like the runner's, with no Ray."""

from __future__ import annotations

import math

import matplotlib
import pandas as pd
import pytest

from zabray.experiments import plots

matplotlib.use("Agg")
MEASURED = dict(host="vm", cpus=2, load1=3.0, nodes=1, cluster_cpus=2)


def scaling_frame() -> pd.DataFrame:
    return pd.DataFrame([dict(clients=2, in_flight=f, voters=v, throughput=3000 / v, latency_p50_ms=2.0 * v,
                              latency_p99_ms=6.0 * v, **MEASURED) for f in (1, 32) for v in (3, 5, 7, 9, 13)])


def ticks(axis: object) -> list[str]:
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text()]  # type: ignore[attr-defined]


def test_counts_sit_on_integer_ticks_and_log_axes_read_as_plain_numbers() -> None:
    fig = plots.size_scaling(scaling_frame())
    fig.canvas.draw()
    tput, lat = fig.axes[:2]
    assert tput.get_xticks().tolist() == [3, 5, 7, 9, 13]
    assert ticks(lat.yaxis) and all("10^" not in t and "times" not in t and "$" not in t for t in ticks(lat.yaxis))
    assert all(float(t.replace(",", "")) > 0 for t in ticks(lat.yaxis))
    labels = tput.get_legend_handles_labels()[1]
    assert labels == ["2 clients × 1 in flight", "2 clients × 32 in flight"]


@pytest.mark.parametrize("width", [9.0, 4.5])
def test_faults_are_numbered_above_the_plot_and_a_late_one_shows_when_it_was_planned(width: float) -> None:
    tl = pd.DataFrame(dict(t=[i / 4 for i in range(-4, 40)], ops_per_s=[500.0] * 44, writes_per_s=[100.0] * 44,
                           reads_per_s=[400.0] * 44, rep=0, point=0))
    marks = pd.DataFrame([dict(point=0, rep=0, scheduled=2.0, at=2.05, what="kill leader", recovered_s=0.5),
                          dict(point=0, rep=0, scheduled=4.0, at=5.5, what="restart killed", recovered_s=math.nan)])
    fig = plots.timeline(tl, marks, df=pd.DataFrame([MEASURED]), width=width)
    fig.canvas.draw()
    a = fig.axes[0]
    numbers = [t for t in a.texts if t.get_text() in ("1", "2")]
    assert [t.get_text() for t in numbers] == ["1", "2"]
    renderer = fig.canvas.get_renderer()
    top = a.get_window_extent(renderer).y1
    assert all(t.get_window_extent(renderer).y0 >= top for t in numbers)  # above the axes: on no data
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "1 kill leader at 2.0 s" in legend  # 0.05 s late: within the tolerance, no planned time
    assert "2 restart killed at 5.5 s (planned 4.0 s)" in legend and "when that fault was planned" in legend
    box = fig.legends[0].get_window_extent(renderer)
    assert box.x0 >= 0 and box.x1 <= fig.bbox.x1 + 1  # the legend fits the figure at this width
    assert box.y1 <= a.get_window_extent(renderer).y0  # and sits under the plot, not on it
