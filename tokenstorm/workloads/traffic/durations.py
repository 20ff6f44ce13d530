"""Durations as every tokenstorm option takes them: the forms of Locust's ``-t`` (``30``, ``30s``, ``5m``,
``2h``, ``1h30m``, ``1h30m10s``), each number also with a fraction (``2.5``, ``1.5m``).

One parser for all of them, so ``--warmup 5m`` works where ``-t 5m`` does: ``--warmup``, ``--steps``'
seconds, ``--request-timeout``, ``--wait-time`` and the workloads' think times (``N`` or ``LO-HI``)...
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["DURATION_FORMS", "parse_duration", "parse_duration_range"]

#: what a duration may look like, for error messages and help
DURATION_FORMS = "seconds (30, 2.5) or 30s, 5m, 1h30m"

_NUMBER = r"\d+(?:\.\d+)?"
_UNITS = re.compile(rf"(?:(?P<h>{_NUMBER})h)?(?:(?P<m>{_NUMBER})m)?(?:(?P<s>{_NUMBER})s)?")
_SECONDS_PER = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(value: Any) -> float:
    """Seconds in ``value``: a number (seconds), or text in one of :data:`DURATION_FORMS`.

    Raises :class:`ValueError` (``str()``: what a duration looks like) for anything else: a negative
    number, ``nan``, ``5x``, ``1m30`` (Locust refuses it too), an empty text."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration: {DURATION_FORMS}")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"expected a duration: {DURATION_FORMS}")
        return float(value)
    text = str(value).strip()
    if re.fullmatch(_NUMBER, text):
        return float(text)
    match = _UNITS.fullmatch(text)
    if not text or match is None or not any(match.groupdict().values()):
        raise ValueError(f"expected a duration: {DURATION_FORMS}")
    return sum(float(n) * _SECONDS_PER[unit] for unit, n in match.groupdict().items() if n)


def parse_duration_range(value: Any) -> tuple[float, float]:
    """``N`` or ``LO-HI``, each a duration (``1-5``, ``30s-2m``) -> (low, high) seconds; raises
    :class:`ValueError` unless both are durations and ``LO <= HI``."""
    low_text, sep, high_text = str(value).partition("-")
    try:
        low = parse_duration(value if not sep and not isinstance(value, str) else low_text)
        high = parse_duration(high_text) if sep else low
    except ValueError:
        raise ValueError(f"expected a duration or LO-HI, e.g. 1-5 or 30s-2m; a duration is {DURATION_FORMS}") from None
    if high < low:
        raise ValueError("LO-HI: LO must not be above HI")
    return low, high
