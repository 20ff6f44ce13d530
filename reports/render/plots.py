"""Figures for the report (matplotlib, Agg), returned as base64 PNG for a self-contained page.

Every figure is drawn for the page's full width: :data:`FIGURE_WIDTH_IN` wide, saved at :data:`DPI`
without cropping (the PNG is exactly ``FIGURE_WIDTH_IN * DPI`` pixels wide), with no text smaller
than :data:`MIN_FONT_PT` — shown 1,130–1,300 px wide that is 12–14 px on screen (a point of text
shows as ``display_px / (FIGURE_WIDTH_IN * 72)`` px whatever the DPI). Every axis names its quantity
and unit, quantities that cannot be negative (users, throughput, latency) have axes from zero, and
legends sit beside the axes, never on the data.

The warm-up is drawn as warm-up: its requests are plotted like the rest (they were measured) under a
grey span labelled "warm-up (not judged)", so the start of a run does not read as an outage.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from reports.data.cache import hit_rate_bins, server_cache_bins
from reports.data.columns import chunks, dropped_nan, selected, workloads_in
from reports.data.rundir import RunData
from reports.judging.targets import target_labels, target_mask
from workloads.rundir import LoadSample

__all__ = ["CACHE_PANEL_TITLE", "DPI", "FIGURE_WIDTH_IN", "MIN_FONT_PT", "WARMUP_LABEL", "cache_panels",
           "distribution_figure", "distribution_png", "figure_png", "new_figure", "side_legend", "time_bins",
           "timeseries_figure", "timeseries_png", "warmup_end_s"]  # fmt: skip

FIGURE_WIDTH_IN = 14.0
DPI = 100
MIN_FONT_PT = 11.0
PANEL_HEIGHT_IN = 2.7  # one over-time panel
WARMUP_LABEL = "warm-up (not judged)"
_STYLE: dict[Any, Any] = {"font.size": MIN_FONT_PT, "axes.titlesize": 12.5, "axes.labelsize": MIN_FONT_PT,
          "xtick.labelsize": MIN_FONT_PT, "ytick.labelsize": MIN_FONT_PT, "legend.fontsize": MIN_FONT_PT,
          "axes.titlelocation": "left", "axes.grid": True, "grid.alpha": 0.3}  # fmt: skip


def new_figure(rows: int, cols: int, height_in: float, **kw: Any) -> tuple[Figure, np.ndarray]:
    """A full-width figure of ``rows`` × ``cols`` axes (a 2-D array), in the report's type sizes,
    laid out so that titles, labels and side legends fit without overlapping."""
    with plt.rc_context(_STYLE):
        fig, axes = plt.subplots(rows, cols, figsize=(FIGURE_WIDTH_IN, height_in), squeeze=False,
                                 layout="constrained", **kw)  # fmt: skip
    return fig, axes


def figure_png(fig: Figure) -> str:
    """``fig`` as base64 PNG, full size (no cropping: the width the page expects), and closed."""
    buf = io.BytesIO()
    with plt.rc_context(_STYLE):
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})  # the same bytes for the same run
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def side_legend(ax: Axes) -> None:
    """The legend of ``ax`` beside it, on the right (never over the lines), if anything is labelled."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ncol = max(1, math.ceil(len(handles) / 9))  # long lists wrap into columns, not past the panel
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0,
                  fontsize=MIN_FONT_PT, ncol=ncol, frameon=False)  # fmt: skip


def time_panels_png(panels: list[tuple[str, Callable[[Axes], None]]]) -> str:
    """Over-time panels stacked on one shared time axis (each drawn, titled, its legend beside it), as PNG."""
    fig, axes = new_figure(len(panels), 1, PANEL_HEIGHT_IN * len(panels), sharex=True)
    with plt.rc_context(_STYLE):
        for ax, (title, draw) in zip(axes[:, 0], panels, strict=True):
            draw(ax)
            ax.set_title(title)
            side_legend(ax)
        axes[-1, 0].set(xlim=(0, None), xlabel="time since the run started (s)")
    return figure_png(fig)


def _from_zero(ax: Axes) -> None:
    ax.set_ylim(bottom=0)


