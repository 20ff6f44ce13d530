"""The self-contained HTML report (jinja2 with autoescape): the over-time and distribution charts are
interactive, as are the agent and quality sections' (uPlot and their data inlined: the page opens offline);
the other figures are inlined as PNG."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging import formats
from tokenstorm.reports.judging.confidence import run_confidence
from tokenstorm.reports.judging.formats import slo_value
from tokenstorm.reports.judging.quality import CONSISTENCY_METRIC, is_quality_metric
from tokenstorm.reports.judging.slo import SloResult, judged_mask
from tokenstorm.reports.judging.slo_spec import SloSpec
from tokenstorm.reports.judging.summary import PERCENTILES, RunSummary, timing_violations
from tokenstorm.reports.judging.targets import COMPARED
from tokenstorm.reports.judging.verdict_words import ci_text, needed_text, target_verdict, verdict_title
from tokenstorm.reports.render.charts import page_json, script_assets
from tokenstorm.reports.render.distributions import distribution_charts
from tokenstorm.reports.render.templates import page_environment
from tokenstorm.reports.render.timeseries import timeseries_charts
from tokenstorm.reports.sections.agent import agent_view, cache_rows
from tokenstorm.reports.sections.breakdown.view import breakdown_view
from tokenstorm.reports.sections.header import deployment_views, gpu_lines, report_title, target_names
from tokenstorm.reports.sections.headline import (
    HEADLINE_LATENCIES,
    LENGTH_PERCENTILES,
    ab_details,
    accounting_note,
    headline_rows,
    window_note,
)
from tokenstorm.reports.sections.options import option_rows, slo_source
from tokenstorm.reports.sections.quality.view import quality_view
from tokenstorm.reports.sections.sweep.capacity import capacity_view
from tokenstorm.reports.sections.sweep.model import sweep_view

__all__ = ["render_report"]

_HERE = Path(__file__).resolve().parent
# each section's template part lives beside its view (tokenstorm/reports/sections/NAME/)
_ENV = page_environment([_HERE, *(_HERE.parent / "sections" / name for name in ("quality", "sweep", "breakdown"))])
#: the page's number formats, one per unit (tokenstorm/reports/judging/formats.py), as the templates call them
_FORMATS = {
    "num": formats.number,
    "pct": formats.share,
    "count": formats.count,
    "tokens": formats.tokens,
    "ms": formats.ms,
    "per_s": formats.per_s,
    "tok_s": formats.tok_s,
    "by_key": formats.by_key,
}


def render_report(run: RunData, spec: SloSpec, summary: RunSummary) -> str:
    """The report as one HTML string."""
    meta = run.meta
    mask = judged_mask(run, spec)
    t0 = meta.started_epoch_s or (float(run.requests["start_epoch_s"].min()) if len(run.requests) else 0.0)
    over_time = timeseries_charts(run, t0, mask, warmup_s=spec.warmup_s)
    distributions = distribution_charts(run, mask)
    rows = headline_rows(summary)
    levels = {"sweep": bool(summary.sweep), "capacity": bool(summary.capacity)}
    title = verdict_title(summary.verdict, default_check=summary.default_check, **levels)
    agent = agent_view(run, summary, mask, t0)
    quality = quality_view(run, spec, summary, mask, t0)
    sweep = sweep_view(run, spec)
    capacity = capacity_view(run, spec) if summary.capacity is not None else None
    breakdown = breakdown_view(run, summary, mask, t0, sweep, capacity)
    sections = (agent.over_time if agent else []) + (quality.over_time if quality else [])
    sections += breakdown.over_time if breakdown else []
    return _ENV.get_template("report.html.j2").render(
        title=report_title(meta, run.path.name),
        simulated=bool(meta.simulated),
        summary=summary,
        spec_source=slo_source(spec),
        warmup_s=spec.warmup_s,
        percentiles=PERCENTILES,
        metrics=(("ttft", "TTFT"), ("itl", "ITL"), ("tpot", "TPOT"), ("e2el", "E2E")),
        headline=rows,
        headline_latencies=HEADLINE_LATENCIES,
        ci_range=_ci_range,
        confidence_pct=f"{run_confidence(run) * 100:g}",
        length_percentiles=LENGTH_PERCENTILES,
        show_warmup=any(r.block.get("warmup_requests") for r in rows),
        window=window_note(run, mask, t0),
        accounting=accounting_note(run, summary, spec.warmup_s, t0),
        ab_details=ab_details(summary),
        latency_rows=[r for r in rows if r.kind == "workload"],
        throughput_rows=[(r.label, r.block) for r in rows],
        deployments=deployment_views(meta),
        gpus=gpu_lines(meta),
        targets=target_names(meta),
        options=option_rows(meta, run.path, open_loop=summary.overall.get("p99_send_lag_ms") is not None),
        slo_rows=[_slo_row(r) for r in summary.slo_results],
        slo_confidence=next((r.confidence for r in summary.slo_results if r.confidence), 0.0),
        has_gpu=not run.gpu.empty,
        has_server=not run.server.empty,
        over_time=over_time,
        distributions=distributions,
        chart_json=page_json(over_time + distributions + sections),
        **script_assets(),
        metadata=_metadata(run, spec, summary, t0),
        gaps=_monitor_gaps(run, t0),
        workers_lost=_workers_lost(run, t0),
        left_out=meta.left_out,
        fidelity=summary.fidelity,
        fidelity_rows=_fidelity_rows(summary),
        timing_violations=timing_violations(run),
        sweep=sweep,
        capacity=capacity,
        breakdown=breakdown,
        compared=_compared_rows(summary),
        agent=agent,
        cache_rows=cache_rows(summary),
        quality=quality,
        verdict_title=title,
        # the banner's title already says "Default check held": the reason goes on from there
        verdict_reason=summary.reason.removeprefix(title.lower() + ": "),
        target_verdict=functools.partial(target_verdict, default_check=summary.default_check),
        **_FORMATS,
    )


def _metadata(run: RunData, spec: SloSpec, summary: RunSummary, t0: float) -> list[tuple[str, str | None]]:
    """The run's facts at the foot of the page: target, model, when, workers, records, versions, folder."""
    meta = run.meta
    records = len(run.requests)
    counted = f" (run.json counted {meta.records:,})" if meta.records not in (0, records) else ""
    return [
        (
            "targets" if len(target_names(meta)) > 1 else "target",
            ", ".join(f"{label} {url}".strip() for label, url in target_names(meta)),
        ),
        ("model", meta.model),
        ("simulated", "yes — built-in emulator" if meta.simulated else "no"),
        ("started (UTC)", time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0)) if t0 else "—"),
        ("status", meta.status),
        ("workers", ", ".join(meta.workers_seen) or "—"),
        ("records", accounting_note(run, summary, spec.warmup_s, t0) + counted),
        ("versions", ", ".join(f"{k} {v}" for k, v in sorted(meta.versions.items()))),
        ("run directory", str(run.path)),
    ]


