"""PNG plots of a run's figure tables (``metrics.collect``), fit to put in a paper.

Every time axis is time since the run's start (its first trace row), in seconds (ticks for a
simulated run); every axis names its unit. It starts at 0, unless nothing happened in the first
quarter of the run or more (an ensemble left up before its load began): then it starts just
before the first commit or fault. Faults are drawn where they happened: an interval
fault (a pause, a partition, a slow disk) as a shaded span, an instant one (a kill, a restart,
a channel cut) as a line, each labelled with what it was and its target; each established
leader as a dashed line labelled with its sid and epoch. A line never crosses a stretch with no
data: a replica's lag line breaks while it was down, and its downtime is drawn under the axis.
Drawn on matplotlib's Agg canvas (no display needed).
"""

from __future__ import annotations

import logging
import math
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)
FAULT_COLOR = "tab:red"
LEADER_COLOR = "tab:green"
DPI = 150


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _unit(runs: pd.DataFrame, run: str) -> tuple[float, str, bool]:
    """(t0, time unit, simulated) of ``run``."""
    row = runs[runs["run"] == run] if "run" in runs else runs
    if not len(row):
        return 0.0, "s", False
    sim = bool(row["simulated"].iloc[0])
    return float(row["t0"].iloc[0]), ("ticks" if sim else "s"), sim


def _length(runs: pd.DataFrame, run: str) -> float | None:
    row = runs[runs["run"] == run] if "run" in runs else runs
    return float(row["t1"].iloc[0] - row["t0"].iloc[0]) if len(row) else None


LABEL_CHARS = 48
"""The longest label drawn along a time axis: about 40% of a figure's height in 6.5 pt type, so
a fault label from the top and a leader label from the bottom never run past the axes."""


def _labels(ax: Any, marks: list[tuple[float, str]], y: float, color: str, window: tuple[float, float],
            va: str) -> None:
    """Rotated labels at the ``marks`` inside ``window``; marks closer than 1.5% of it share one
    label, which names as many as fit in ``LABEL_CHARS`` and counts the rest."""
    lo, hi = window
    groups: list[tuple[float, list[str]]] = []
    for t, text in sorted(marks):
        if not lo <= t <= hi:
            continue
        if groups and t - groups[-1][0] < 0.015 * (hi - lo):
            groups[-1][1].append(text)
        else:
            groups.append((t, [text]))
    for t, texts in groups:
        ax.annotate(_joined(texts), (t, y), xycoords=("data", "axes fraction"), xytext=(-1, 0),
                    textcoords="offset points", fontsize=6.5, rotation=90, va=va, ha="right", color=color)


def _joined(texts: list[str]) -> str:
    """``a / b / c`` up to ``LABEL_CHARS``, then ``(+N more)`` for those that did not fit."""
    label = texts[0][:LABEL_CHARS]
    for i, text in enumerate(texts[1:], start=1):
        more = f" (+{len(texts) - i} more)"
        if len(label) + 3 + len(text) + (len(more) if i < len(texts) - 1 else 0) > LABEL_CHARS:
            return label + more
        label += " / " + text
    return label


def _active_from(tp: pd.DataFrame, faults: pd.DataFrame, t0: float, t_end: float, bucket: float) -> float:
    """Where a run's time axes start: at 0, unless nothing happened for the first quarter of the
    run or more (an ensemble left up before its load and faults began), then shortly before
    the first commit or fault, so the part with data is not squeezed into a corner."""
    firsts = []
    busy = tp[tp["commits"] > 0] if len(tp) else tp
    if len(busy):
        firsts.append(float(busy["bucket_start"].min()) - t0)
    if len(faults):
        firsts.append(float(faults["start"].min()) - t0)
    if not firsts or min(firsts) < 0.25 * t_end:
        return 0.0
    first = min(firsts)
    return max(0.0, first - max(2 * bucket, 0.05 * (t_end - first)))