def _binned(bins: np.ndarray, v: np.ndarray, n_bins: int, qs: tuple[float, ...]) -> dict[float, np.ndarray]:
    """Percentiles ``qs`` of ``v`` per time bin (``bins``: each value's bin index, small ints).

    One pass per bin over a 2-byte index rather than a sort of the whole run: a 20-million-request
    report needs a few bytes per request here, not forty."""
    out = {q: np.full(n_bins, np.nan) for q in qs}
    for b in range(n_bins):
        chunk = dropped_nan(v[bins == b])
        if chunk.size:
            for q, value in zip(qs, np.percentile(chunk, qs, overwrite_input=True), strict=True):
                out[q][b] = value
    return out


def _clock(ax: Axes, load: list[LoadSample], t0: float) -> None:
    """What kept each load generator from reading on time, second by second (LoadSample.clock)."""
    series: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for sample in load:
        for worker, figures in sample.clock.items():
            for name in ("runq_wait_ms_per_s", "throttled_ms_per_s", "loop_lag_p99_ms"):
                v = (figures or {}).get(name)
                if v is not None:
                    series.setdefault((worker, name), []).append((sample.epoch_s - t0, float(v)))
    words = {"runq_wait_ms_per_s": "run-queue wait (ms/s)", "throttled_ms_per_s": "throttled (ms/s)",
             "loop_lag_p99_ms": "loop lag p99 (ms)"}  # fmt: skip
    for (worker, name), pts in sorted(series.items()):
        if name == "throttled_ms_per_s" and not any(v for _, v in pts):
            continue  # no cgroup limit bit: a flat zero line per worker says nothing
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ":" if name == "loop_lag_p99_ms" else "-",
                label=f"{worker[:12]} {words[name]}")  # fmt: skip
    ax.set_ylabel("ms per s / ms")


def warmup_end_s(run: RunData, t0: float, mask: np.ndarray, warmup_s: float | None = None) -> float:
    """Seconds after ``t0`` the warm-up ended (0: none): the longest of ``--warmup`` (run.json), the
    SLO file's ``warmup_s`` (``warmup_s``, when the caller has it) and the start of the last request
    the report left out as warm-up (outside ``mask``, not cancelled)."""
    ends = [float(run.meta.option("warmup", 0.0) or 0.0), float(warmup_s or 0.0)]
    warm = _warmup_rows(run, mask)
    if warm.any():
        ends.append(float(np.max(run.requests["start_epoch_s"].to_numpy(dtype=float)[warm])) - t0)
    return max(0.0, *ends)


def _warmup_rows(run: RunData, mask: np.ndarray) -> np.ndarray:
    """Requests not judged only because they fell in the warm-up: outside ``mask``, not cancelled."""
    df = run.requests
    if df.empty:
        return np.zeros(0, dtype=bool)
    warm: np.ndarray = ~mask & np.asarray(df["error_category"] != "cancelled", dtype=bool)
    return warm


def time_bins(run: RunData, t0: float, shown: np.ndarray) -> np.ndarray:
    """Bin edges (s after ``t0``) over the requests ``shown``: ~60 bins of whole seconds, the last
    ending with the last request (a sliver of a bin would turn one request into a spike of tok/s)."""
    df = run.requests
    start, e2e = df["start_epoch_s"].to_numpy(dtype=float), df["e2e_s"].to_numpy(dtype=float)  # views
    ends = [float(np.max(start[part][shown[part]] + np.nan_to_num(e2e[part][shown[part]]))) - t0
            for part in chunks(len(df)) if shown[part].any()]  # fmt: skip
    end_span = max(max(ends, default=1.0), 1e-3)
    bin_s = max(1.0, round(end_span / 60))
    edges = np.arange(0, end_span, bin_s)
    if len(edges) > 1 and end_span - edges[-1] < bin_s / 2:
        edges[-1] = end_span  # the remainder joins the bin before it
    else:
        edges = np.append(edges, end_span)
    return edges


