"""The report's interactive charts as data: each chart a :class:`Chart` of :class:`Series`, embedded in the
page as JSON and drawn there by uPlot (vendored in ``assets/``, inlined: the page opens offline).

A chart's series are what its lines show, point for point: hovering a line reads back the value here.
Long series are thinned to at most :data:`MAX_POINTS` points (each bucket keeps its lowest and highest
point, so a spike survives), which keeps a long run's page small. The JSON goes into a ``<script>`` block
with ``<``, ``>``, ``&`` and the two JavaScript line separators escaped: a model or workload name cannot
close the block (:func:`page_json`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from markupsafe import Markup

__all__ = [
    "ASSETS",
    "MAX_POINTS",
    "SIGNIFICANT_DIGITS",
    "UPLOT_VERSION",
    "Band",
    "Chart",
    "Mark",
    "Series",
    "page_json",
    "script_assets",
    "series",
    "thinned",
]

ASSETS = Path(__file__).resolve().parent / "assets"
MAX_POINTS = 2000  # per series: about one point per pixel of the widest chart
SIGNIFICANT_DIGITS = 6
UPLOT_VERSION = "1.6.32"  # assets/uPlot.iife.min.js, from npm (MIT, assets/uPlot.LICENSE.txt)


@dataclass(frozen=True)
class Series:
    """One line: ``y[i]`` at ``x[i]`` (None where there is no value: the line breaks there)."""

    label: str
    x: list[float]
    y: list[float | None]
    dash: bool = False  # p95 lines and second sources
    step: bool = False  # a level held until the next sample (users)


@dataclass(frozen=True)
class Band:
    """A shaded span of the x axis, named in the chart's key (the warm-up)."""

    start: float
    end: float
    label: str


@dataclass(frozen=True)
class Mark:
    """A vertical line at ``at`` (a monitor gap)."""

    at: float
    label: str


@dataclass(frozen=True)
class Chart:
    """One interactive chart. ``kind``: "time" (x in s since the run started; the over-time charts zoom
    and hover together) or "percentile" (x the percentile of the requests, 0–100)."""

    id: str
    title: str
    x_label: str
    y_label: str
    series: list[Series]
    kind: str = "time"
    y_max: float | None = None  # a fixed top (percent scales); None: the data's
    bands: list[Band] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    #: how the legend writes a value, as the page writes that unit (tokenstorm/reports/judging/formats.py): "ms",
    #: "tok_s", "per_s", "percent" (a share already in percent), "count" or "number"
    unit: str = "number"


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def thinned(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, max_points: int = MAX_POINTS
) -> tuple[list[float], list[float | None]]:
    """``(x, y)`` as JSON-ready lists (NaN as None), at most ``max_points`` long: a longer series is cut
    into ``max_points // 2`` buckets of consecutive points, each kept as its lowest and highest point in
    their order (a one-sample spike stays on the chart; a stride would drop it)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.size > max_points:
        keep = []
        for bucket in np.array_split(np.arange(xs.size), max(1, max_points // 2)):
            part = ys[bucket]
            if np.isnan(part).all():
                keep.append(int(bucket[0]))
                continue
            lo, hi = int(bucket[np.nanargmin(part)]), int(bucket[np.nanargmax(part)])
            keep.extend(sorted({lo, hi}))
        xs, ys = xs[keep], ys[keep]
    return [float(v) for v in xs], [_finite(v) for v in ys]


def series(
    label: str, x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, step: bool = False, dash: bool = False
) -> Series:
    """A :class:`Series` of ``x``, ``y`` (thinned to :data:`MAX_POINTS`). A ``step`` line keeps only the
    points where it changes (and its last): a level held for an hour is two points, not 3,600."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if step and ys.size > 2:
        changed = np.concatenate([[True], ys[1:] != ys[:-1]])  # NaN != NaN: kept, which is harmless
        changed[-1] = True
        xs, ys = xs[changed], ys[changed]
    tx, ty = thinned(xs, ys)
    return Series(label, tx, ty, dash=dash, step=step)


def _sig(v: float | None) -> float | None:
    """``v`` to :data:`SIGNIFICANT_DIGITS` (the legend shows fewer; the page stays small)."""
    return None if v is None else float(f"{v:.{SIGNIFICANT_DIGITS}g}")


def _compact(chart: Chart) -> dict[str, Any]:
    """``chart`` as the page carries it: each distinct x array once (``xs``; a series names its own by
    ``xi``) — the lines of one chart mostly share their x (bins, sampling rounds) — x to the millisecond
    (or 0.001 percentile), y to :data:`SIGNIFICANT_DIGITS` significant digits."""
    doc = asdict(chart)
    xs: list[list[float]] = []
    for line in doc["series"]:
        x = [round(v, 3) for v in line.pop("x")]
        if x not in xs:
            xs.append(x)
        line["xi"] = xs.index(x)
        line["y"] = [_sig(v) for v in line["y"]]
    doc["xs"] = xs
    return doc


def page_json(charts: Sequence[Chart]) -> Markup:
    """``charts`` as JSON (:func:`_compact`) safe inside a ``<script type="application/json">`` block: no
    ``<`` (so no ``</script>`` or ``<!--``), ``>`` or ``&`` appears raw, nor U+2028/U+2029; ``JSON.parse``
    reads the escapes back as the characters they stand for."""
    text = json.dumps({"charts": [_compact(c) for c in charts]}, allow_nan=False, separators=(",", ":"))
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return Markup(text)  # escaped above for a script block, where HTML escaping would be wrong


@cache
def script_assets() -> dict[str, Markup]:
    """uPlot's script and style and the report's chart script, to inline into the page (read once)."""
    out = {}
    for key, name in (("uplot_js", "uPlot.iife.min.js"), ("uplot_css", "uPlot.min.css"), ("charts_js", "charts.js")):
        text = (ASSETS / name).read_text(encoding="utf-8")
        if "</script" in text.lower() or "</style" in text.lower():
            raise ValueError(f"{name} would end its inline block early")  # a vendored update must be checked
        out[key] = Markup(text)  # our own vendored files, inlined as they are
    return out
