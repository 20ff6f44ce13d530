"""How the report writes its numbers: one format per unit, never an exponent.

- milliseconds: whole from 100 up, with thousands separators (``13,480``); one decimal from 10, two below
  (``9.95``) — a latency's last digits below that are noise;
- requests per second: two decimals, one from 100 up (``3.00``, ``1,234.5``);
- tokens per second, token counts: whole from 100 up, with separators; one decimal below;
- shares (error rate, pass rate, hit rate): percent, two decimals (``9.33%``);
- counts: whole, with separators.

A missing figure (``None`` or NaN) is ``—``. The page (tokenstorm/reports/render/html.py), the sweep section and the
verdict's sentence (tokenstorm/reports/judging/summary.py) use these, so one figure reads the same everywhere.
"""

from __future__ import annotations

import math
from typing import Any

from tokenstorm.reports.judging.quality import CONSISTENCY_METRIC, is_quality_metric

__all__ = ["MISSING", "by_key", "count", "ms", "number", "per_s", "share", "slo_value", "tok_s", "tokens"]

MISSING = "—"


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def ms(x: Any) -> str:
    """A latency in milliseconds, without its unit: ``13,480``, ``256``, ``19.3``, ``9.95``."""
    if _missing(x):
        return MISSING
    v = float(x)
    if abs(round(v, 1)) >= 100:  # judged on the figure as rounded: 9.996 is 10.0, not 10.00
        return f"{v:,.0f}"
    return f"{v:.1f}" if abs(round(v, 2)) >= 10 else f"{v:.2f}"


def per_s(x: Any) -> str:
    """Requests (or sessions) per second: ``3.00``, ``14.62``, ``1,234.5``."""
    if _missing(x):
        return MISSING
    v = float(x)
    return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.2f}"


def tok_s(x: Any) -> str:
    """Tokens per second (or any large flow): ``21,529``, ``64.4``."""
    if _missing(x):
        return MISSING
    v = float(x)
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}"


def share(x: Any) -> str:
    """A share of 1 in percent: ``0.00%``, ``9.33%``, ``100.00%``."""
    return MISSING if _missing(x) else f"{float(x):.2%}"


def count(x: Any) -> str:
    """A whole count: ``1,336``."""
    return MISSING if _missing(x) else f"{int(x):,}"


def tokens(x: Any) -> str:
    """A token count or percentile of one, rounded to whole tokens: ``6,972``."""
    return MISSING if _missing(x) else f"{float(x):,.0f}"


def number(x: Any) -> str:
    """A figure of no particular unit (concurrency, steps, GB): one decimal from 100 up with separators, three
    significant digits below, never an exponent: ``5.49``, ``0.785``, ``1,234.5``."""
    if _missing(x):
        return MISSING
    if not isinstance(x, float):
        return f"{x:,}" if isinstance(x, int) else str(x)
    if abs(x) >= 100:
        return f"{x:,.1f}"
    if x != 0 and abs(x) < 0.001:
        return f"{x:.6f}".rstrip("0")
    return f"{x:.3g}"


#: an SLO metric's unit as written after its figure
_UNITS = {
    "gpu_memory_gb": " GB",
    "output_tokens_per_s": " tok/s",
    "output_tokens_per_s_per_gpu": " tok/s per GPU",
    "requests_per_s": " req/s",
    "goodput_requests_per_s": " req/s",
}


def slo_value(metric: str, x: float | None, *, threshold: bool = False) -> str:
    """An SLO's measured figure (or its ``threshold``) in the metric's unit: ``1,348 ms``, ``9.33%``
    (a threshold: ``1%``), ``73.4 GB``, ``14.62 req/s``; ``no data`` when nothing was measured."""
    if x is None or math.isnan(x):
        return "no data"
    if metric == "error_rate" or metric == CONSISTENCY_METRIC or is_quality_metric(metric):
        return f"{x * 100:,g}%" if threshold else share(x)
    if metric.endswith("_ms"):
        return f"{x:,g} ms" if threshold else f"{ms(x)} ms"
    unit = _UNITS.get(metric, "")
    if threshold:
        return f"{x:,g}{unit}"
    if metric in ("requests_per_s", "goodput_requests_per_s"):
        return per_s(x) + unit
    return (tok_s(x) if "tokens" in metric else number(x)) + unit


def by_key(key: str, x: Any) -> str:
    """A summary.json figure in its unit's format, read off its name: ``*_ms`` milliseconds, ``*_rate`` a share,
    ``request_*`` requests/s, ``*_throughput`` tokens/s, anything else :func:`number`."""
    if key.endswith("_ms"):
        return ms(x)
    if key.endswith("_rate"):
        return share(x)
    if key.startswith("request_") or key.endswith("requests_per_s"):
        return per_s(x)
    if key.endswith("throughput") or "tokens_per_s" in key:
        return tok_s(x)
    return number(x)