def timeseries_figure(run: RunData, t0: float, mask: np.ndarray,
                      warmup_s: float | None = None) -> tuple[Figure, list[str]]:  # fmt: skip
    """The over-time figure: one panel per quantity on one shared time axis; returns (figure, panel
    titles). ``mask``: the judged requests; the warm-up's are drawn too, under a labelled span."""
    df = run.requests
    warm_end = warmup_end_s(run, t0, mask, warmup_s)
    ok_col = df["ok"].fillna(False).astype(bool).to_numpy()
    ok = (mask | _warmup_rows(run, mask)) & ok_col
    start, e2e = df["start_epoch_s"].to_numpy(dtype=float), df["e2e_s"].to_numpy(dtype=float)  # views
    edges = time_bins(run, t0, ok)
    mids = (edges[:-1] + edges[1:]) / 2
    width_s = np.diff(edges)
    panels: list[tuple[str, Callable[[Axes], None]]] = []

    if run.load:
        load_t = [s.epoch_s - t0 for s in run.load]

        def users(ax: Axes) -> None:
            ax.step(load_t, [s.users for s in run.load], where="post", label="users")
            ax.set_ylabel("users")

        panels.append(("Users", users))

        def cpu(ax: Axes) -> None:
            series: dict[str, list[tuple[float, float]]] = {}
            for sample in run.load:
                for worker, pct in sample.cpu.items():
                    series.setdefault(worker, []).append((sample.epoch_s - t0, pct))
            for worker, pts in sorted(series.items()):
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=worker[:12])
            ax.set_ylabel("CPU (% of a core)")

        panels.append(("Load generator CPU (per worker; 100% = one core)", cpu))
        if any(s.clock for s in run.load):
            panels.append(("Load generator timing: run-queue wait and throttling, event-loop lag p99 (dotted)",
                           lambda ax: _clock(ax, run.load, t0)))  # fmt: skip
    # Only what the lines need, computed now, in slices: a 20-million-request run must not need
    # a dozen bytes a request more than its table to draw these.
    labels = target_labels(run)  # A/B: each target's lines apart
    groups = [(f" {t}", ok & target_mask(run, t)) for t in labels] or [("", ok)]
    tokens_per_bin: dict[str, np.ndarray] = {}
    tokens = df["output_tokens"].to_numpy(dtype=float)
    lines = {}
    for suffix, sel_all in groups:
        bins = np.concatenate([np.clip(np.digitize(start[part][sel_all[part]] - t0, edges) - 1, 0, len(mids) - 1)
                               .astype(np.int16) for part in chunks(len(df))] or [np.empty(0, np.int16)])  # fmt: skip
        tokens_per_bin[suffix] = np.zeros(len(mids))
        for part in chunks(len(df)):
            sel = sel_all[part]
            end = start[part][sel] + np.nan_to_num(e2e[part][sel]) - t0
            tokens_per_bin[suffix] += np.histogram(end, bins=edges, weights=np.nan_to_num(tokens[part][sel]))[0]
        for name, col in (("TTFT", "ttft_s"), ("E2E", "e2e_s")):
            ms = selected(df, col, sel_all)
            ms *= 1000
            for q, y in _binned(bins, ms, len(mids), (50, 95)).items():
                lines[f"{name} p{q}{suffix}"] = y
            del ms
        del bins

    def latency(ax: Axes) -> None:
        for label, y in lines.items():
            ax.plot(mids, y, "--" if " p95" in label else "-", label=label)
        ax.set_ylabel("latency (ms)")

    panels.append(("Latency by request start: TTFT and E2E, p50 (solid) and p95 (dashed)", latency))

    def throughput(ax: Axes) -> None:
        for suffix, y in tokens_per_bin.items():
            ax.plot(mids, y / width_s, label=f"output tok/s{suffix}")
        ax.set_ylabel("output tokens/s")

    panels.append(("Output tokens/s, by request end", throughput))
    panels += _gpu_panels(run, t0) + _server_panels(run, t0) + cache_panels(run, t0, edges, ok)
    fig, axes = new_figure(len(panels), 1, PANEL_HEIGHT_IN * len(panels), sharex=True)
    gaps = pd.concat([run.gpu_gaps, run.server_gaps]) if not (run.gpu_gaps.empty and run.server_gaps.empty) else None
    for ax, (title, draw) in zip(axes[:, 0], panels, strict=True):
        with plt.rc_context(_STYLE):
            draw(ax)
            ax.set_title(title)
            if warm_end > 0:
                ax.axvspan(0, warm_end, color="0.55", alpha=0.18, linewidth=0, label=WARMUP_LABEL)
            if gaps is not None and not gaps.empty:
                for i, g in enumerate(gaps["epoch_s"]):
                    ax.axvline(float(g) - t0, color="red", alpha=0.5, linewidth=1,
                               label="monitor gap" if i == 0 else None)  # fmt: skip
            _from_zero(ax)
            side_legend(ax)
    axes[-1, 0].set(xlim=(0, None), xlabel="time since the run started (s)")
    return fig, [p[0] for p in panels]


