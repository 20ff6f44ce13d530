"""The self-contained HTML report (jinja2 with autoescape; figures inlined as PNG)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jinja2

from workloads.rundir import CLIENT_BOUND_CPU_PCT

from ._plots import distribution_png, timeseries_png
from ._rundir import RunData
from ._slo import SloSpec, judged_mask
from ._summary import PERCENTILES, RunSummary, timing_violations
from ._sweep import sweep_view
from ._targets import COMPARED

__all__ = ["render_report"]

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True,  # server messages, model names and options are untrusted text
    undefined=jinja2.StrictUndefined,
)


def _num(x: Any) -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "—"
    if isinstance(x, float):
        return f"{x:,.1f}" if abs(x) >= 100 else f"{x:.3g}"
    return str(x)


def _pct(x: Any) -> str:
    return "—" if x is None else f"{x:.2%}"


def render_report(run: RunData, spec: SloSpec, summary: RunSummary) -> str:
    """The report as one HTML string."""
    meta = run.meta
    mask = judged_mask(run, spec)
    t0 = meta.started_epoch_s or (float(run.requests["start_epoch_s"].min()) if len(run.requests) else 0.0)
    ts_png, panels = timeseries_png(run, t0, mask)
    options = {k: v for k, v in meta.options.items() if v not in (None, "", False, [])}
    metadata = [
        ("target", meta.target),
        ("model", meta.model),
        ("simulated", "yes — built-in emulator" if meta.simulated else "no"),
        ("started (UTC)", time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0)) if t0 else "—"),
        ("status", meta.status),
        ("workers", ", ".join(meta.workers_seen) or "—"),
        ("records", meta.records or len(run.requests)),
        ("versions", json.dumps(meta.versions, sort_keys=True)),
        ("options", json.dumps(options, sort_keys=True, default=str)),
        ("run directory", str(run.path)),
    ]
    gaps = []
    for frame in (run.gpu_gaps, run.server_gaps):
        for _, g in frame.iterrows():
            gaps.append({"source": g.get("source"), "reason": g.get("reason"), "t": float(g["epoch_s"]) - t0})

    def clock(epoch: Any) -> str:
        if not epoch:
            return "unknown"
        return time.strftime("%H:%M:%S", time.gmtime(float(epoch))) + f" UTC (+{float(epoch) - t0:.0f} s)"

    workers_lost = [
        {"id": wid, "last": clock(info.get("last_heard_epoch_s")), "detected": clock(info.get("detected_epoch_s"))}
        for wid, info in meta.workers_lost.items()
    ]
    throughput_rows = [("all workloads", summary.overall), *summary.per_workload.items()]
    return _ENV.get_template("report.html.j2").render(
        title=f"{meta.model or '?'} @ {meta.target or '?'} — {run.path.name}",
        simulated=bool(meta.simulated),
        summary=summary,
        spec_source=spec.source,
        warmup_s=spec.warmup_s,
        percentiles=PERCENTILES,
        metrics=(("ttft", "TTFT"), ("itl", "ITL"), ("tpot", "TPOT"), ("e2el", "E2E")),
        throughput_rows=throughput_rows,
        panels=panels,
        has_gpu=not run.gpu.empty,
        has_server=not run.server.empty,
        timeseries_png=ts_png,
        distribution_png=distribution_png(run, mask),
        metadata=metadata,
        gaps=gaps,
        workers_lost=workers_lost,
        client_bound=list(meta.client_bound),
        client_bound_pct=f"{CLIENT_BOUND_CPU_PCT:g}",
        timing_violations=timing_violations(run),
        sweep=sweep_view(run, spec),
        compared=_compared_rows(summary),
        num=_num,
        pct=_pct,
    )


def _compared_rows(summary: RunSummary) -> list[tuple[str, str, bool]]:
    """The A/B table's rows: the figures at least one target has."""
    if not summary.targets:
        return []
    blocks = summary.targets["targets"].values()
    return [row for row in COMPARED if any(b.get(row[0]) is not None for b in blocks)]