def _faults(ax: Any, faults: pd.DataFrame, leaders: pd.DataFrame, t0: float, window: tuple[float, float]) -> None:
    """Faults (spans or lines, labelled) and established leaders (dashed, labelled), those in
    ``window`` (seconds or ticks since the run's start) labelled."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    t_end = window[1]

    spans = instants = 0
    marks: list[tuple[float, str]] = []
    for f in faults.sort_values("start").itertuples():
        start = float(f.start) - t0
        end = t_end if _nan(f.end) else float(f.end) - t0
        if end > start:
            spans += 1
            ax.axvspan(start, end, color=FAULT_COLOR, alpha=0.13, lw=0)
        else:
            instants += 1
            ax.axvline(start, color=FAULT_COLOR, lw=0.9, alpha=0.8)
        marks.append((start, f"{f.fault} {f.target}"))
    _labels(ax, marks, 0.98, "darkred", window, "top")
    lmarks = []
    for e in leaders.sort_values("t").itertuples():
        t = float(e.t) - t0
        ax.axvline(t, color=LEADER_COLOR, ls="--", lw=0.9)
        lmarks.append((t, f"leader {e.leader} (epoch {e.epoch})"))
    _labels(ax, lmarks, 0.02, "darkgreen", window, "bottom")
    handles: list[Any] = []
    if spans:
        handles.append(Patch(color=FAULT_COLOR, alpha=0.13, label="fault (interval)"))
    if instants:
        handles.append(Line2D([], [], color=FAULT_COLOR, lw=0.9, label="fault (instant)"))
    if len(leaders):
        handles.append(Line2D([], [], color=LEADER_COLOR, ls="--", lw=0.9, label="leader established"))
    ax.extra_handles = handles


def _legend(ax: Any) -> None:
    handles, _ = ax.get_legend_handles_labels()
    handles += getattr(ax, "extra_handles", [])
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), borderaxespad=0.2)


def _down_intervals(uptime: pd.DataFrame, replica: int) -> list[tuple[float, float]]:
    """Between one incarnation's last row and the next one's first: the replica was down."""
    inc = uptime[uptime["replica"] == replica].sort_values("inc")
    spans = []
    prev_end = None
    for r in inc.itertuples():
        if prev_end is not None and float(r.start) > prev_end:
            spans.append((prev_end, float(r.start)))
        prev_end = float(r.end)
    return spans


def _with_gaps(times: pd.Series, values: pd.Series, bucket: float,
               down: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Points on the full bucket grid: NaN (a break in the line) for a bucket with no data or
    one that overlaps a downtime, so no straight line is drawn through either."""
    have = dict(zip((round(float(t) / bucket) for t in times), (float(v) for v in values), strict=True))
    if not have:
        return [], []
    xs, ys = [], []
    for k in range(min(have), max(have) + 1):
        t = k * bucket
        hidden = any(a < t + bucket and t < b for a, b in down)
        xs.append(t)
        ys.append(math.nan if hidden or k not in have else have[k])
    return xs, ys


def _figure(width: float = 10.0, height: float = 4.0) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots()


def plot(frames: dict[str, Any], bucket: float, out_dir: str | PathLike[str]) -> list[Path]:
    """``throughput``, ``latency``, ``lag`` and ``recovery`` PNGs per run (suffixed ``-<run>``
    when the tables hold several runs). ``frames``: the pandas tables of ``metrics.collect``."""
    out = Path(out_dir)
    runs = sorted(set(frames["throughput"]["run"]) | set(frames["lag_over_time"]["run"]))
    written: list[Path] = []
    for run in runs:
        part = {k: v[v["run"] == run] for k, v in frames.items()}
        suffix = "" if len(runs) == 1 else f"-{run}"
        written += _plot_run(run, part, frames.get("runs", part.get("runs")), bucket, out, suffix)
    log.info("wrote %d plots to %s", len(written), out)
    return written