def _gpu_panels(run: RunData, t0: float) -> list[tuple[str, Callable[[Axes], None]]]:
    gpu = run.gpu
    panels: list[tuple[str, Callable[[Axes], None]]] = []
    if gpu.empty:
        return panels
    for col, title, unit in (("util_gpu_pct", "GPU utilisation", "utilisation (%)"),
                             ("mem_used_mib", "GPU memory used", "memory (GiB)"),
                             ("power_w", "GPU power", "power (W)")):  # fmt: skip
        if col not in gpu.columns:
            continue

        def draw(ax: Axes, col: str = col, unit: str = unit) -> None:
            for key, g in gpu.groupby([c for c in ("host", "gpu") if c in gpu.columns]):
                y = g[col] / 1024 if col == "mem_used_mib" else g[col]
                ax.plot(g["epoch_s"] - t0, y, label=f"GPU {key[-1] if isinstance(key, tuple) else key}")
            ax.set_ylabel(unit)

        panels.append((title, draw))
    return panels


def _server_panels(run: RunData, t0: float) -> list[tuple[str, Callable[[Axes], None]]]:
    server = run.server
    if server.empty:
        return []
    per_target = [(f" {t}", g) for t, g in server.groupby("target") if t] if "target" in server.columns else []
    parts = per_target or [("", server)]  # A/B: each target's server apart

    def sched(ax: Axes) -> None:
        for suffix, part in parts:
            for col in ("running", "waiting"):
                if col in part.columns:
                    ax.plot(part["epoch_s"] - t0, part[col], label=f"vLLM {col}{suffix}")
        ax.set_ylabel("requests")

    def kv(ax: Axes) -> None:
        for suffix, part in parts:
            ax.plot(part["epoch_s"] - t0, part["kv_cache_usage"] * 100, label=f"KV cache{suffix}")
        ax.set_ylabel("KV cache used (%)")

    panels: list[tuple[str, Callable[[Axes], None]]] = [("vLLM requests running / waiting", sched)]
    if "kv_cache_usage" in server.columns:
        panels.append(("vLLM KV-cache usage", kv))
    return panels


CACHE_PANEL_TITLE = (
    "Prefix-cache hit rate: records' cached ÷ prompt tokens (solid), vLLM /metrics hits ÷ queries (dashed)"
)


def cache_panels(run: RunData, t0: float, edges: np.ndarray, rows: np.ndarray,
                 preemptions: bool = True) -> list[tuple[str, Callable[[Axes], None]]]:  # fmt: skip
    """The prefix-cache hit rate per time bin (``edges``) from the records ``rows`` and from /metrics, and
    vLLM's preemptions per second (``preemptions``); nothing for a source the run does not have."""
    mids = (edges[:-1] + edges[1:]) / 2
    parts = [(f" {t}", rows & target_mask(run, t)) for t in target_labels(run)] or [("", rows)]  # A/B: apart
    records = {}
    for suffix, sel in parts if len(edges) > 1 else []:
        if (rate := hit_rate_bins(run, t0, edges, sel)) is not None:
            records[suffix] = rate
    server = server_cache_bins(run, t0, edges) if len(edges) > 1 else {}
    rates = {label: rate for label, (rate, _) in server.items() if not np.isnan(rate).all()}
    pre = {label: p for label, (_, p) in server.items() if not np.isnan(p).all()}
    panels: list[tuple[str, Callable[[Axes], None]]] = []
    if records or rates:

        def cache(ax: Axes) -> None:
            for suffix, rate in records.items():
                ax.plot(mids, rate * 100, "-", marker=".", label=f"records{suffix}")
            for label, rate in rates.items():
                ax.plot(mids, rate * 100, "--", marker=".", label=f"vLLM /metrics{' ' + label if label else ''}")
            ax.set_ylabel("hit rate (% of prompt tokens)")
            ax.set_ylim(0, 102)

        panels.append((CACHE_PANEL_TITLE, cache))
    if preemptions and pre:

        def preempted(ax: Axes) -> None:
            for label, p in pre.items():
                ax.plot(mids, p, label=f"preemptions{' ' + label if label else ''}")
            ax.set_ylabel("preemptions per second")

        panels.append(("vLLM preemptions per second", preempted))
    return panels


