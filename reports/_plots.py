"""Figures for the report (matplotlib, Agg), returned as base64 PNG for a self-contained page."""

from __future__ import annotations

import base64
import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from workloads.rundir import CLIENT_BOUND_CPU_PCT

from ._rundir import RunData
from ._slo import chunks, dropped_nan, selected, workloads_in
from ._targets import target_labels, target_mask

__all__ = ["distribution_png", "timeseries_png"]


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _legend(ax: Axes, ncol: int = 1) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=ncol)


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


def timeseries_png(run: RunData, t0: float, mask: np.ndarray) -> tuple[str, list[str]]:
    """One figure, one shared time axis; returns (png, panel titles)."""
    df = run.requests
    ok = mask & df["ok"].fillna(False).astype(bool).to_numpy()
    start, e2e = df["start_epoch_s"].to_numpy(dtype=float), df["e2e_s"].to_numpy(dtype=float)  # views
    end_span = max((float(np.max(start[part] + np.nan_to_num(e2e[part]))) - t0 for part in chunks(len(df))),
                   default=1.0)  # fmt: skip
    bin_s = max(1.0, round(end_span / 60))
    edges = np.arange(0, end_span + bin_s, bin_s)
    if len(edges) < 2:
        edges = np.array([0.0, bin_s])
    mids = (edges[:-1] + edges[1:]) / 2
    panels: list[tuple[str, Any]] = []

    if run.load:
        load_t = [s.epoch_s - t0 for s in run.load]
        panels.append(("Users", lambda ax: ax.step(load_t, [s.users for s in run.load], where="post")))

        def cpu(ax: Axes) -> None:
            series: dict[str, list[tuple[float, float]]] = {}
            for sample in run.load:
                for worker, pct in sample.cpu.items():
                    series.setdefault(worker, []).append((sample.epoch_s - t0, pct))
            for worker, pts in sorted(series.items()):
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=worker[:12])
            ax.axhline(CLIENT_BOUND_CPU_PCT, color="red", linestyle=":", linewidth=1)
            _legend(ax, ncol=4)

        panels.append((f"Load generator CPU % (per worker; red: client-bound above {CLIENT_BOUND_CPU_PCT:g}%)", cpu))
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
        ax.set_ylabel("ms")
        _legend(ax, ncol=4)

    panels.append(("Latency (ms) by request start", latency))

    def throughput(ax: Axes) -> None:
        for suffix, y in tokens_per_bin.items():
            ax.plot(mids, y / bin_s, label=f"output tok/s{suffix}")
        ax.set_ylabel("tok/s")
        if len(tokens_per_bin) > 1:
            _legend(ax)

    panels.append(("Output tokens/s", throughput))
    gpu = run.gpu
    if not gpu.empty:
        for col, title in (("util_gpu_pct", "GPU utilisation %"), ("mem_used_mib", "GPU memory used (GiB)"),
                           ("power_w", "GPU power (W)")):  # fmt: skip
            if col not in gpu.columns:
                continue

            def draw(ax: Axes, col: str = col) -> None:
                for key, g in gpu.groupby([c for c in ("host", "gpu") if c in gpu.columns]):
                    y = g[col] / 1024 if col == "mem_used_mib" else g[col]
                    ax.plot(g["epoch_s"] - t0, y, label=f"GPU {key[-1] if isinstance(key, tuple) else key}")
                _legend(ax)

            panels.append((title, draw))
    server = run.server
    if not server.empty:
        per_target = [(f" {t}", g) for t, g in server.groupby("target") if t] if "target" in server.columns else []
        parts = per_target or [("", server)]  # A/B: each target's server apart

        def sched(ax: Axes) -> None:
            for suffix, part in parts:
                for col in ("running", "waiting"):
                    if col in part.columns:
                        ax.plot(part["epoch_s"] - t0, part[col], label=f"vLLM {col}{suffix}")
            _legend(ax)

        def kv(ax: Axes) -> None:
            for suffix, part in parts:
                ax.plot(part["epoch_s"] - t0, part["kv_cache_usage"] * 100, label=f"KV cache{suffix}")
            if len(parts) > 1:
                _legend(ax)

        panels.append(("vLLM requests running / waiting", sched))
        if "kv_cache_usage" in server.columns:
            panels.append(("vLLM KV-cache usage %", kv))
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 1.9 * len(panels)), sharex=True, squeeze=False)
    gaps = pd.concat([run.gpu_gaps, run.server_gaps]) if not (run.gpu_gaps.empty and run.server_gaps.empty) else None
    for ax, (title, draw) in zip(axes[:, 0], panels, strict=True):
        draw(ax)
        ax.set_title(title, fontsize=9, loc="left")
        ax.grid(alpha=0.3)
        if gaps is not None and not gaps.empty:
            for g in gaps["epoch_s"]:
                ax.axvline(float(g) - t0, color="red", alpha=0.5, linewidth=1)
    axes[-1, 0].set_xlabel("seconds since the run started")
    return _png(fig), [p[0] for p in panels]


def distribution_png(run: RunData, mask: np.ndarray) -> str:
    """CDFs of TTFT and E2E per workload, and the ITL histogram."""
    df = run.requests
    ok = mask & df["ok"].fillna(False).astype(bool).to_numpy()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    for w in workloads_in(df, ok):
        sel = ok & (df["workload"] == w).to_numpy()
        for ax, col in ((axes[0], "ttft_s"), (axes[1], "e2e_s")):
            v = dropped_nan(selected(df, col, sel))
            v.sort()
            if v.size:
                step = max(1, v.size // 2000)
                ax.plot(v[::step] * 1000, np.arange(0, v.size, step) / max(1, v.size - 1), label=str(w))
    for ax, title in ((axes[0], "TTFT CDF (ms)"), (axes[1], "E2E CDF (ms)")):
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        _legend(ax)
    itl = run.itl_values(ok)
    if itl.size:
        edges, counts = itl.bars(float(itl.percentiles([99.5])[0]) or 1e-6, 60)
        axes[2].stairs(counts, edges * 1000, fill=True)
    axes[2].set_title("ITL histogram (ms, clipped at p99.5)", fontsize=9)
    return _png(fig)
