"""The report's "Over time" charts as data (:class:`~tokenstorm.reports.render.charts.Chart`): users, the load
generators' CPU and timekeeping, latency percentiles, throughput and errors per time bin, and the GPU and
vLLM samples — on one time axis, seconds since the run started.

Request figures are per time bin (:func:`~tokenstorm.reports.render.plots.time_bins`: ~60 bins of whole seconds):
latency by request start, output tokens/s by request end, failures per second by request start. The
warm-up's requests are drawn like the rest (they were measured) under a band named "warm-up (not judged)",
so the start of a run does not read as an outage; monitor gaps are marked where they happened.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from tokenstorm.reports.data.columns import chunks, selected
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.targets import target_labels, target_mask
from tokenstorm.reports.render.charts import Band, Chart, Mark, Series, series
from tokenstorm.reports.render.plots import (
    CACHE_PANEL_TITLE,
    WARMUP_LABEL,
    binned_percentiles,
    cache_series,
    time_bins,
    warmup_end_s,
    warmup_rows,
)
from tokenstorm.workloads.rundir import LoadSample

__all__ = ["LATENCY_QUANTILES", "TIME_LABEL", "cache_charts", "timeseries_charts"]

LATENCY_QUANTILES = (50, 95)
TIME_LABEL = "time since the run started (s)"
_CLOCK_WORDS = {
    "runq_wait_ms_per_s": "run-queue wait (ms/s)",
    "throttled_ms_per_s": "throttled (ms/s)",
    "loop_lag_p99_ms": "loop lag p99 (ms)",
}


def _load_charts(load: list[LoadSample], t0: float) -> list[Chart]:
    """Users, each load generator's CPU and (when sampled) what kept it from reading on time."""
    if not load:
        return []
    t = [s.epoch_s - t0 for s in load]
    users = [series("users", t, [s.users for s in load], step=True)]
    charts = [Chart("users", "Users", "", "users", users, unit="count")]
    cpu: dict[str, tuple[list[float], list[float]]] = {}
    clock: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for sample in load:
        for worker, pct in sample.cpu.items():
            xs, ys = cpu.setdefault(worker, ([], []))
            xs.append(sample.epoch_s - t0)
            ys.append(pct)
        for worker, figures in sample.clock.items():
            for name in _CLOCK_WORDS:
                v = (figures or {}).get(name)
                if v is not None:
                    xs, ys = clock.setdefault((worker, name), ([], []))
                    xs.append(sample.epoch_s - t0)
                    ys.append(float(v))
    charts.append(
        Chart(
            "cpu",
            "Load generator CPU (per worker; 100% = one core)",
            "",
            "CPU (% of a core)",
            [series(w[:12], *pts) for w, pts in sorted(cpu.items())],
        )
    )
    lines = [
        series(f"{worker[:12]} {_CLOCK_WORDS[name]}", *pts, dash=name == "loop_lag_p99_ms")
        for (worker, name), pts in sorted(clock.items())
        if name != "throttled_ms_per_s" or any(pts[1])  # no cgroup limit hit: a flat zero line says nothing
    ]
    if lines:
        charts.append(
            Chart(
                "clock",
                "Load generator timing: run-queue wait and throttling, event-loop lag p99 (dashed)",
                "",
                "ms per s / ms",
                lines,
                unit="ms",
            )
        )
    return charts


def _request_charts(run: RunData, t0: float, shown: np.ndarray, edges: np.ndarray) -> list[Chart]:
    """Latency percentiles by request start, output tokens/s by request end and failures per second, per
    A/B target, over the requests ``shown`` (judged and warm-up; failures: every failed one but cancelled)."""
    df = run.requests
    mids = (edges[:-1] + edges[1:]) / 2
    width_s = np.diff(edges)
    start, e2e = df["start_epoch_s"].to_numpy(dtype=float), df["e2e_s"].to_numpy(dtype=float)  # views
    ok = shown & df["ok"].fillna(False).astype(bool).to_numpy()
    failed = shown & ~df["ok"].fillna(False).astype(bool).to_numpy()
    groups = [(f" {t}", target_mask(run, t)) for t in target_labels(run)] or [("", np.ones(len(df), dtype=bool))]
    tokens = df["output_tokens"].to_numpy()  # as stored (float32 counts): widened a slice at a time
    latency: list[Series] = []
    throughput: list[Series] = []
    errors: list[Series] = []
    for suffix, within in groups:
        sel_all = ok & within
        bins = np.concatenate(
            [
                np.clip(np.digitize(start[p][sel_all[p]] - t0, edges) - 1, 0, len(mids) - 1).astype(np.int16)
                for p in chunks(len(df))
            ]
            or [np.empty(0, np.int16)]
        )
        for name, col in (("TTFT", "ttft_s"), ("E2E", "e2e_s")):
            ms = selected(df, col, sel_all)
            ms *= 1000
            for q, y in binned_percentiles(bins, ms, len(mids), LATENCY_QUANTILES).items():
                latency.append(series(f"{name} p{q:g}{suffix}", mids, y, dash=q != LATENCY_QUANTILES[0]))
        out = np.zeros(len(mids))
        for p in chunks(len(df)):
            sel = sel_all[p]
            end = start[p][sel] + np.nan_to_num(e2e[p][sel]) - t0
            out += np.histogram(end, bins=edges, weights=np.nan_to_num(tokens[p][sel].astype(np.float64)))[0]
        throughput.append(series(f"output tok/s{suffix}", mids, out / width_s))
        bad = failed & within
        if bad.any():
            cats = df["error_category"][bad].astype(str).to_numpy()  # only the failed rows as text
            at = start[bad] - t0
            for cat in sorted(set(cats)):
                n = np.histogram(at[cats == cat], bins=edges)[0]
                errors.append(series(f"{cat}{suffix}", mids, n / width_s))
    charts = [
        Chart(
            "latency",
            "Latency by request start: TTFT and E2E, p50 (solid) and p95 (dashed)",
            "",
            "latency (ms)",
            latency,
            unit="ms",
        ),
        Chart("throughput", "Output tokens/s, by request end", "", "output tokens/s", throughput, unit="tok_s"),
    ]
    if errors:
        charts.append(
            Chart(
                "errors",
                "Failed requests per second, by category and request start",
                "",
                "failures per second",
                errors,
                unit="per_s",
            )
        )
    return charts


