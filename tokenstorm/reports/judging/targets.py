"""A/B runs (``--targets``): each target judged on its own records, side by side, with deltas
against the first target given (the baseline) and the slower one named.

Twins send every target the same requests at the same offered load, so the targets' figures
compare like with like: same prompts, same output caps, same arrival pattern, same minutes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.formats import ms
from tokenstorm.reports.judging.intervals import DEFAULT_CONFIDENCE
from tokenstorm.reports.judging.slo import SloResult, evaluate, judged_mask
from tokenstorm.reports.judging.slo_spec import SloSpec, load_slo_spec
from tokenstorm.reports.judging.twins import paired_deltas
from tokenstorm.reports.judging.verdict_words import results_word

__all__ = ["COMPARED", "compare_targets", "evaluate_each_target", "target_labels", "target_mask"]

#: (summary key, label, lower is better) — the rows of the side-by-side table
COMPARED = (
    ("median_ttft_ms", "TTFT p50 ms", True),
    ("p95_ttft_ms", "TTFT p95 ms", True),
    ("median_itl_ms", "ITL p50 ms", True),
    ("p99_itl_ms", "ITL p99 ms", True),
    ("median_tpot_ms", "TPOT p50 ms", True),
    ("median_e2el_ms", "E2E p50 ms", True),
    ("p95_e2el_ms", "E2E p95 ms", True),
    ("request_throughput", "Requests/s", False),
    ("output_throughput", "Output tok/s", False),
    ("request_goodput", "Goodput req/s", False),
    ("error_rate", "Error rate", True),
    ("cost_per_1m_output_tokens", "Cost per 1M output tokens", True),
    ("p95_tool_call_ms", "Complete tool call p95 ms", True),
    ("p95_session_ms", "Session p95 ms", True),
    ("prefix_cache_hit_rate", "Prefix-cache hit rate", False),
)


def target_labels(run: RunData) -> list[str]:
    """The run's A/B targets in the order given (``run.json``), else the labels its records
    carry; empty for a one-target run."""
    labels = [str(t.get("label")) for t in run.meta.targets if isinstance(t, dict) and t.get("label")]
    df = run.requests
    if not labels and "target" in df.columns and len(df):
        labels = sorted(str(v) for v in df["target"].dropna().unique() if str(v))
    return labels


def target_mask(run: RunData, label: str) -> np.ndarray:
    """The requests sent to target ``label``."""
    df = run.requests
    if "target" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return np.asarray(df["target"] == label, dtype=bool)


def evaluate_each_target(run: RunData, spec: SloSpec, labels: list[str] | None = None) -> list[SloResult]:
    """:func:`evaluate`, each A/B target on its own records (a one-target run: all of them). ``labels``:
    the run's targets when the records may not name them all (a window of a run). A target without a
    judged request fails: it cannot be said to meet anything."""
    labels = list(labels) if labels else target_labels(run)
    if not labels:
        return evaluate(run, spec)
    judged = judged_mask(run, spec)
    out: list[SloResult] = []
    for label in labels:
        within = target_mask(run, label)
        if not (judged & within).any():
            out.append(
                SloResult(
                    "run",
                    "requests",
                    "judged",
                    ">=",
                    1.0,
                    0.0,
                    False,
                    "no judged request from this target",
                    None,
                    label,
                )
            )
            continue
        out += evaluate(run, spec, within=within, target=label)
    return out


def _delta_pct(value: Any, base: Any) -> float | None:
    if value is None or base is None or not base:
        return None
    return (float(value) - float(base)) / float(base) * 100


def compare_targets(
    run: RunData,
    blocks: dict[str, dict[str, Any]],
    results: list[SloResult],
    judged_rows: np.ndarray | None = None,
    confidence: float | None = None,
) -> dict[str, Any]:
    """summary.json's ``targets`` block: per target its URL, verdict, figures and deltas against the
    baseline (the first target), a latency's with the interval of its change, the twin requests paired
    (``judged_rows``: the judged rows, default the run's own SLO file's; ``confidence`` default the run's own);
    and which target is slower (higher E2E p50 on the same requests)."""
    urls = {str(t.get("label")): str(t.get("url")) for t in run.meta.targets if isinstance(t, dict)}
    labels = list(blocks)
    base = blocks[labels[0]]
    if judged_rows is None:
        text = run.meta.slo_spec_text
        judged_rows = judged_mask(run, load_slo_spec(text=text) if text else load_slo_spec())
    level = float(run.meta.option("confidence", DEFAULT_CONFIDENCE)) if confidence is None else confidence
    compared = [key for key, _, _ in COMPARED]
    per_target: dict[str, Any] = {}
    for label, block in blocks.items():
        mine = [r for r in results if r.target == label]
        judged = [r for r in mine if r.judged]  # a GPU SLO with no GPU sampled: not
        word = results_word(mine)
        per_target[label] = {
            "url": urls.get(label),
            "verdict": {"held": "passed"}.get(word, word),
            "slos_failed": sum(r.result == "failed" for r in mine),
            "slos_inconclusive": sum(r.result == "inconclusive" for r in mine),
            "slos": len(judged),
            **block,
            "delta_pct_vs_baseline": {key: _delta_pct(block.get(key), base.get(key)) for key, _, _ in COMPARED},
        }
        if label != labels[0] and level > 0:
            cis = paired_deltas(run, labels[0], label, compared, judged_rows, level)
            per_target[label]["delta_ci_pct_vs_baseline"] = cis  # the twins' latencies paired
    timed = {label: float(b["median_e2el_ms"]) for label, b in blocks.items() if b.get("median_e2el_ms") is not None}
    slowest = max(timed, key=lambda k: timed[k]) if len(timed) > 1 else None
    fastest = min(timed, key=lambda k: timed[k]) if len(timed) > 1 else None
    out: dict[str, Any] = {"baseline": labels[0], "targets": per_target, "slowest": slowest, "fastest": fastest}
    if slowest is not None and fastest is not None and slowest != fastest:
        ratio = timed[slowest] / timed[fastest] if timed[fastest] else None
        out["slower_by_pct"] = None if ratio is None else (ratio - 1) * 100
        out["sentence"] = (
            f"{slowest} is slower: E2E p50 {ms(timed[slowest])} ms vs {ms(timed[fastest])} ms on "
            f"{fastest}" + ("" if ratio is None else f" (+{(ratio - 1) * 100:.0f}%)")
        )
    elif slowest is not None:
        out["sentence"] = "the targets' E2E p50 is the same"
    return out
