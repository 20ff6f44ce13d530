"""The report's agent and prefix-cache sections as data: table rows (``summary.json``'s figures as they are)
and their figures — steps per session, session latency and waiting on the model, tool-call timing (PNG), and
TTFT beside the prefix-cache hit rate over time (interactive charts). The definitions are :mod:`._agent`'s and
:mod:`._cache`'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tokenstorm.reports.data.columns import dropped_nan, selected, workloads_in
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.agent import (
    has_agent_records,
    session_workloads,
    sessions,
    tool_call_latencies,
    tool_call_rows,
)
from tokenstorm.reports.judging.summary import RunSummary
from tokenstorm.reports.judging.targets import target_labels, target_mask
from tokenstorm.reports.render.charts import Chart, series
from tokenstorm.reports.render.plots import (
    MIN_FONT_PT,
    binned_percentiles,
    figure_png,
    new_figure,
    report_style,
    time_bins,
)
from tokenstorm.reports.render.timeseries import TIME_LABEL, cache_charts
from tokenstorm.reports.sections.headline import HeadlineRow, headline_rows

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["AgentView", "agent_view", "cache_rows"]


@dataclass
class AgentView:
    """What the agent section shows."""

    session_rows: list[HeadlineRow]
    tool_rows: list[HeadlineRow]
    png: str  # steps per session, session latency and waiting CDFs, tool-call timing CDFs
    over_time: list[Chart]  # TTFT of the session steps beside the prefix-cache hit rate


def cache_rows(summary: RunSummary) -> list[HeadlineRow]:
    """The prefix-cache table's rows: the run (or each A/B target) with /metrics, then the workloads
    whose records report cached tokens; none when neither source has a figure."""
    rows = [r for r in headline_rows(summary) if r.kind != "workload" or r.block.get("cache_reporting_requests")]
    if not any(r.block.get("prefix_cache_hit_rate") is not None for r in rows):
        return []
    return rows


def agent_view(run: RunData, summary: RunSummary, mask: np.ndarray, t0: float) -> AgentView | None:
    """The agent section of a run with sessions or tool calls (None otherwise)."""
    if not has_agent_records(run):
        return None
    rows = headline_rows(summary)
    session_rows = [r for r in rows if r.block.get("sessions")]
    tool_rows = [r for r in rows if r.block.get("tool_call_requests")]
    return AgentView(session_rows, tool_rows, _distributions_png(run, mask), _over_time(run, mask, t0))


def _groups(run: RunData, mask: np.ndarray) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(label, judged rows, all rows)`` per workload with sessions or tool calls (and A/B target)."""
    df = run.requests
    agentish = session_workloads(df) | tool_call_rows(df)
    labels = target_labels(run)
    scopes = [(f" {t}", target_mask(run, t)) for t in labels] or [("", np.ones(len(df), dtype=bool))]
    out = []
    for suffix, within in scopes:
        for w in workloads_in(df, within & agentish):
            rows = within & np.asarray(df["workload"] == w, dtype=bool)
            out.append((f"{w}{suffix}", mask & rows, rows))
    return out


def _cdf(ax: Axes, values_s: np.ndarray, colour: str, style: str = "-") -> None:
    v = np.sort(dropped_nan(values_s)) * 1000
    if v.size:
        ax.plot(v, np.arange(1, v.size + 1) / v.size, style, color=colour, drawstyle="steps-post")


def _distributions_png(run: RunData, mask: np.ndarray) -> str:
    """Per workload (one colour each): steps per completed session, session latency and waiting on the
    model (dashed), time to the first tool-call delta (dashed) and to the complete call."""
    df = run.requests
    ok_col = df["ok"].fillna(False).astype(bool).to_numpy()
    calls = bool(tool_call_rows(df).any())
    fig, axes_2d = new_figure(1, 3 if calls else 2, 4.5)
    steps_ax, session_ax = axes_2d[0][:2]
    tool_ax = axes_2d[0][2] if calls else None
    with report_style():
        groups = _groups(run, mask)
        found = [sessions(run, judged, rows) for _, judged, rows in groups]
        top = max((int(s.steps.max()) for s in found if s.steps.size), default=1)
        bins = np.arange(0.5, top + 1.5)
        for i, ((label, judged, _rows), s) in enumerate(zip(groups, found, strict=True)):
            colour = f"C{i % 10}"
            steps_ax.plot([], [], color=colour, linewidth=2, label=label)  # the legend: one entry per workload
            if s.steps.size:
                steps_ax.hist(s.steps, bins=bins, histtype="step", linewidth=2, color=colour)
                _cdf(session_ax, s.latency_s, colour)
                _cdf(session_ax, s.waiting_s, colour, "--")
            if tool_ax is not None:
                lat = tool_call_latencies(run, judged & ok_col)
                _cdf(tool_ax, lat["ttft_tool"], colour, "--")
                _cdf(tool_ax, lat["tool_call"], colour)
        steps_ax.set_title("Steps per completed session")
        steps_ax.set_xlabel("steps (requests) in the session")
        steps_ax.set_ylabel("sessions")
        steps_ax.set_ylim(bottom=0)
        session_ax.set_title("Session latency; waiting on model dashed")
        session_ax.set_xlabel("per completed session (ms)")
        if tool_ax is not None:
            tool_ax.set_title("Tool call: first delta dashed, complete")
            tool_ax.set_xlabel("from the request's send (ms)")
        for ax in (session_ax, tool_ax) if tool_ax is not None else (session_ax,):
            ax.set_ylabel("fraction")
            ax.set_ylim(0, 1.02)
            ax.set_xlim(left=0)
        handles, names = steps_ax.get_legend_handles_labels()
        if handles:
            fig.legend(handles, names, loc="outside right upper", fontsize=MIN_FONT_PT, frameon=False)
    return figure_png(fig)


def _over_time(run: RunData, mask: np.ndarray, t0: float) -> list[Chart]:
    """TTFT p50/p95 of the agent requests per time bin (by start), and beside it the prefix-cache hit rate."""
    df = run.requests
    ok = mask & df["ok"].fillna(False).astype(bool).to_numpy()
    groups = [(label, judged & ok) for label, judged, _ in _groups(run, mask)]
    shown = np.zeros(len(df), dtype=bool)
    for _, sel in groups:
        shown |= sel
    edges = time_bins(run, t0, shown if shown.any() else ok)
    mids = (edges[:-1] + edges[1:]) / 2
    start = df["start_epoch_s"].to_numpy(dtype=float)
    lines = []
    for label, sel in groups:
        idx = np.clip(np.digitize(start[sel] - t0, edges) - 1, 0, len(mids) - 1)
        values = selected(df, "ttft_s", sel) * 1000
        for q, y in binned_percentiles(idx, values, len(mids), (50, 95)).items():
            lines.append(series(f"{label} TTFT p{q:g}", mids, y, dash=q == 95))
    title = "TTFT of the session steps, p50 and p95 (dashed)"
    ttft = Chart("agent-ttft", title, TIME_LABEL, "TTFT (ms)", lines, unit="ms")
    return [ttft, *cache_charts(run, t0, edges, shown, preemptions=False, prefix="agent-")]
