"""The verdict in words, one source for the report's banner, the console's closing block and summary.json.

A run given no ``--slo`` is judged by the built-in default, error rate ≤ 1% (:data:`DEFAULT_SLO_TEXT`): it
holds no latency target, so its verdict must not read like one ("SLOs held — all 1 SLOs held" did). Here
it is named for what it is: ``default check held: error rate 0.00% ≤ 1% (no latency SLOs given; --slo
FILE)``.
"""

from __future__ import annotations

from typing import Any

from tokenstorm.reports.judging.formats import slo_value
from tokenstorm.reports.judging.slo import SloResult
from tokenstorm.reports.judging.slo_spec import SloSpec, load_slo_spec

__all__ = [
    "DEFAULT_CHECK_HINT",
    "SLO_VERDICTS",
    "ci_text",
    "default_check_sentence",
    "is_default_spec",
    "needed_text",
    "not_judged",
    "results_word",
    "slo_sentence",
    "slo_verdict",
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
    """``default check held: error rate 0.00% (95% CI 0.00–0.61%) ≤ 1% (no latency SLOs given; --slo FILE)``,
    ``failed`` with the measured rate above the bound, or ``inconclusive`` with what an answer needs; an A/B
    run's targets each named (``fp8 0.00%, awq 2.10%``)."""
    if not results:
        return f"default check: nothing judged ({DEFAULT_CHECK_HINT})"
    word = results_word(results)
    first = results[0]

    def figure(r: SloResult) -> str:
        interval = f" ({ci_text(r)})" if r.confidence else ""
        return f"{r.target + ' ' if r.target else ''}{slo_value(r.metric, r.measured)}{interval}"

    measured = ", ".join(figure(r) for r in results)
    flipped = {"<=": ">", ">=": "<"}.get(first.op, first.op)
    op = {"held": _OPS.get(first.op, first.op), "failed": flipped}.get(word, "vs")
    bound = slo_value(first.metric, first.threshold, threshold=True)
    what = first.metric.replace("_", " ")
    needs = "".join(dict.fromkeys(needed_text(r) for r in results if r.result == "inconclusive"))
    return f"default check {word}: {what} {measured} {op} {bound}{needs} ({DEFAULT_CHECK_HINT})"


def results_word(results: list[SloResult]) -> str:
    """``failed`` when any SLO failed, else ``inconclusive`` when any is, else ``held``."""
    if any(r.result == "failed" for r in results):
        return "failed"
    return "inconclusive" if any(r.result == "inconclusive" for r in results) else "held"


def slo_sentence(result: SloResult) -> str:
    """One SLO as the verdict names it: ``b chat ttft_ms p50 1,348 ms (95% CI 1,290–1,410) vs <= 200 ms``; an
    inconclusive one adds what an answer needs: ``— needs ~2,400 requests (has 310)``."""
    who = f"{result.target} " if result.target else ""
    measured = slo_value(result.metric, result.measured)
    bound = slo_value(result.metric, result.threshold, threshold=True)
    interval = f" ({ci_text(result)})" if result.confidence else ""
    text = f"{who}{result.scope} {result.metric} {result.stat} {measured}{interval} vs {result.op} {bound}"
    return text + needed_text(result)


def ci_text(result: SloResult, *, bare: bool = False) -> str:
    """``95% CI 1,290–1,410`` in the figure's unit (no unit: it follows the figure); an end the sample cannot
    bound: ``95% CI ≥ 1,290`` / ``≤ 1,410``; ``bare``: without ``95% CI`` (a table's column says it); empty
    without an interval."""
    if not result.confidence:
        return ""
    level = "" if bare else f"{result.confidence * 100:g}% CI"

    def value(x: float) -> str:
        return slo_value(result.metric, x).removesuffix(" ms")

    low, high = result.ci_low, result.ci_high
    if low is not None and high is not None:
        first, last = value(low), value(high)
        unit = last[last.rfind(" ") :] if " " in last else ""  # one unit for the range: 1.80–3.47 req/s
        return f"{level} {first.removesuffix(unit)}–{last}".strip()
    if low is not None:
        return f"{level} ≥ {value(low)}".strip()
    return (f"{level} ≤ {value(high)}" if high is not None else f"{level} unbounded").strip()


def needed_text(result: SloResult) -> str:
    """`` — needs ~2,400 requests (has 310)`` for an inconclusive SLO (ITL: gaps; session figures: sessions);
    empty otherwise."""
    if result.result != "inconclusive":
        return ""
    unit = "gaps" if result.metric == "itl_ms" else "sessions" if result.metric.startswith("session") else "requests"
    has = f" (has {result.samples:,})" if result.samples is not None else ""
    if result.needed_requests is None and (result.stat.startswith("p") or result.metric == "error_rate"):
        return f" — the estimate sits on the target: no run length settles it{has}"
    if result.needed_requests is None:  # a rate or a mean: its interval narrows as the run goes on
        return f" — needs a longer run{has}"
    return f" — needs ~{result.needed_requests:,} {unit}{has}"


#: the banner's words by (kind of run, verdict); a kind without its own words for a verdict takes the plain ones
_TITLES = {
    ("sweep", "passed"): "Goodput knee found",
    ("sweep", "failed"): "No goodput knee",
    ("capacity", "passed"): "Capacity found",
    ("capacity", "failed"): "No step held",
    ("default", "passed"): "Default check held",
    ("default", "failed"): "Default check failed",
    ("default", "inconclusive"): "Default check inconclusive",
    ("", "passed"): "SLOs held",
    ("", "failed"): "SLOs failed",
    ("", "inconclusive"): "SLOs inconclusive",
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
    inconclusive = block.get("verdict") == "inconclusive"
    if default_check:
        return (
            "default check held" if held else "default check inconclusive" if inconclusive else "default check FAILED"
        )
    if inconclusive:
        return f"INCONCLUSIVE: {block.get('slos_inconclusive', 0)} of {block.get('slos', 0)} SLOs"
    return "SLOs held" if held else f"FAIL: {block.get('slos_failed', 0)} of {block.get('slos', 0)} SLOs"


#: summary.json's verdict by the SLOs' word
SLO_VERDICTS = {"held": "passed", "failed": "failed", "inconclusive": "inconclusive"}


def slo_verdict(results: list[SloResult]) -> tuple[str, str]:
    """The verdict the SLOs set and its reason: ``all 4 SLOs held``, ``1 of 4 SLOs failed: ...``, or ``2 of 4
    SLOs inconclusive at 95%: ... — needs ~2,400 requests (has 310)`` (nothing failed, something undecided)."""
    judged = sum(r.judged for r in results)
    word = results_word(results)
    if word == "held":
        return "passed", (f"all {judged} SLOs held" if judged else "no SLO judged") + not_judged(results)
    broken = [r for r in results if r.result == "failed"]
    undecided = [r for r in results if r.result == "inconclusive"]
    if word == "failed":
        reason = f"{len(broken)} of {judged} SLOs failed: " + "; ".join(slo_sentence(r) for r in broken[:5])
        if undecided:
            reason += f"; {len(undecided)} inconclusive"
    else:
        level = f" at {undecided[0].confidence * 100:g}%" if undecided[0].confidence else ""
        reason = f"{len(undecided)} of {judged} SLOs inconclusive{level}: " + "; ".join(
            slo_sentence(r) for r in undecided[:5]
        )
    return SLO_VERDICTS[word], reason + not_judged(results)


def not_judged(results: list[SloResult]) -> str:
    """``"; not judged: no GPU sampled (run gpu_memory_gb max <= 58)"`` for the SLOs a run could not judge
    (empty: it judged them all); an A/B run's are named once, not per target."""
    names = list(
        dict.fromkeys(f"{r.scope} {r.metric} {r.stat} {r.op} {r.threshold:g}" for r in results if not r.judged)
    )
    return f"; not judged: no GPU sampled ({', '.join(names)})" if names else ""