def timeseries_png(run: RunData, t0: float, mask: np.ndarray, warmup_s: float | None = None) -> tuple[str, list[str]]:
    """:func:`timeseries_figure` as base64 PNG; returns (png, panel titles)."""
    fig, titles = timeseries_figure(run, t0, mask, warmup_s)
    return figure_png(fig), titles


def distribution_figure(run: RunData, mask: np.ndarray) -> Figure:
    """CDFs of TTFT and E2E per workload (and A/B target), and the ITL histogram, of the judged requests."""
    df = run.requests
    ok = mask & df["ok"].fillna(False).astype(bool).to_numpy()
    labels = target_labels(run)
    groups = [(f" {t}", ok & target_mask(run, t)) for t in labels] or [("", ok)]
    fig, axes_2d = new_figure(1, 3, 4.5)
    axes = axes_2d[0]
    with plt.rc_context(_STYLE):
        for suffix, part in groups:
            for w in workloads_in(df, part):
                sel = part & (df["workload"] == w).to_numpy()
                for ax, col in ((axes[0], "ttft_s"), (axes[1], "e2e_s")):
                    v = dropped_nan(selected(df, col, sel))
                    v.sort()
                    if v.size:
                        step = max(1, v.size // 2000)
                        ax.plot(v[::step] * 1000, np.arange(0, v.size, step) / max(1, v.size - 1),
                                label=f"{w}{suffix}")  # fmt: skip
        for ax, name in ((axes[0], "TTFT"), (axes[1], "E2E")):
            ax.set_title(f"{name} CDF")
            ax.set_xlabel(f"{name} (ms)")
            ax.set_ylabel("fraction of requests")
            ax.set_ylim(0, 1.02)
            ax.set_xlim(left=0)
        itl = run.itl_values(ok)
        if itl.size:
            clip_s = float(itl.percentiles([99.5])[0]) or 1e-6
            for suffix, part in groups if len(groups) > 1 else [("", ok)]:
                edges, counts = run.itl_values(part).bars(clip_s, 60) if part.any() else (None, None)
                if edges is not None:
                    axes[2].stairs(counts, edges * 1000, fill=len(groups) == 1, alpha=0.75,
                                   label=f"ITL{suffix}" if suffix else None)  # fmt: skip
        axes[2].set_title("ITL histogram (clipped at p99.5)")
        axes[2].set_xlabel("inter-token gap (ms)")
        axes[2].set_ylabel("gaps (count per bin)")
        axes[2].set_xlim(left=0)
        _from_zero(axes[2])
        # One legend for the three, beside them: the CDFs' workloads share colours, and a legend in a
        # panel would sit on its lines.
        handles, names = axes[0].get_legend_handles_labels()
        more = axes[2].get_legend_handles_labels()
        handles, names = handles + more[0], names + more[1]
        if handles:
            fig.legend(handles, names, loc="outside right upper", fontsize=MIN_FONT_PT, frameon=False,
                       ncol=max(1, math.ceil(len(handles) / 12)))  # fmt: skip
    return fig


def distribution_png(run: RunData, mask: np.ndarray) -> str:
    """:func:`distribution_figure` as base64 PNG."""
    return figure_png(distribution_figure(run, mask))