def _plot_run(run: str, part: dict[str, pd.DataFrame], runs: pd.DataFrame | None, bucket: float, out: Path,
              suffix: str) -> list[Path]:
    import pandas as pd

    t0, unit, sim = _unit(runs if runs is not None else pd.DataFrame(columns=["run"]), run)
    per = "tick" if sim else "s"
    tp = part["throughput"]
    t_end = float(tp["bucket_start"].max() + bucket) - t0 if len(tp) else 0.0
    if runs is not None:  # the whole run: faults and leaders after the last commit are shown too
        t_end = max(t_end, _length(runs, run) or 0.0)
    xlabel = f"time since run start ({unit})"
    faults, leaders = part["faults"], part["leader_changes"]
    window = (_active_from(tp, faults, t0, t_end, bucket), max(t_end, bucket))
    written = []

    fig, ax = _figure()
    x = tp["bucket_start"] - t0
    ax.step(x, tp["commits"] / bucket, where="post", label="commits", lw=1.2)
    if tp["writes_ok"].any():
        ax.step(x, tp["writes_ok"] / bucket, where="post", label="client writes ok", alpha=0.75, lw=1)
    if tp["reads_ok"].any():
        ax.step(x, tp["reads_ok"] / bucket, where="post", label="client reads ok", alpha=0.75, lw=1)
    _faults(ax, faults, leaders, t0, window)
    ax.set(title=f"Throughput, {run} ({bucket:g} {unit} buckets)", xlabel=xlabel, ylabel=f"operations / {per}",
           xlim=window)
    ax.set_ylim(bottom=0)
    _legend(ax)
    written.append(out / f"throughput{suffix}.png")
    fig.savefig(written[-1], dpi=DPI)

    fig, ax = _figure()
    lat = part["latency_over_time"]
    scale, lunit = (1.0, "ticks") if sim else (1000.0, "ms")
    for cls, g in lat.groupby("cls"):
        xs, p50 = _with_gaps(g["bucket_start"] - t0, g["p50"] * scale, bucket, [])
        _, p99 = _with_gaps(g["bucket_start"] - t0, g["p99"] * scale, bucket, [])
        line = ax.plot(xs, p50, marker=".", ms=3, lw=1, label=f"{cls} p50")[0]
        ax.plot(xs, p99, marker=".", ms=3, lw=1, ls=":", color=line.get_color(), label=f"{cls} p99")
    if len(lat) and (lat["p50"] > 0).all():
        ax.set_yscale("log")
    _faults(ax, faults, leaders, t0, window)
    ax.set(title=f"Client latency by completion time, {run}", xlabel=xlabel, ylabel=f"latency ({lunit})",
           xlim=window)
    _legend(ax)
    written.append(out / f"latency{suffix}.png")
    fig.savefig(written[-1], dpi=DPI)

    fig, ax = _figure()
    lot = part["lag_over_time"]
    uptime = part.get("uptime")
    for replica, g in lot.groupby("replica"):
        down = [(a - t0, b - t0) for a, b in _down_intervals(uptime, int(replica))] if uptime is not None else []
        xs, ys = _with_gaps(g["bucket_start"] - t0, g["mean_lag"] * scale, bucket, down)
        line = ax.plot(xs, ys, lw=1.1, marker=".", ms=2.5, label=f"replica {replica}")[0]
        for i, (a, b) in enumerate(down):  # its downtime, as a bar under the data
            ax.axvspan(a, b, ymin=0, ymax=0.025, color=line.get_color(), alpha=0.9, lw=0,
                       label=f"replica {replica} down" if i == 0 else None)
    _faults(ax, faults, leaders, t0, window)
    ax.set(title=f"Delivery lag behind the first delivery anywhere (mean per bucket), {run}", xlabel=xlabel,
           ylabel=f"lag ({lunit}; log above 1)", xlim=window)
    # A restarted replica catching up lags by seconds, a live one by milliseconds: both must show.
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(bottom=0)
    _legend(ax)
    written.append(out / f"lag{suffix}.png")
    fig.savefig(written[-1], dpi=DPI)

    written.append(_plot_recovery(run, part["recovery"], t0, sim, out / f"recovery{suffix}.png"))
    return written


