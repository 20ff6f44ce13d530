"""When a compared figure's change counts: the interval of the change, and the rule that judges it.

A change is a regression only when its whole interval lies beyond the threshold on the worse side (a
latency up by more than ``threshold`` percent, a throughput down by more); better alike on the other side;
*within* the threshold when its whole interval lies inside ±threshold; otherwise (the interval reaches
across the threshold) there is **no significant difference** at that confidence — the samples cannot tell.
A change without an interval (another tool's file; ``--confidence 0``) is judged on its point estimate, as
``reports compare`` always did.

The interval of a change between two runs is of two independent samples
(:func:`tokenstorm.reports.judging.intervals.change_interval_pct`; a rate's, in percentage points, Newcombe's from the
two
shares' Wilson intervals). Two A/B targets of one run were sent the same requests: their latencies are
paired request by request (the same session and step on both) and resampled together
(:mod:`tokenstorm.reports.judging.twins`), which removes the prompts' own spread.
"""

from __future__ import annotations

import math

from tokenstorm.reports.compare.model import RATES
from tokenstorm.reports.judging.intervals import Interval, change_interval_pct

__all__ = ["Change", "change_interval", "judge"]

#: an interval of a change: (low, high) in percent (a rate's in percentage points), None where unbounded
Change = tuple[float | None, float | None]


def change_interval(key: str, base: float, base_ci: Interval, new: float, new_ci: Interval) -> Change:
    """The interval of figure ``key``'s change from ``base`` to ``new``, two independent samples: percent,
    or percentage points for a rate (:data:`tokenstorm.reports.compare.model.RATES`)."""
    if key not in RATES:
        return change_interval_pct(base, base_ci, new, new_ci)
    # Newcombe's hybrid score interval of a difference of two shares, from each one's own interval
    d = (new - base) * 100

    def side(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else math.hypot(a, b) * 100

    low = side(None if new_ci.low is None else new - new_ci.low, None if base_ci.high is None else base_ci.high - base)
    high = side(None if new_ci.high is None else new_ci.high - new, None if base_ci.low is None else base - base_ci.low)
    return (None if low is None else d - low, None if high is None else d + high)


def judge(delta: float | None, change: Change | None, higher_better: bool | None, threshold_pct: float) -> str | None:
    """``"worse"``, ``"better"``, ``"within"`` (±threshold) or ``"unclear"`` (no significant difference: the
    change's interval reaches across the threshold); None for no delta or a figure never judged.
    ``change``: the change's interval; None: judged on ``delta`` alone (never unclear)."""
    if delta is None or higher_better is None:
        return None
    sign = -1.0 if higher_better else 1.0  # a change oriented so that worse is positive
    if change is None:
        worse = sign * delta
        return "worse" if worse > threshold_pct else "better" if worse < -threshold_pct else "within"
    ends = [None if x is None else sign * x for x in change]
    low, high = (ends[0], ends[1]) if sign > 0 else (ends[1], ends[0])
    if low is not None and low > threshold_pct:
        return "worse"
    if high is not None and high < -threshold_pct:
        return "better"
    if low is not None and high is not None and low >= -threshold_pct and high <= threshold_pct:
        return "within"
    return "unclear"
