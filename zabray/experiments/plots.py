"""Figures from an experiment's DataFrames (matplotlib). Each returns the ``Figure``; pass
``path`` to also save it as PNG. Axes say what was measured; titles name the paper figure each
one mirrors."""

from __future__ import annotations

import os
from typing import Any

import pandas as pd


def _fig(ncols: int = 1, width: float = 6.0) -> tuple[Any, Any]:
    import matplotlib

    if matplotlib.get_backend().lower() not in ("module://matplotlib_inline.backend_inline", "nbagg", "widget"):
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt.subplots(1, ncols, figsize=(width * ncols, 3.8), squeeze=False)


def _done(fig: Any, path: str | os.PathLike[str] | None, df: pd.DataFrame | None = None) -> Any:
    """Lay out, note where it was measured (host, cores, load; Ray nodes), save if asked."""
    if df is not None and not df.empty and "host" in df:
        r = df.iloc[0]
        fig.text(0.01, 0.005, f"measured on {r.host}: {r.cpus} CPUs, load average {df.load1.min():.0f}-"
                 f"{df.load1.max():.0f}; {r.nodes} Ray node(s), {r.cluster_cpus:g} Ray CPUs", fontsize=7,
                 color="grey")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    if path is not None:
        fig.savefig(path, dpi=80)
    return fig


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
    a.set_yscale("log")
    a.set_title(title or "Throughput vs read percentage (cf. ZooKeeper paper Fig. 5)")
    a.legend()
    a.grid(alpha=0.3)
    return _done(fig, path, df)


def size_scaling(df: pd.DataFrame, path: str | os.PathLike[str] | None = None, title: str = "") -> Any:
    """Zab paper Figs. 6 and 7: throughput and latency against ensemble size, one line per load
    (clients x requests outstanding each)."""
    fig, ax = _fig(2, 5.0)
    for (clients, inflight), g in df.groupby(["clients", "in_flight"]):
        m = g.groupby("voters")[["throughput", "latency_p50_ms", "latency_p99_ms"]].mean()
        load = f"{clients}x{inflight} outstanding"
        ax[0][0].plot(m.index, m["throughput"], marker="o", label=load)
        ax[0][1].plot(m.index, m["latency_p50_ms"], marker="o", label=f"p50, {load}")
        ax[0][1].plot(m.index, m["latency_p99_ms"], marker="x", ls="--", label=f"p99, {load}")
    ax[0][0].set(xlabel="replicas", ylabel="committed writes/s", title=title or "Throughput (cf. Zab Fig. 6)")
    ax[0][1].set(xlabel="replicas", ylabel="latency (ms)", title="Latency (cf. Zab Fig. 7)")
    ax[0][1].set_yscale("log")
    for a in ax[0]:
        a.legend(fontsize=8)
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
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
    return _done(fig, path, df)


def timeline(tl: pd.DataFrame, marks: pd.DataFrame | None = None, path: str | os.PathLike[str] | None = None,
             title: str = "", point: int | None = None, rep: int = 0, df: pd.DataFrame | None = None) -> Any:
    """ZooKeeper paper Fig. 8: throughput over time with each fault and its recovery marked."""
    fig, ax = _fig(1, 9.0)
    a = ax[0][0]
    sel = tl[(tl.rep == rep) & ((tl.point == point) if point is not None else (tl.point == tl.point.min()))]
    a.plot(sel.t, sel.ops_per_s, lw=1.2, label="ok ops/s")
    if "writes_per_s" in sel and sel.reads_per_s.sum() > 0:
        a.plot(sel.t, sel.writes_per_s, lw=0.8, alpha=0.7, label="writes/s")
    if marks is not None and not marks.empty:
        mk = marks[(marks.rep == rep) & (marks.point == (point if point is not None else sel.point.min()))]
        top = float(sel.ops_per_s.max() or 1)
        for i, m in enumerate(mk.itertuples(index=False)):
            a.axvline(m.at, color="red", ls="--", lw=1)
            a.text(m.at, top * (0.95 - 0.1 * (i % 3)), f" {m.what}", color="red", fontsize=8)
            if m.recovered_s == m.recovered_s and m.recovered_s > 0:
                a.axvspan(m.at, m.at + m.recovered_s, color="orange", alpha=0.2)
    a.axvline(0, color="grey", lw=0.8)
    a.set(xlabel="seconds (0 = end of warm-up)", ylabel="operations/s",
          title=title or "Throughput with failures (cf. ZooKeeper paper Fig. 8)")
    a.legend(fontsize=8)
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
    a.legend(fontsize=8)
    a.grid(alpha=0.3)
    return _done(fig, path, df)