def _plot_recovery(run: str, rec: pd.DataFrame, t0: float, sim: bool, path: Path) -> Path:
    """Per fault: how long until a leader was established and until the first commit after it."""
    scale, unit = (1.0, "ticks") if sim else (1000.0, "ms")
    rows = rec.sort_values("start")
    rows = rows[~(rows["to_established"].isna() & rows["to_first_commit"].isna())]
    fig, ax = _figure(10.0, max(2.2, 0.32 * len(rows) + 1.4))
    if not len(rows):
        ax.text(0.5, 0.5, "no fault in this run was followed by a commit", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
    else:
        ys = list(range(len(rows)))
        t_unit = "ticks" if sim else "s"
        labels = [f"{r.fault} {r.target} at {float(r.start) - t0:.1f} {t_unit}" for r in rows.itertuples()]
        est = (rows["to_established"] * scale).fillna(0.0)
        first = (rows["to_first_commit"] * scale).fillna(0.0)
        ax.barh([y + 0.2 for y in ys], est, height=0.4, color=LEADER_COLOR, label="until a leader was established")
        ax.barh([y - 0.2 for y in ys], first, height=0.4, color="tab:blue", label="until the first commit")
        for y, e, c in zip(ys, rows["to_established"], rows["to_first_commit"], strict=True):
            for dy, v, what in ((0.2, e, "no new leader"), (-0.2, c, "no commit")):
                if _nan(v):
                    ax.annotate(what, (0, y + dy), xytext=(3, 0), textcoords="offset points", va="center",
                                fontsize=6.5, color="grey")
        ax.set_yticks(ys, labels, fontsize=7)
        ax.invert_yaxis()
        ax.set(title=f"Recovery after each fault, {run}", xlabel=f"time from the fault's start ({unit})")
        ax.set_xlim(left=0)
        ax.legend(fontsize=7, loc="lower right")
    fig.savefig(path, dpi=DPI)
    return path


def _read(analysis: Path, name: str) -> pd.DataFrame:
    import pandas as pd

    p = analysis / f"{name}.parquet"
    return pd.read_parquet(p) if p.exists() else pd.DataFrame()


def compare(analyses: list[str | PathLike[str]], out: str | PathLike[str], labels: list[str] | None = None) -> Path:
    """One figure comparing several checked runs (their ``analysis`` directories, as ``zabray
    check`` writes them): throughput over time since each run's start, client latency
    percentiles, and recovery times per fault. ``labels`` name the analyses (default: the run
    ids in them). Returns the PNG's path."""
    import pandas as pd
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13, 8.5), layout="constrained")
    gs = fig.add_gridspec(2, 2)
    ax_tp = fig.add_subplot(gs[0, :])
    ax_lat = fig.add_subplot(gs[1, 0])
    ax_rec = fig.add_subplot(gs[1, 1])
    lat_rows, rec_rows = [], []
    unit = "s"
    for i, a in enumerate(map(Path, analyses)):
        runs = _read(a, "runs")
        tp = _read(a, "throughput")
        for run in sorted(set(tp["run"])) if len(tp) else []:
            t0, unit, sim = _unit(runs, run)
            label = labels[i] if labels and len(set(tp["run"])) == 1 else str(run)
            g = tp[tp["run"] == run]
            bucket = float(g["bucket"].iloc[0])
            ax_tp.step(g["bucket_start"] - t0, g["commits"] / bucket, where="post", lw=1.1, label=label)
            lat = _read(a, "latency")
            for r in lat[(lat["run"] == run)].itertuples() if len(lat) else []:
                lat_rows.append((label, str(r.op), float(r.p50), float(r.p99)))
            rec = _read(a, "recovery")
            for r in rec[(rec["run"] == run)].itertuples() if len(rec) else []:
                if not _nan(r.to_first_commit):
                    rec_rows.append((label, float(r.to_first_commit)))
    per = "tick" if unit == "ticks" else "s"
    ax_tp.set(title="Commits over time", xlabel=f"time since run start ({unit})", ylabel=f"commits / {per}")
    ax_tp.set_xlim(left=0)
    ax_tp.set_ylim(bottom=0)
    ax_tp.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))

    scale, lunit = (1.0, "ticks") if unit == "ticks" else (1000.0, "ms")
    if lat_rows:
        df = pd.DataFrame(lat_rows, columns=["run", "op", "p50", "p99"])
        keys = [f"{r}\n{o}" for r, o in zip(df["run"], df["op"], strict=True)]
        xs = list(range(len(df)))
        ax_lat.bar([x - 0.2 for x in xs], df["p50"] * scale, width=0.4, label="p50")
        ax_lat.bar([x + 0.2 for x in xs], df["p99"] * scale, width=0.4, label="p99")
        ax_lat.set_xticks(xs, keys, fontsize=7)
        ax_lat.legend(fontsize=8)
    ax_lat.set(title="Client latency (ok operations)", ylabel=f"latency ({lunit})")

    if rec_rows:
        df = pd.DataFrame(rec_rows, columns=["run", "t"])
        names = list(dict.fromkeys(df["run"]))
        data = [df[df["run"] == n]["t"] * scale for n in names]
        ax_rec.boxplot(data, showfliers=False)
        ax_rec.set_xticks(range(1, len(names) + 1), names, fontsize=7)
        for i, d in enumerate(data, start=1):  # every fault as a point over its run's box
            ax_rec.plot([i] * len(d), d, "o", ms=3, alpha=0.6, color="tab:blue")
    else:
        ax_rec.text(0.5, 0.5, "no faults", ha="center", va="center", transform=ax_rec.transAxes)
    ax_rec.set(title="Time from each fault to the first commit after it", ylabel=f"time ({lunit})")
    ax_rec.set_ylim(bottom=0)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    return path
