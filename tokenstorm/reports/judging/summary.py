"""Run-level figures: percentiles per workload, throughput, goodput, errors, and summary.json.

``summary.json`` uses the field names of vLLM's benchmark result JSON where they mean the
same thing (``completed``, ``duration``, ``request_throughput``, ``output_throughput``,
``mean_ttft_ms``, ``p99_itl_ms``, ``mean_e2el_ms``...), so existing dashboards can read it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from tokenstorm.reports.data.cache import chosen_rate, records_cache, server_cache
from tokenstorm.reports.data.columns import masked_sum, selected, workloads_in
from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.agent import has_agent_records, sessions, tool_call_counts, tool_call_latencies
from tokenstorm.reports.judging.breakdown import breakdown_figures
from tokenstorm.reports.judging.confidence import headline_intervals, headline_itl_design_effects, run_confidence
from tokenstorm.reports.judging.fidelity import UNTRUSTED, Fidelity, evaluate_fidelity
from tokenstorm.reports.judging.figures import accounting, achieved_concurrency, length_figures
from tokenstorm.reports.judging.offered import offered_load
from tokenstorm.reports.judging.quality import consistency_block, quality_summary
from tokenstorm.reports.judging.run_verdict import incompleteness, run_verdict
from tokenstorm.reports.judging.slo import SloResult, goodput, gpu_count, judged_mask, run_window_s
from tokenstorm.reports.judging.slo import gpu_cost_per_hour as run_gpu_cost
from tokenstorm.reports.judging.slo_spec import SloSpec
from tokenstorm.reports.judging.stats import PERCENTILES, metric_block
from tokenstorm.reports.judging.targets import compare_targets, evaluate_each_target, target_labels, target_mask
from tokenstorm.reports.judging.timing_source import TimingSource, choose_timing_source
from tokenstorm.reports.judging.verdict_words import (
    is_default_spec,
)

__all__ = ["PERCENTILES", "RunSummary", "incompleteness", "summarize"]

_METRICS = (("ttft", "ttft_s"), ("itl", "itl"), ("tpot", "tpot_s"), ("e2el", "e2e_s"))


@dataclass
class RunSummary:
    """What the report, JUnit and summary.json are made of."""

    #: "passed", "failed" (an SLO broke), "inconclusive" (none broke, an interval straddles its target),
    #: "run_failed", "incomplete" or "unreliable" (SLOs judged on timing that is not trustworthy: the load
    #: generator read late)
    verdict: str
    reason: str
    slo_results: list[SloResult]
    overall: dict[str, Any]
    per_workload: dict[str, dict[str, Any]]
    errors: dict[str, int]
    error_samples: list[dict[str, Any]] = field(default_factory=list)
    gpus: int = 1
    #: why the run's figures are partial (workers lost, never finished); empty when complete
    incomplete: list[str] = field(default_factory=list)
    #: A/B runs (--targets): per target its verdict, figures and deltas; the slower one named
    targets: dict[str, Any] | None = None
    #: sweep runs (sweep.json): the goodput knee and each level's achieved load and verdict
    sweep: dict[str, Any] | None = None
    #: capacity searches (capacity.json): the highest load that held, and each step's verdict
    capacity: dict[str, Any] | None = None
    #: how trustworthy the judged requests' timing is (None: not evaluated)
    fidelity: Fidelity | None = None
    #: answer checks' pass rates (tokenstorm/reports/judging/quality.py); None: no judged answer was checked
    quality: dict[str, Any] | None = None
    #: the consistency probes (probes.jsonl) compared; None: the run has none
    consistency: dict[str, Any] | None = None
    #: judged by the built-in default (error rate <= 1%, no --slo): the verdict says so, not "SLOs held"
    default_check: bool = False
    #: what the latency SLOs were judged on (--timing-source): the client's records or the server's timing
    timing: TimingSource | None = None

    def to_json(self, run: RunData) -> dict[str, Any]:
        """summary.json (vLLM benchmark field names where they match)."""
        meta = run.meta
        out: dict[str, Any] = {
            "date": time.strftime("%Y%m%d-%H%M%S", time.gmtime(meta.started_epoch_s or time.time())),
            "backend": "vllm" if not meta.simulated else "tokenstorm-emulator",
            "model_id": meta.model,
            "base_url": meta.target,
            "simulated": meta.simulated,
            **self.overall,
            "verdict": self.verdict,
            "verdict_reason": self.reason,
            "complete": not self.incomplete,
            "incomplete_reasons": self.incomplete,
            "slos": [r.as_dict() for r in self.slo_results],
            "errors_by_category": self.errors,
            "workloads": self.per_workload,
            "num_gpus": self.gpus,
            "timing_fidelity": self.fidelity.as_dict() if self.fidelity is not None else None,
            "workers_lost": meta.workers_lost,
            "workers_seen": meta.workers_seen,
            "timing_violations": timing_violations(run),
            **(self.timing.as_json() if self.timing is not None else {}),
        }
        if self.targets is not None:
            out["targets"] = self.targets
        if meta.left_out:  # workloads of the mix the run did not send, and why (a server that does not call tools)
            out["left_out"] = meta.left_out
        if self.sweep is not None:
            out["sweep"] = self.sweep
        if self.capacity is not None:
            out["capacity"] = self.capacity
        if self.quality is not None:
            out["quality"] = self.quality
        if self.consistency is not None:  # the counts; the texts compared are the report's
            out["consistency"] = {k: v for k, v in self.consistency.items() if k != "pairs"}
            for block in (out["consistency"].get("targets") or {}).values():
                block.pop("pairs", None)
        return out


def timing_violations(run: RunData) -> int:
    """Records that break ``ttfc <= ttft <= e2e <= done`` (a measurement bug; 0 expected)."""
    col = run.requests.get("timing_violation")
    return 0 if col is None else int(col.notna().sum())


def _block(
    run: RunData,
    spec: SloSpec,
    mask: np.ndarray,
    gpus: int,
    price: float | None = None,
    scope: np.ndarray | None = None,
    agent: bool = False,
) -> dict[str, Any]:
    """One scope's figures: ``mask`` its judged rows, ``scope`` all its rows (None: the whole run);
    ``agent``: with the sessions' and tool calls' figures (the run has agent records)."""
    df = run.requests
    ok = mask & df["ok"].fillna(False).astype(bool).to_numpy()
    window = run_window_s(run, mask)
    out_tokens = masked_sum(df, "output_tokens", ok)
    in_tokens = masked_sum(df, "prompt_tokens", ok)
    block: dict[str, Any] = {
        "duration": window,
        "requests": int(mask.sum()),
        "completed": int(ok.sum()),
        "failed": int(mask.sum() - ok.sum()),
        "error_rate": float(1 - ok.sum() / mask.sum()) if mask.any() else None,
        "total_input_tokens": int(in_tokens),
        "total_output_tokens": int(out_tokens),
        "request_throughput": float(ok.sum()) / window if window else 0.0,
        "request_goodput": goodput(run, spec, mask) / window if window else 0.0,
        "output_throughput": out_tokens / window if window else 0.0,
        "output_throughput_per_gpu": out_tokens / window / gpus if window else 0.0,
        "total_token_throughput": (in_tokens + out_tokens) / window if window else 0.0,
        **accounting(run, mask, scope),
        "achieved_concurrency": achieved_concurrency(run, mask, window),
        **length_figures(run, ok),
    }
    lags = selected(df, "send_lag_s", mask)
    lags = lags[~np.isnan(lags)]
    if price is not None:  # what the measured throughput costs on `gpus` GPUs at `price` per GPU-hour
        per_hour = price * gpus
        out_per_hour = block["output_throughput"] * 3600
        all_per_hour = block["total_token_throughput"] * 3600
        block["gpu_cost_per_hour"] = price
        block["cost_per_hour"] = per_hour
        block["cost_per_1m_output_tokens"] = per_hour / out_per_hour * 1e6 if out_per_hour else None
        block["cost_per_1m_total_tokens"] = per_hour / all_per_hour * 1e6 if all_per_hour else None
    if lags.size:  # open-loop runs: how late requests left against their schedule
        block["p99_send_lag_ms"] = float(np.percentile(lags, 99) * 1000)
        block["max_send_lag_ms"] = float(lags.max() * 1000)
        block.update(offered_load(selected(df, "start_epoch_s", mask), selected(df, "send_lag_s", mask)))
    for name, col in _METRICS:
        values = run.itl_values(ok) if col == "itl" else selected(df, col, ok)
        block.update(metric_block(values, name))
    block.update(breakdown_figures(run, ok))  # where the time went: absent when the server timed nothing
    block.update(records_cache(run, ok))
    block["prefix_cache_hit_rate"], block["prefix_cache_hit_rate_source"] = chosen_rate(block)
    if agent:
        found = sessions(run, mask, scope)
        block.update(found.counts())
        block.update(metric_block(found.latency_s, "session"))
        block.update(metric_block(found.waiting_s, "session_wait"))
        block.update(tool_call_counts(run, ok))
        for name, values in tool_call_latencies(run, ok).items():
            block.update(metric_block(values, name))
    return block


def _with_server(block: dict[str, Any], run: RunData, target: str | None = None) -> dict[str, Any]:
    """``block`` with the /metrics prefix-cache figures of the run (``target``: of that A/B target's server),
    and ``prefix_cache_hit_rate`` chosen again: the records' when they report it, else the server's."""
    block.update(server_cache(run, target))
    block["prefix_cache_hit_rate"], block["prefix_cache_hit_rate_source"] = chosen_rate(block)
    return block


def _is(df: pd.DataFrame, col: str, value: str) -> np.ndarray:
    return np.asarray(df[col] == value, dtype=bool)


def summarize(
    run: RunData,
    spec: SloSpec,
    run_failed_error_rate: float = 0.5,
    live: bool = False,
    gpu_cost_per_hour: float | None = None,
) -> RunSummary:
    """Evaluate the SLOs and compute every figure the outputs show (``gpu_cost_per_hour``: a price
    overriding the run's and the SLO file's; 0: no cost figures)."""
    df = run.requests
    mask = judged_mask(run, spec)
    gpus = gpu_count(run, spec)
    price = run_gpu_cost(run, spec) if gpu_cost_per_hour is None else (gpu_cost_per_hour or None)
    agent = has_agent_records(run)
    overall = _with_server(_block(run, spec, mask, gpus, price, agent=agent), run)  # cost: the run's, not a workload's
    level = run_confidence(run)
    # Every workload with a record, judged or not: the rows' records add up to the run's.
    every = np.ones(len(df), dtype=bool)
    per_workload = {
        str(w): _block(run, spec, mask & _is(df, "workload", w), gpus, scope=_is(df, "workload", w), agent=agent)
        for w in workloads_in(df, every)
    }
    deffs = headline_itl_design_effects(run, [mask, *(mask & _is(df, "workload", w) for w in per_workload)], level)
    overall.update(headline_intervals(run, mask, overall["duration"], level, deffs[0]))
    for (w, block), w_deffs in zip(per_workload.items(), deffs[1:], strict=True):
        block.update(headline_intervals(run, mask & _is(df, "workload", w), block["duration"], level, w_deffs))
    errors, samples = _errors(df, mask)
    labels = target_labels(run)
    # A/B: each target judged on its own records; the run fails if any breaks an SLO
    source = choose_timing_source(run, spec, labels, mask)  # --timing-source: server's results, or the client's
    results = source.results if source.results is not None else evaluate_each_target(run, spec, labels)
    default_check = is_default_spec(spec)  # error rate <= 1% only: named for what it is, not "SLOs held"
    ab = _targets(run, spec, mask, labels, results, gpus, price, agent, level) if labels else None
    fidelity = _fidelity(run, mask, ab)
    verdict, reason, incomplete = run_verdict(
        run, spec, overall, results, fidelity, source, ab, run_failed_error_rate, live
    )
    quality, consistency = quality_summary(run, mask, labels), consistency_block(run)
    return RunSummary(
        verdict,
        reason,
        results,
        overall,
        per_workload,
        errors,
        samples,
        gpus,
        incomplete,
        ab,
        fidelity=fidelity,
        quality=quality,
        consistency=consistency,
        default_check=default_check,
        timing=source,
    )


def _errors(df: pd.DataFrame, mask: np.ndarray) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The judged failures by category, and up to 20 distinct samples of them."""
    failed = mask & ~df["ok"].fillna(False).astype(bool).to_numpy() if len(df) else mask
    errors = {
        str(k): int(v)
        for k, v in df.loc[failed, "error_category"].astype(object).fillna("unknown").value_counts().items()
    }
    samples = (
        df.loc[failed, ["workload", "error_category", "status_code", "error_detail"]]
        .drop_duplicates(subset=["error_category", "error_detail"])
        .head(20)
        .to_dict("records")
    )
    return errors, samples


def _targets(
    run: RunData,
    spec: SloSpec,
    mask: np.ndarray,
    labels: list[str],
    results: list[SloResult],
    gpus: int,
    price: float | None,
    agent: bool,
    level: float,
) -> dict[str, Any]:
    """The A/B comparison: each target's figures, per workload too (never pooled), and the comparison."""
    df = run.requests
    blocks = {
        label: _with_server(
            _block(run, spec, mask & target_mask(run, label), gpus, price, target_mask(run, label), agent),
            run,
            label,
        )
        for label in labels
    }
    for label, block in blocks.items():  # each target's headline figures with their intervals
        block.update(headline_intervals(run, mask & target_mask(run, label), block["duration"], level))
    ab = compare_targets(run, blocks, results, judged_rows=mask, confidence=level)
    for label, block in ab["targets"].items():  # per target and workload: A/B tables are never pooled
        within = target_mask(run, label)
        block["workloads"] = {
            w: _block(
                run,
                spec,
                mask & within & _is(df, "workload", w),
                gpus,
                scope=within & _is(df, "workload", w),
                agent=agent,
            )
            for w in workloads_in(df, within)
        }
    return ab


def _fidelity(run: RunData, mask: np.ndarray, ab: dict[str, Any] | None) -> Fidelity:
    """Whether the load generators read the judged streams on time; with A/B targets, each target's reads
    judged apart (same load generators), the run's as good as its worse lane."""
    df = run.requests
    fidelity = evaluate_fidelity(df, run.load, mask)
    if ab is not None:
        for label, block in ab["targets"].items():  # each target's reads judged apart (same load generators)
            per_target = evaluate_fidelity(df, run.load, mask & target_mask(run, label))
            block["timing_fidelity"] = per_target.as_dict()
            if fidelity.trustworthy and not per_target.trustworthy:
                # An A/B comparison is only as good as its worse lane: pooled, the other would hide it.
                fidelity = replace(
                    per_target, reason=f"{UNTRUSTED}target {label}: {per_target.reason.removeprefix(UNTRUSTED)}"
                )
    return fidelity
