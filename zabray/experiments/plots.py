"""Figures from an experiment's DataFrames (matplotlib). Each returns the ``Figure``; pass
``path`` to also save it as PNG. Axes say what was measured; titles name the paper figure each
one mirrors."""

from __future__ import annotations

import os
import textwrap
from typing import Any

import pandas as pd


def _fig(ncols: int = 1, width: float = 6.0) -> tuple[Any, Any]:
    import matplotlib

    if matplotlib.get_backend().lower() not in ("module://matplotlib_inline.backend_inline", "nbagg", "widget"):
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt.subplots(1, ncols, figsize=(width * ncols, 3.8), squeeze=False, layout="constrained")


def _measured(df: pd.DataFrame | None) -> str | None:
    """Where the figure's numbers were measured (host, cores, load; Ray nodes), if known."""
    if df is None or df.empty or "host" not in df:
        return None
    r = df.iloc[0]
    return (f"measured on {r.host}: {r.cpus} CPUs, load average {df.load1.min():.0f}-{df.load1.max():.0f}; "
            f"{r.nodes} Ray node(s), {r.cluster_cpus:g} Ray CPUs")


def _done(fig: Any, path: str | os.PathLike[str] | None, df: pd.DataFrame | None = None) -> Any:
    """Lay out, note where it was measured (host, cores, load; Ray nodes), save if asked."""
    note = _measured(df)
    if note and not fig.legends:  # (a figure legend below the plot carries the note itself)
        # As the figure's own x label, below everything (the constrained layout leaves it room).
        fig.supxlabel(note, fontsize=7, color="grey", x=0.01, ha="left")
    if path is not None:
        fig.savefig(path, dpi=80)
    return fig


LATE_S = 0.25
"""A fault that began this much later than planned is drawn with its planned time too."""


def _counts_on_x(a: Any, values: Any) -> None:
    """An axis of counts (replicas, clients, observers): ticks at the values measured, never
    between them ("2.85 replicas")."""
    a.set_xticks(sorted({int(v) for v in values}))