def _gpu_charts(run: RunData, t0: float) -> list[Chart]:
    gpu = run.gpu
    if gpu.empty:
        return []
    charts = []
    keys = [c for c in ("host", "gpu") if c in gpu.columns]
    for col, chart_id, title, unit, written in (
        ("util_gpu_pct", "gpu-util", "GPU utilisation", "utilisation (%)", "percent"),
        ("mem_used_mib", "gpu-memory", "GPU memory used", "memory (GiB)", "number"),
        ("power_w", "gpu-power", "GPU power", "power (W)", "number"),
    ):
        if col not in gpu.columns:
            continue
        lines = []
        for key, g in gpu.groupby(keys):
            y = g[col] / 1024 if col == "mem_used_mib" else g[col]
            lines.append(series(f"GPU {key[-1] if isinstance(key, tuple) else key}", g["epoch_s"] - t0, y))
        charts.append(Chart(chart_id, title, "", unit, lines, unit=written))
    return charts


def _server_charts(run: RunData, t0: float) -> list[Chart]:
    server = run.server
    if server.empty:
        return []
    per_target = [(f" {t}", g) for t, g in server.groupby("target") if t] if "target" in server.columns else []
    parts = per_target or [("", server)]  # A/B: each target's server apart
    sched = [
        series(f"vLLM {col}{suffix}", part["epoch_s"] - t0, part[col])
        for suffix, part in parts
        for col in ("running", "waiting")
        if col in part.columns
    ]
    charts = [Chart("vllm-requests", "vLLM requests running / waiting", "", "requests", sched, unit="count")]
    if "kv_cache_usage" in server.columns:
        kv = [series(f"KV cache{suffix}", part["epoch_s"] - t0, part["kv_cache_usage"] * 100) for suffix, part in parts]
        charts.append(Chart("vllm-kv-cache", "vLLM KV-cache usage", "", "KV cache used (%)", kv, unit="percent"))
    return charts


def cache_charts(
    run: RunData, t0: float, edges: np.ndarray, rows: np.ndarray, preemptions: bool = True, prefix: str = ""
) -> list[Chart]:
    """The prefix-cache hit rate per time bin (``edges``) from the records ``rows`` and from /metrics, and
    vLLM's preemptions per second (``preemptions``); none for a source the run does not have. ``prefix``
    keeps the ids apart where a section draws its own (the agent section's)."""
    mids = (edges[:-1] + edges[1:]) / 2
    records, rates, pre = cache_series(run, t0, edges, rows)
    charts = []
    if records or rates:
        lines = [series(f"records{s}", mids, r * 100) for s, r in records.items()]
        lines += [series(f"vLLM /metrics{' ' + k if k else ''}", mids, r * 100, dash=True) for k, r in rates.items()]
        charts.append(
            Chart(
                f"{prefix}prefix-cache",
                CACHE_PANEL_TITLE,
                TIME_LABEL,
                "hit rate (% of prompt tokens)",
                lines,
                y_max=102,
                unit="percent",
            )
        )
    if pre and preemptions:
        lines = [series(f"preemptions{' ' + k if k else ''}", mids, p) for k, p in pre.items()]
        charts.append(
            Chart(
                f"{prefix}preemptions",
                "vLLM preemptions per second",
                TIME_LABEL,
                "preemptions per second",
                lines,
                unit="per_s",
            )
        )
    return charts


def timeseries_charts(run: RunData, t0: float, mask: np.ndarray, warmup_s: float | None = None) -> list[Chart]:
    """The over-time charts, each with the warm-up band and the monitor gaps. ``mask``: the judged
    requests; the warm-up's are drawn too. A line with no value at all (no successful request: no latency)
    is left out, and a chart left with none."""
    df = run.requests
    warm_end = warmup_end_s(run, t0, mask, warmup_s)
    shown = mask | warmup_rows(run, mask)
    ok = shown & df["ok"].fillna(False).astype(bool).to_numpy()
    edges = time_bins(run, t0, ok)
    charts = _load_charts(run.load, t0) + _request_charts(run, t0, shown, edges)
    charts += _gpu_charts(run, t0) + _server_charts(run, t0) + cache_charts(run, t0, edges, ok)
    bands = [Band(0.0, warm_end, WARMUP_LABEL)] if warm_end > 0 else []
    gaps = pd.concat([run.gpu_gaps, run.server_gaps]) if not (run.gpu_gaps.empty and run.server_gaps.empty) else None
    marks = [Mark(float(g) - t0, "monitor gap") for g in gaps["epoch_s"]] if gaps is not None else []
    out = []
    for c in charts:
        lines = [s for s in c.series if any(v is not None for v in s.y)]  # a line with no value draws nothing
        if lines:
            out.append(replace(c, x_label=TIME_LABEL, series=lines, bands=bands, marks=marks))
    return out