def _monitor_gaps(run: RunData, t0: float) -> list[dict[str, Any]]:
    """Where the GPU and server samples stopped, and why, on the run's clock."""
    gaps = []
    for frame in (run.gpu_gaps, run.server_gaps):
        for _, g in frame.iterrows():
            gaps.append({"source": g.get("source"), "reason": g.get("reason"), "t": float(g["epoch_s"]) - t0})
    return gaps


def _workers_lost(run: RunData, t0: float) -> list[dict[str, str]]:
    """Each worker the master lost: when it was last heard from and when the loss was seen."""

    def clock(epoch: Any) -> str:
        if not epoch:
            return "unknown"
        return time.strftime("%H:%M:%S", time.gmtime(float(epoch))) + f" UTC (+{float(epoch) - t0:.0f} s)"

    return [
        {"id": wid, "last": clock(info.get("last_heard_epoch_s")), "detected": clock(info.get("detected_epoch_s"))}
        for wid, info in run.meta.workers_lost.items()
    ]


def _ci_range(pair: list[float | None] | None) -> str:
    """A headline interval in ms, ``280–310`` (``280–∞``: the sample cannot bound it from above)."""
    if not pair:
        return "—"
    low, high = pair
    return f"{'—' if low is None else formats.ms(low)}–{'∞' if high is None else formats.ms(high)}"


def _slo_row(r: SloResult) -> dict[str, str]:
    """An SLO result as shown. A share (error rate, pass rate, changed probes) reads in percent, its margin
    in percentage points: a relative margin says -100% for 0 errors against 1%, which reads as a failure."""
    if r.metric in ("error_rate", CONSISTENCY_METRIC) or is_quality_metric(r.metric):
        margin = "" if r.measured is None else f"{(r.measured - r.threshold) * 100:+.2f} pp"
    else:
        margin = "" if r.margin_pct is None else f"{r.margin_pct:+.1f}%"
    measured = "—" if r.measured is None else slo_value(r.metric, r.measured)
    target = f"{r.op} {slo_value(r.metric, r.threshold, threshold=True)}"
    interval = ci_text(r, bare=True) if r.confidence else "—"
    result, css = {"held": ("pass", "pass"), "inconclusive": ("inconclusive", "undecided")}.get(
        r.result, ("pass", "pass") if r.passed else ("FAIL", "fail")
    )
    if not r.judged:
        result, css = "not judged", "muted"
    note = "; ".join(x for x in (r.note, needed_text(r).removeprefix(" — ")) if x)
    return {
        "target": target,
        "measured": measured,
        "interval": interval,
        "margin": margin,
        "result": result,
        "css": css,
        "note": note,
    }


def _fidelity_rows(summary: RunSummary) -> list[tuple[str, list[str]]]:
    """Per load generator: run-queue wait, throttling, loop lag p99 and CPU, each "mean (max)"."""
    if summary.fidelity is None:
        return []
    out = []
    for worker, f in sorted(summary.fidelity.per_worker.items()):
        cells = []
        for name in ("runq_wait_ms_per_s", "throttled_ms_per_s", "loop_lag_p99_ms", "cpu_pct"):
            mean, top = f.get(f"mean_{name}"), f.get(f"max_{name}")
            cells.append("—" if mean is None else f"{_figure(mean)} (max {_figure(top)})")
        out.append((worker, cells))
    return out


def _figure(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}" if abs(x) >= 10 else f"{x:.2g}"


def _compared_rows(summary: RunSummary) -> list[tuple[str, str, bool]]:
    """The A/B table's rows: the figures at least one target has."""
    if not summary.targets:
        return []
    blocks = summary.targets["targets"].values()
    return [row for row in COMPARED if any(b.get(row[0]) is not None for b in blocks)]
