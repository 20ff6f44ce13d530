"""Figures for the report's sections (matplotlib, Agg), returned as base64 PNG for a self-contained page,
and the time bins, warm-up and prefix-cache series they share with the interactive charts
(:mod:`tokenstorm.reports.render.timeseries`; the run's over-time and distribution charts are drawn in the browser).

Every figure is drawn for the page's full width: :data:`FIGURE_WIDTH_IN` wide, saved at :data:`DPI`
without cropping (the PNG is exactly ``FIGURE_WIDTH_IN * DPI`` pixels wide), with no text smaller
than :data:`MIN_FONT_PT` — shown 1,130–1,300 px wide that is 12–14 px on screen (a point of text
shows as ``display_px / (FIGURE_WIDTH_IN * 72)`` px whatever the DPI). Every axis names its quantity
and unit, quantities that cannot be negative (users, throughput, latency) have axes from zero, and
legends sit beside the axes, never on the data.

The warm-up is drawn as warm-up: its requests are plotted like the rest (they were measured) under a
grey span labelled :data:`WARMUP_LABEL`, so the start of a run does not read as an outage.
"""

from __future__ import annotations

import base64
import functools
import io
import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from tokenstorm.reports.data.cache import hit_rate_bins, server_cache_bins
from tokenstorm.reports.data.columns import chunks, dropped_nan
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.targets import target_labels, target_mask

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "CACHE_PANEL_TITLE",
    "DPI",
    "FIGURE_WIDTH_IN",
    "MIN_FONT_PT",
    "WARMUP_LABEL",
    "binned_percentiles",
    "cache_panels",
    "cache_series",
    "figure_png",
    "new_figure",
    "pyplot",
    "report_style",
    "side_legend",
    "time_bins",
    "time_panels_png",
    "warmup_end_s",
    "warmup_rows",
]

FIGURE_WIDTH_IN = 14.0
DPI = 100
MIN_FONT_PT = 11.0
PANEL_HEIGHT_IN = 2.7  # one over-time panel
WARMUP_LABEL = "warm-up (not judged)"
_STYLE: dict[Any, Any] = {
    "font.size": MIN_FONT_PT,
    "axes.titlesize": 12.5,
    "axes.labelsize": MIN_FONT_PT,
    "xtick.labelsize": MIN_FONT_PT,
    "ytick.labelsize": MIN_FONT_PT,
    "legend.fontsize": MIN_FONT_PT,
    "axes.titlelocation": "left",
    "axes.grid": True,
    "grid.alpha": 0.3,
}


@functools.cache
def pyplot() -> ModuleType:
    """matplotlib's pyplot on the Agg backend (chosen once), imported when a figure is first drawn: a report with
    none to draw (a plain run's: its charts are drawn in the browser), and a master checking its SLO file, never
    pay its ~0.3 s of CPU."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def report_style() -> AbstractContextManager[Any]:
    """The report's type sizes and grid for the figures drawn inside it."""
    return pyplot().rc_context(_STYLE)  # type: ignore[no-any-return]


def new_figure(rows: int, cols: int, height_in: float, **kw: Any) -> tuple[Figure, np.ndarray]:
    """A full-width figure of ``rows`` × ``cols`` axes (a 2-D array), in the report's type sizes,
    laid out so that titles, labels and side legends fit without overlapping."""
    with report_style():
        fig, axes = pyplot().subplots(
            rows, cols, figsize=(FIGURE_WIDTH_IN, height_in), squeeze=False, layout="constrained", **kw
        )
    return fig, axes