def _plain_log_y(a: Any) -> None:
    """A log scale labelled with plain numbers (1, 2, 5, 10, 20, ...), not "6x10^0"."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    a.set_yscale("log")
    a.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    a.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,g}"))
    a.yaxis.set_minor_formatter(NullFormatter())


def _load(clients: int, in_flight: int) -> str:
    return f"{clients} client{'s' if clients != 1 else ''} × {in_flight} in flight"


def _legend(a: Any) -> None:
    """Two entries fit inside a panel; more go under it, where they hide no data however small
    the figure is drawn (the constrained layout makes room)."""
    n = len(a.get_legend_handles_labels()[1])
    if n <= 2:
        a.legend(fontsize=8)
    else:
        a.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)


def _mean(df: pd.DataFrame, by: list[str], col: str) -> pd.DataFrame:
    return df.groupby(by, as_index=False)[col].agg(["mean", "min", "max"]).reset_index(drop=True)


def throughput_vs_reads(df: pd.DataFrame, path: str | os.PathLike[str] | None = None, title: str = "") -> Any:
    """ZooKeeper paper Fig. 5: ok ops/s against read percentage, one line per ensemble size."""
    fig, ax = _fig()
    a = ax[0][0]
    for n, g in df.groupby("voters"):
        m = _mean(g, ["read_fraction"], "throughput")
        x = pd.Series(sorted(g.read_fraction.unique())) * 100
        a.errorbar(x, m["mean"], yerr=[m["mean"] - m["min"], m["max"] - m["mean"]], marker="o", capsize=3,
                   label=f"{n} replicas")
    a.set_xlabel("reads (%)")
    a.set_ylabel("operations/s (log scale)")
    _plain_log_y(a)
    a.set_title(title or "Throughput vs read percentage (cf. ZooKeeper paper Fig. 5)")
    _legend(a)
    a.grid(alpha=0.3)
    return _done(fig, path, df)


def size_scaling(df: pd.DataFrame, path: str | os.PathLike[str] | None = None, title: str = "") -> Any:
    """Zab paper Figs. 6 and 7: throughput and latency against ensemble size, one line per load
    (clients x requests outstanding each)."""
    fig, ax = _fig(2, 5.0)
    for (clients, inflight), g in df.groupby(["clients", "in_flight"]):
        m = g.groupby("voters")[["throughput", "latency_p50_ms", "latency_p99_ms"]].mean()
        load = _load(int(clients), int(inflight))
        ax[0][0].plot(m.index, m["throughput"], marker="o", label=load)
        ax[0][1].plot(m.index, m["latency_p50_ms"], marker="o", label=f"p50, {load}")
        ax[0][1].plot(m.index, m["latency_p99_ms"], marker="x", ls="--", label=f"p99, {load}")
    ax[0][0].set(xlabel="replicas", ylabel="committed writes/s", title=title or "Throughput (cf. Zab Fig. 6)")
    ax[0][1].set(xlabel="replicas", ylabel="latency (ms, log scale)", title="Latency (cf. Zab Fig. 7)")
    _plain_log_y(ax[0][1])
    for a in ax[0]:
        _counts_on_x(a, df.voters)
        _legend(a)
        a.grid(alpha=0.3)
    return _done(fig, path, df)


def clients_scaling(df: pd.DataFrame, path: str | os.PathLike[str] | None = None, title: str = "") -> Any:
    """Throughput against the number of client actors, with client and replica CPU: where the
    line flattens while replica CPU is high, the replicas are saturated."""
    fig, ax = _fig(2, 5.0)
    for n, g in df.groupby("voters"):
        m = g.groupby("clients")[["throughput", "client_cpu_max", "replica_cpu_max"]].mean()
        ax[0][0].plot(m.index, m["throughput"], marker="o", label=f"{n} replicas")
        ax[0][1].plot(m.index, m["client_cpu_max"], marker="o", label=f"busiest client, {n} replicas")
        ax[0][1].plot(m.index, m["replica_cpu_max"], marker="x", ls="--", label=f"busiest replica, {n} replicas")
    ax[0][0].set(xlabel="client actors", ylabel="operations/s", title=title or "Adding clients")
    ax[0][1].set(xlabel="client actors", ylabel="CPU (cores)", title="CPU of the busiest process")
    for a in ax[0]:
        _counts_on_x(a, df.clients)
        _legend(a)
        a.grid(alpha=0.3)
    return _done(fig, path, df)


def timeline(tl: pd.DataFrame, marks: pd.DataFrame | None = None, path: str | os.PathLike[str] | None = None,
             title: str = "", point: int | None = None, rep: int = 0, df: pd.DataFrame | None = None,
             width: float = 9.0) -> Any:
    """ZooKeeper paper Fig. 8: throughput over time with each fault and its recovery marked:
    its number above the plot, what it was (and when, and when it was planned if it began
    late) in the legend below."""
    fig, ax = _fig(1, width)
    a = ax[0][0]
    sel = tl[(tl.rep == rep) & ((tl.point == point) if point is not None else (tl.point == tl.point.min()))]
    a.plot(sel.t, sel.ops_per_s, lw=1.2, label="ok ops/s")
    if "writes_per_s" in sel and sel.reads_per_s.sum() > 0:
        a.plot(sel.t, sel.writes_per_s, lw=0.8, alpha=0.7, label="writes/s")
    late = False
    faults: list[str] = []
    if marks is not None and not marks.empty:
        mk = marks[(marks.rep == rep) & (marks.point == (point if point is not None else sel.point.min()))]
        for i, m in enumerate(mk.itertuples(index=False), start=1):
            a.axvline(m.at, color="red", ls="--", lw=1)
            label = f"{i} {m.what} at {m.at:.1f} s"
            planned = getattr(m, "scheduled", None)
            if planned == planned and planned is not None and m.at - planned > LATE_S:
                # The fault began later than planned (a busy driver, a slow control call): say so,
                # and show where it was due.
                a.axvline(planned, color="grey", ls=":", lw=1)
                label += f" (planned {planned:.1f} s)"
                late = True
            # Its number above the plot, never over the data; what it was in the legend below.
            a.annotate(str(i), xy=(m.at, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 2),
                       textcoords="offset points", color="red", fontsize=7, ha="center", va="bottom",
                       annotation_clip=False)
            faults.append(label)
            if m.recovered_s == m.recovered_s and m.recovered_s > 0:
                a.axvspan(m.at, m.at + m.recovered_s, color="orange", alpha=0.2)
    a.axvline(0, color="grey", lw=0.8)
    a.set(xlabel="seconds (0 = end of warm-up)", ylabel="operations/s")
    a.set_title(textwrap.fill(title or "Throughput with failures (cf. ZooKeeper paper Fig. 8)", int(width * 7)),
                pad=12)
    handles, labels = a.get_legend_handles_labels()
    from matplotlib.lines import Line2D

    handles.append(Line2D([], [], color="red", ls="--", lw=1))
    labels.append("a fault began (shaded: until 90% of the rate was back)")
    if late:
        handles.append(Line2D([], [], color="grey", ls=":", lw=1))
        labels.append("when that fault was planned")
    note = _measured(df)
    for f in faults + ([note] if note else []):
        handles.append(Line2D([], [], lw=0))
        labels.append(f)
    # Outside the axes, below: the rate fills the plot, and a legend in it would hide some of it.
    fig.legend(handles, labels, fontsize=7, loc="outside lower center", frameon=False, handlelength=1.5,
               ncol=1 if width < 6 else 2)
    a.grid(alpha=0.3)
    return _done(fig, path, df)


def observers(df: pd.DataFrame, path: str | os.PathLike[str] | None = None, title: str = "") -> Any:
    """Read throughput as observers are added to a fixed voting ensemble."""
    fig, ax = _fig()
    a = ax[0][0]
    for (n, rf), g in df.groupby(["voters", "read_fraction"]):
        m = g.groupby("observers")[["read_throughput", "write_throughput"]].mean()
        a.plot(m.index, m["read_throughput"], marker="o", label=f"reads/s, {n} voters, {rf:.0%} reads")
        if rf < 1:
            a.plot(m.index, m["write_throughput"], marker="x", ls="--", label=f"writes/s, {n} voters")
    a.set(xlabel="observers", ylabel="operations/s", title=title or "Adding observers")
    _counts_on_x(a, df.observers)
    _legend(a)
    a.grid(alpha=0.3)
    return _done(fig, path, df)
