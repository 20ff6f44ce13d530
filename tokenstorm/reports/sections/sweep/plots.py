"""The sweep section's figures: each level's latency percentiles per workload, and its throughput and
goodput, against the load it was *offered* (its configured closed-loop users) — so levels past
saturation spread out to the right instead of piling up at the throughput ceiling — and the latency
again against the requests/s it *achieved* (the classic latency–throughput curve, each point named
by its users, which folds back once more users only queue).

Percentiles from too few requests (:data:`tokenstorm.workloads.rundir.SWEEP_MIN_REQUESTS`) are drawn hollow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tokenstorm.reports.judging.slo import per_request_spec
from tokenstorm.reports.judging.slo_spec import SloSpec, SloTarget
from tokenstorm.reports.render.plots import MIN_FONT_PT, new_figure
from tokenstorm.workloads.rundir import SWEEP_METRICS, SWEEP_MIN_REQUESTS, SWEEP_PERCENTILES, SweepLevel

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

__all__ = ["LOW_SAMPLE_LABEL", "OFFERED_LABEL", "sweep_figures"]

_SLO_METRIC = {"ttft": "ttft_ms", "itl": "itl_ms", "e2e": "e2e_ms"}
_LABELS = {"ttft": "TTFT", "itl": "ITL", "e2e": "E2E"}
_STYLES: dict[int, tuple[str, Any]] = {50: ("o", "-"), 95: ("s", "--"), 99: ("^", ":")}
_COLOURS = {50: "C0", 95: "C1", 99: "C2"}
ROW_HEIGHT_IN = 3.3
OFFERED_LABEL = "offered load (concurrent users)"
ACHIEVED_LABEL = "achieved requests/s"
LOW_SAMPLE_LABEL = (
    "hollow: low sample (" + ", ".join(f"p{p} < {n}" for p, n in SWEEP_MIN_REQUESTS.items()) + " requests)"
)


def sweep_figures(levels: list[SweepLevel], knee: SweepLevel | None, spec: SloSpec) -> tuple[Figure, Figure]:
    """(against offered load, against achieved requests/s) for ``levels`` sorted by users."""
    achieved = _latency_grid(levels, knee, spec, achieved=True)
    _figure_legend(achieved, _legend_handles(knee, per_request_spec(spec).targets, achieved=True))
    return _offered(levels, knee, spec), achieved


def _value(level: SweepLevel, workload: str, metric: str, p: int) -> float:
    value = level.latency_ms.get(workload, {}).get(metric, {}).get(f"p{p}")
    return float("nan") if value is None else float(value)


def _workloads(levels: list[SweepLevel]) -> list[str]:
    return sorted({w for level in levels for w in level.latency_ms}) or [""]


def _offered_axis(ax: Axes) -> None:
    ax.set_xlabel(OFFERED_LABEL)
    ax.set_xlim(left=0)
    from matplotlib.ticker import MaxNLocator  # matplotlib loads when a figure is drawn (render.plots.pyplot)

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # users are whole


def _offered(levels: list[SweepLevel], knee: SweepLevel | None, spec: SloSpec) -> Figure:
    """Row 1: achieved requests/s and goodput, and output tokens/s, by offered users; then the latency grid."""
    fig = _latency_grid(levels, knee, spec, achieved=False, extra_row=True)
    rps_ax, tok_ax, count_ax = fig.axes[:3]  # the extra first row
    users = np.array([level.users for level in levels], dtype=float)
    broke = np.array([not level.held for level in levels])
    rps = np.array([level.requests_per_s for level in levels])
    good = np.array(
        [np.nan if level.goodput_requests_per_s is None else level.goodput_requests_per_s for level in levels]
    )
    rps_ax.plot(users, rps, "o-", color="black", label="achieved req/s", gid="achieved_requests_per_s")
    if not np.isnan(good).all():
        rps_ax.plot(
            users,
            good,
            "s--",
            color="tab:purple",
            gid="goodput_requests_per_s",
            label="goodput req/s (met the per-request TTFT/TPOT/E2E targets)",
        )
    tok_ax.plot(
        users,
        [level.output_tokens_per_s for level in levels],
        "D-",
        color="tab:brown",
        label="output tokens/s",
        gid="output_tokens_per_s",
    )
    for ax, y in ((rps_ax, rps), (tok_ax, np.array([level.output_tokens_per_s for level in levels]))):
        if broke.any():
            ax.plot(users[broke], y[broke], "x", color="red", markersize=10, markeredgewidth=2)
        if knee is not None:
            ax.axvline(knee.users, color="green", linestyle=":", linewidth=1.8)
        _offered_axis(ax)
        ax.set_ylim(bottom=0)
    rps_ax.set_title("Throughput and goodput by offered load")
    rps_ax.set_ylabel("requests/s")
    tok_ax.set_title("Output tokens/s by offered load")
    tok_ax.set_ylabel("output tokens/s")
    for i, w in enumerate(_workloads(levels)):
        counts = [level.latency_requests.get(w, level.requests) for level in levels]
        count_ax.plot(
            users,
            counts,
            "o-",
            color=("C9", "C8", "C7", "C6", "C5")[i % 5],
            label=f"{w or 'all'}: requests",
            gid=f"{w} requests",
        )
    for (p, least), style in zip(SWEEP_MIN_REQUESTS.items(), ("--", ":"), strict=True):
        count_ax.axhline(least, color="0.35", linestyle=style, linewidth=1.2, label=f"p{p} needs ≥ {least}")
    count_ax.set_title("Requests behind each level's percentiles")
    count_ax.set_ylabel("successful judged requests")
    _offered_axis(count_ax)
    count_ax.set_ylim(bottom=0)
    row = [h for ax in (rps_ax, tok_ax, count_ax) for h in ax.get_legend_handles_labels()[0]]
    _figure_legend(fig, [*row, *_legend_handles(knee, per_request_spec(spec).targets, achieved=False)])
    return fig


def _latency_grid(
    levels: list[SweepLevel], knee: SweepLevel | None, spec: SloSpec, *, achieved: bool, extra_row: bool = False
) -> Figure:
    """Per workload (rows): TTFT, ITL and E2E p50/p95/p99 (columns) against offered users or achieved
    requests/s, SLO lines, broken levels crossed, low-sample points hollow."""
    workloads = _workloads(levels)
    rows = len(workloads) + int(extra_row)
    fig, axes = new_figure(rows, 3, ROW_HEIGHT_IN * rows)
    targets = per_request_spec(spec).targets
    x = np.array([level.requests_per_s if achieved else level.users for level in levels], dtype=float)
    broke = np.array([not level.held for level in levels])
    low = [level.low_sample() for level in levels]
    for row, w in zip(axes[int(extra_row) :], workloads, strict=True):
        for ax, name in zip(row, SWEEP_METRICS, strict=True):
            for p in SWEEP_PERCENTILES:
                y = np.array([_value(level, w, name, p) for level in levels], dtype=float)
                # ITL percentiles are over every gap (hundreds a request), not over requests: never low-sample here
                hollow = np.array([name != "itl" and p in flags.get(w, []) for flags in low])
                marker, line = _STYLES[p]
                ax.plot(x, y, linestyle=line, color=_COLOURS[p], label=f"p{p}", gid=f"{w} {name} p{p}")
                ax.plot(x[~hollow], y[~hollow], marker, color=_COLOURS[p], linestyle="none", markersize=6)
                if hollow.any():
                    ax.plot(
                        x[hollow],
                        y[hollow],
                        marker,
                        color=_COLOURS[p],
                        markerfacecolor="white",
                        linestyle="none",
                        markersize=7,
                        gid=f"{w} {name} p{p} low sample",
                    )
                if broke.any():
                    ax.plot(x[broke], y[broke], "x", color="red", markersize=10, markeredgewidth=2)
            if achieved:
                for level, top in zip(levels, (_value(lv, w, name, 99) for lv in levels), strict=True):
                    if top == top:  # not NaN: say which level a point is
                        ax.annotate(
                            f"{level.users}u",
                            (level.requests_per_s, top),
                            fontsize=MIN_FONT_PT,
                            xytext=(4, 4),
                            textcoords="offset points",
                        )
            for t in targets:
                if t.metric == _SLO_METRIC[name] and t.scope in (w, "*", "run"):
                    ax.axhline(t.threshold, color="red", linestyle="--", linewidth=1.2)
            if knee is not None:
                ax.axvline(knee.requests_per_s if achieved else knee.users, color="green", linestyle=":", linewidth=1.8)
            ax.set_title(f"{w + ' ' if w else ''}{_LABELS[name]}")
            if achieved:
                ax.set_xlabel(ACHIEVED_LABEL)
                ax.set_xlim(left=0)
            else:
                _offered_axis(ax)
            ax.set_ylabel(f"{_LABELS[name]} (ms)")
            ax.set_ylim(bottom=0)
    fig.suptitle(
        "Latency by achieved requests/s (each point named by its users)"
        if achieved
        else "By offered load (the level's concurrent users)",
        fontsize=13,
        x=0.01,
        ha="left",
    )
    return fig


def _figure_legend(fig: Figure, handles: Sequence[Artist]) -> None:
    """One legend beside the whole grid (every panel draws the same series): none on the data."""
    fig.legend(
        handles=handles, loc="outside lower center", fontsize=MIN_FONT_PT, frameon=False, ncol=min(4, len(handles))
    )


def _legend_handles(knee: SweepLevel | None, targets: list[SloTarget], achieved: bool) -> list[Line2D]:
    """One legend for the whole grid: every panel draws the same series."""
    from matplotlib.lines import Line2D  # matplotlib loads when a figure is drawn (render.plots.pyplot)

    handles = [
        Line2D([], [], color=_COLOURS[p], linestyle=_STYLES[p][1], marker=_STYLES[p][0], label=f"p{p}")
        for p in SWEEP_PERCENTILES
    ]
    handles.append(
        Line2D([], [], color="0.3", marker="o", markerfacecolor="white", linestyle="none", label=LOW_SAMPLE_LABEL)
    )
    handles.append(Line2D([], [], color="red", marker="x", markeredgewidth=2, linestyle="none", label="broke an SLO"))
    if targets:
        handles.append(Line2D([], [], color="red", linestyle="--", label="SLO target"))
    if knee is not None:
        where = f"{knee.requests_per_s:.3g} req/s" if achieved else f"{knee.users} users"
        handles.append(Line2D([], [], color="green", linestyle=":", label=f"goodput knee: {where}"))
    return handles