def figure_png(fig: Figure) -> str:
    """``fig`` as base64 PNG, full size (no cropping: the width the page expects), and closed."""
    buf = io.BytesIO()
    with report_style():
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})  # the same bytes for the same run
    pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def side_legend(ax: Axes) -> None:
    """The legend of ``ax`` beside it, on the right (never over the lines), if anything is labelled."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ncol = max(1, math.ceil(len(handles) / 9))  # long lists wrap into columns, not past the panel
        ax.legend(
            handles,
            labels,
            loc="upper left",
            bbox_to_anchor=(1.005, 1.0),
            borderaxespad=0.0,
            fontsize=MIN_FONT_PT,
            ncol=ncol,
            frameon=False,
        )


def time_panels_png(panels: list[tuple[str, Callable[[Axes], None]]]) -> str:
    """Over-time panels stacked on one shared time axis (each drawn, titled, its legend beside it), as PNG."""
    fig, axes = new_figure(len(panels), 1, PANEL_HEIGHT_IN * len(panels), sharex=True)
    with report_style():
        for ax, (title, draw) in zip(axes[:, 0], panels, strict=True):
            draw(ax)
            ax.set_title(title)
            side_legend(ax)
        axes[-1, 0].set(xlim=(0, None), xlabel="time since the run started (s)")
    return figure_png(fig)


def _from_zero(ax: Axes) -> None:
    ax.set_ylim(bottom=0)


def binned_percentiles(bins: np.ndarray, v: np.ndarray, n_bins: int, qs: tuple[float, ...]) -> dict[float, np.ndarray]:
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


def warmup_end_s(run: RunData, t0: float, mask: np.ndarray, warmup_s: float | None = None) -> float:
    """Seconds after ``t0`` the warm-up ended (0: none): the longest of ``--warmup`` (run.json), the
    SLO file's ``warmup_s`` (``warmup_s``, when the caller has it) and the start of the last request
    the report left out as warm-up (outside ``mask``, not cancelled)."""
    ends = [float(run.meta.option("warmup", 0.0) or 0.0), float(warmup_s or 0.0)]
    warm = warmup_rows(run, mask)
    if warm.any():
        ends.append(float(np.max(run.requests["start_epoch_s"].to_numpy(dtype=float)[warm])) - t0)
    return max(0.0, *ends)


def warmup_rows(run: RunData, mask: np.ndarray) -> np.ndarray:
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
    ends = [
        float(np.max(start[part][shown[part]] + np.nan_to_num(e2e[part][shown[part]]))) - t0
        for part in chunks(len(df))
        if shown[part].any()
    ]
    end_span = max(max(ends, default=1.0), 1e-3)
    bin_s = max(1.0, round(end_span / 60))
    edges = np.arange(0, end_span, bin_s)
    if len(edges) > 1 and end_span - edges[-1] < bin_s / 2:
        edges[-1] = end_span  # the remainder joins the bin before it
    else:
        edges = np.append(edges, end_span)
    return edges


CACHE_PANEL_TITLE = (
    "Prefix-cache hit rate: records' cached ÷ prompt tokens (solid), vLLM /metrics hits ÷ queries (dashed)"
)


def cache_series(run: RunData, t0: float, edges: np.ndarray, rows: np.ndarray) -> tuple[dict[str, np.ndarray], ...]:
    """Per time bin (``edges``): the records' prefix-cache hit rate of ``rows`` (per A/B target suffix),
    /metrics' hit rate and vLLM's preemptions per second (per target label); a source the run does not
    have is left out, so each dict may be empty."""
    parts = [(f" {t}", rows & target_mask(run, t)) for t in target_labels(run)] or [("", rows)]  # A/B: apart
    records = {}
    for suffix, sel in parts if len(edges) > 1 else []:
        if (rate := hit_rate_bins(run, t0, edges, sel)) is not None:
            records[suffix] = rate
    server = server_cache_bins(run, t0, edges) if len(edges) > 1 else {}
    rates = {label: rate for label, (rate, _) in server.items() if not np.isnan(rate).all()}
    pre = {label: p for label, (_, p) in server.items() if not np.isnan(p).all()}
    return records, rates, pre


def cache_panels(
    run: RunData, t0: float, edges: np.ndarray, rows: np.ndarray, preemptions: bool = True
) -> list[tuple[str, Callable[[Axes], None]]]:
    """The prefix-cache hit rate per time bin (``edges``) from the records ``rows`` and from /metrics, and
    vLLM's preemptions per second (``preemptions``); nothing for a source the run does not have."""
    mids = (edges[:-1] + edges[1:]) / 2
    records, rates, pre = cache_series(run, t0, edges, rows)
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
