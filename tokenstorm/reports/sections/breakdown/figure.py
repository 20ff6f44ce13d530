"""The "Where the time went" figure: per scope (or sweep level, capacity step) one bar of the client's mean TTFT
and one of its mean E2E, each stacked from the parts that add up to it over the same requests — overhead, queue,
prefill, then decode and the tail (:class:`~tokenstorm.reports.judging.breakdown.Split`). A part is labelled in its
segment
where the segment is wide enough; the bar's total is written after it. A negative part (a tail whose last token
came sooner after the first than the server's decode took: the first was read late) is drawn hatched, back over
the parts before it, so the bar still ends at the total."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tokenstorm.reports.judging.breakdown import Split
from tokenstorm.reports.judging.formats import ms
from tokenstorm.reports.render.plots import MIN_FONT_PT, figure_png, new_figure, report_style

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["PART_COLOURS", "split_png"]

#: overhead, queue, prefill, decode, tail — the table's swatches use the same colours
PART_COLOURS = ("#8c8c8c", "#d95f02", "#1b9e77", "#7570b3", "#e7c14a")
_NAMES = ("overhead", "queue", "prefill", "decode", "tail")


def _bars(ax: Axes, labels: list[str], parts: list[tuple[float, ...] | None], totals: list[float | None]) -> None:
    """Horizontal stacked bars, the first label on top; a row without parts is left empty and says so."""
    y = np.arange(len(labels))[::-1]
    reach = [max(float(np.cumsum(s).max()), t) for s, t in zip(parts, totals, strict=True) if s and t is not None]
    top = max(reach, default=1.0) or 1.0
    for pos, stack, total in zip(y, parts, totals, strict=True):
        if stack is None or total is None:
            ax.text(0, pos, "  no server timing of the decode", va="center", fontsize=MIN_FONT_PT, color="#556")
            continue
        left, right = 0.0, 0.0
        for i, width in enumerate(stack):
            if width >= 0:
                ax.barh(pos, width, left=left, color=PART_COLOURS[i], height=0.62, edgecolor="white")
            else:  # taken back from the parts before it (a tail read early, an overhead under 0): hatched over them
                ax.barh(pos, width, left=left, color="none", height=0.62, edgecolor=PART_COLOURS[i], hatch="///")
            if abs(width) >= 0.09 * top:
                ax.text(left + width / 2, pos, ms(width), ha="center", va="center", fontsize=MIN_FONT_PT)
            left += width
            right = max(right, left)
        if right - total > 0.002 * top:  # a part taken back: the total marked where the bar truly ends
            ax.plot([total, total], [pos - 0.36, pos + 0.36], color="#1d2430", linewidth=2)
        ax.text(right + 0.01 * top, pos, f"{ms(total)} ms", va="center", fontsize=MIN_FONT_PT)
    ax.set_yticks(y, labels)
    lowest = min((float(np.cumsum(s).min()) for s in parts if s), default=0.0)  # a negative tail or overhead
    ax.set_xlim(min(0.0, lowest), top * 1.16)
    ax.set_xlabel("mean over the requests the server timed (ms)")
    ax.grid(axis="y", visible=False)


def split_png(labels: list[str], splits: list[Split]) -> str:
    """Two panels, TTFT (overhead, queue, prefill) and E2E (and decode, tail), one row per ``labels``."""
    height = 1.6 + 0.42 * len(labels)
    fig, axes = new_figure(1, 2, height)
    from matplotlib.patches import Patch  # loaded by new_figure (render.plots.pyplot)

    with report_style():
        ttft_ax, e2e_ax = axes[0]
        _bars(ttft_ax, labels, [s.ttft_parts_ms for s in splits], [s.ttft_ms for s in splits])
        ttft_ax.set_title("TTFT = overhead + queue + prefill")
        _bars(e2e_ax, labels, [s.e2e_parts_ms for s in splits], [s.e2e_ms for s in splits])
        e2e_ax.set_title("E2E = TTFT's parts + decode + tail")
        handles = [Patch(color=c, label=n) for c, n in zip(PART_COLOURS, _NAMES, strict=True)]
        fig.legend(handles=handles, loc="outside right upper", fontsize=MIN_FONT_PT, frameon=False)
    return figure_png(fig)
