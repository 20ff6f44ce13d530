"""A sweep in ``summary.json`` and its verdict: each level's figures and outcome, the knee, and the sentence
the report and the console lead with."""

from __future__ import annotations

from typing import Any

from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.formats import per_s, tok_s
from tokenstorm.reports.sections.sweep.model import first_untrusted, knee_range_words, read_result
from tokenstorm.workloads.rundir import SweepLevel, knee_span, sweep_knee

__all__ = ["sweep_block", "sweep_verdict"]


def sweep_verdict(block: dict[str, Any]) -> tuple[str, str]:
    """A sweep run's verdict: it passes when it found a goodput knee (a sweep means to break its
    top levels; their pooled SLO figures are no verdict) and fails when not even its lowest level
    met every per-request SLO — it is unreliable when that lowest level's timing was not trustworthy
    (the sweep stopped there: nothing it measured says anything of the server)."""
    levels = block.get("levels") or []
    untrusted = block.get("timing_untrustworthy_at_users")
    stopped = f"stopped: the load generator's timing was not trustworthy at {untrusted} users"
    uncertain = [int(u) for u in block.get("knee_inconclusive_users") or []]
    span = knee_range_words(block.get("knee_users"), uncertain)
    if block.get("knee_users") is None and uncertain:
        return "inconclusive", (
            f"sweep: no goodput knee for sure — {span}: too few requests per level to tell "
            "(a longer --sweep-level-time answers)"
        )
    if block.get("knee_users") is None:
        lowest = min(levels, key=lambda lv: lv["users"], default=None)
        if lowest is not None and not lowest.get("timing_trustworthy", True):
            return "unreliable", f"sweep: no goodput knee — {stopped}, its lowest level"
        which = f", not even {lowest['users']} user(s)" if lowest is not None else " (no level was judged)"
        return "failed", f"sweep: no level met every per-request SLO{which}"
    partial = "" if block.get("complete") else " (the sweep was stopped before its last level: a lower bound)"
    if untrusted is not None:
        partial = f" ({stopped}: a lower bound)"
    knee = f"{block['knee_users']} users, {per_s(block['knee_requests_per_s'])} req/s"
    partial += f" ({span}: the knee may be that high)" if span else ""
    return "passed", (
        f"sweep: goodput knee {knee}, {tok_s(block['knee_output_tokens_per_s'])} output tok/s with every "
        f"per-request SLO met at it and every level below (each level judged on its own requests){partial}"
    )


def sweep_block(run: RunData) -> dict[str, Any] | None:
    """``summary.json``'s ``sweep`` block: the knee and how far the sweep got; ``None``: not a sweep."""
    result = read_result(run)
    if result is None:
        return None
    knee = sweep_knee(result.levels)
    return {
        "knee_users": knee.users if knee else None,
        "knee_requests_per_s": knee.requests_per_s if knee else None,
        "knee_output_tokens_per_s": knee.output_tokens_per_s if knee else None,
        "max_requests_per_s": max((level.requests_per_s for level in result.levels), default=None),
        # the inconclusive levels above the knee, below the first broken one: the knee may be that high
        "knee_inconclusive_users": knee_span([(level.users, level.outcome()) for level in result.levels])[1],
        "levels": [_level_block(level) for level in sorted(result.levels, key=lambda level: level.users)],
        "complete": result.complete,
        "stopped_early": result.stopped_early,
        # the first level whose timing was not trustworthy: the sweep stopped there, the knee is below it
        "timing_untrustworthy_at_users": first_untrusted(result.levels),
    }


def _level_block(level: SweepLevel) -> dict[str, Any]:
    return {
        "users": level.users,
        "kind": level.kind,
        "requests_per_s": level.requests_per_s,
        "output_tokens_per_s": level.output_tokens_per_s,
        "held": level.held,
        "result": level.outcome(),
        "timing_trustworthy": level.timing_trustworthy,
        "timing_reason": level.timing_reason,
        "goodput_requests_per_s": level.goodput_requests_per_s,
        "latency_requests": level.latency_requests,
        "low_sample": {w: [f"p{p}" for p in ps] for w, ps in level.low_sample().items()},
    }
