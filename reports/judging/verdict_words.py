"""The verdict in words, one source for the report's banner, the console's closing block and summary.json.

A run given no ``--slo`` is judged by the built-in default, error rate ≤ 1% (:data:`DEFAULT_SLO_TEXT`): it
holds no latency target, so its verdict must not read like one ("SLOs held — all 1 SLOs held" did). Here
it is named for what it is: ``default check held: error rate 0.00% ≤ 1% (no latency SLOs given; --slo
FILE)``.
"""

from __future__ import annotations

from typing import Any

from reports.judging.formats import slo_value
from reports.judging.slo import SloResult
from reports.judging.slo_spec import SloSpec, load_slo_spec

__all__ = [
    "DEFAULT_CHECK_HINT",
    "default_check_sentence",
    "is_default_spec",
    "slo_sentence",
    "target_verdict",
    "verdict_title",
]

#: what a run judged by the default check lacks, and how to give it
DEFAULT_CHECK_HINT = "no latency SLOs given; --slo FILE"
_OPS = {"<=": "≤", ">=": "≥"}


def is_default_spec(spec: SloSpec) -> bool:
    """True when ``spec`` is the built-in default (no ``--slo``), read from its source or its targets."""
    if spec.source == "<default>":
        return True

    def key(s: SloSpec) -> list[tuple[str, str, str, float]]:
        return [(t.scope, t.metric, t.stat, t.threshold) for t in s.targets]

    return spec.source == "<text>" and key(spec) == key(load_slo_spec()) and not spec.warmup_s


def default_check_sentence(results: list[SloResult]) -> str:
    """``default check held: error rate 0.00% ≤ 1% (no latency SLOs given; --slo FILE)``, or ``failed``
    with the measured rate above the bound; an A/B run's targets each named (``fp8 0.00%, awq 2.10%``)."""
    held = all(r.passed for r in results)
    if not results:
        return f"default check: nothing judged ({DEFAULT_CHECK_HINT})"
    first = results[0]
    measured = ", ".join(f"{r.target + ' ' if r.target else ''}{slo_value(r.metric, r.measured)}" for r in results)
    op = _OPS.get(first.op, first.op) if held else {"<=": ">", ">=": "<"}.get(first.op, first.op)
    bound = slo_value(first.metric, first.threshold, threshold=True)
    what = first.metric.replace("_", " ")
    return f"default check {'held' if held else 'failed'}: {what} {measured} {op} {bound} ({DEFAULT_CHECK_HINT})"


def slo_sentence(result: SloResult) -> str:
    """One SLO as the verdict names it: ``b chat ttft_ms p50 1,348 ms vs <= 200 ms``."""
    who = f"{result.target} " if result.target else ""
    measured = slo_value(result.metric, result.measured)
    bound = slo_value(result.metric, result.threshold, threshold=True)
    return f"{who}{result.scope} {result.metric} {result.stat} {measured} vs {result.op} {bound}"


#: the banner's words by (kind of run, verdict); a kind without its own words for a verdict takes the plain ones
_TITLES = {
    ("sweep", "passed"): "Goodput knee found",
    ("sweep", "failed"): "No goodput knee",
    ("capacity", "passed"): "Capacity found",
    ("capacity", "failed"): "No step held",
    ("default", "passed"): "Default check held",
    ("default", "failed"): "Default check failed",
    ("", "passed"): "SLOs held",
    ("", "failed"): "SLOs failed",
    ("", "incomplete"): "Run incomplete",
    ("", "unreliable"): "Timing not trustworthy",
}


def verdict_title(verdict: str, *, default_check: bool = False, sweep: bool = False, capacity: bool = False) -> str:
    """The banner's words for ``verdict`` (summary.json's): a sweep's is its knee, a capacity search's the step
    that held, a run judged by the default check says so; otherwise ``SLOs held`` / ``SLOs failed`` / ...."""
    kind = "sweep" if sweep else "capacity" if capacity else "default" if default_check else ""
    return _TITLES.get((kind, verdict)) or _TITLES.get(("", verdict), "Run failed")


def target_verdict(block: dict[str, Any], *, default_check: bool = False) -> str:
    """An A/B target's verdict (its block of summary.json's ``targets``): ``SLOs held``, ``FAIL: 4 of 12
    SLOs``, or with no ``--slo``, ``default check held`` / ``default check FAILED``."""
    held = block.get("verdict") == "passed"
    if default_check:
        return "default check held" if held else "default check FAILED"
    return "SLOs held" if held else f"FAIL: {block.get('slos_failed', 0)} of {block.get('slos', 0)} SLOs"
