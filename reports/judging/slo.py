"""SLO evaluation against a run's raw records: judged requests, statistics, verdicts, goodput.

The file format and its parser are in :mod:`reports.judging.slo_spec`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from reports.data.columns import chunks, dropped_nan, masked_sum, measures, selected, workloads_in
from reports.data.rundir import RunData
from reports.judging import quality as _quality
from reports.judging.agent import sessions
from reports.judging.quality import CONSISTENCY_METRIC, is_quality_metric
from reports.judging.slo_spec import (
    GPU_SAMPLED_METRICS,
    LATENCY_METRICS,
    NO_SERVER_TIMING,
    NOT_JUDGED_NO_GPU,
    SERVER_TIMING_METRICS,
    SESSION_METRICS,
    SloSpec,
    SloTarget,
)
from workloads.rundir import ItlHistogram

__all__ = ["SloResult", "evaluate", "goodput", "judged_mask", "latency_column", "per_request_spec", "stat_of"]


@dataclass
class SloResult:
    """The verdict on one target."""

    scope: str
    metric: str
    stat: str
    op: str
    threshold: float
    measured: float | None
    passed: bool
    note: str = ""
    margin_pct: float | None = field(default=None)
    target: str = ""  # the A/B target judged (--targets); empty in a one-target run
    #: False: not judged (a GPU SLO on a run that sampled no GPU): ``passed`` then holds, ``note`` says why
    judged: bool = True

    def as_dict(self) -> dict[str, Any]:
        """For JSON."""
        return asdict(self)


# -- evaluation --------------------------------------------------------------------------
def judged_mask(run: RunData, spec: SloSpec) -> np.ndarray:
    """Requests that count: not cancelled by the load test, not in the warm-up window."""
    df = run.requests
    if df.empty:
        return np.zeros(0, dtype=bool)
    mask: np.ndarray = np.asarray(df["error_category"] != "cancelled", dtype=bool).copy()
    mask &= ~df["warmup"].fillna(False).astype(bool).to_numpy()
    if spec.warmup_s > 0:
        start = run.meta.started_epoch_s or float(df["start_epoch_s"].min())
        mask &= (df["start_epoch_s"] >= start + spec.warmup_s).to_numpy()
    return mask


def latency_column(run: RunData, metric: str) -> str:
    """The column a latency SLO on ``metric`` reads (``"itl"``: the run's gaps, :meth:`RunData.itl_values`): the
    client's record, or on a run judged on the server's timing (``--timing-source``, a view that names its own
    ``server_columns``) the server's figure where the server times it."""
    columns: dict[str, str] = getattr(run, "server_columns", None) or {}
    return columns.get(metric, LATENCY_METRICS[metric])


def stat_of(values: np.ndarray | ItlHistogram, stat: str) -> float | None:
    """One statistic of ``values`` (seconds in, the same unit out); None when empty. An array
    is sorted in place (pass a copy: :func:`selected` makes one)."""
    if isinstance(values, ItlHistogram):
        if values.size == 0:
            return None
        if stat in ("mean", "max"):
            return values.mean() if stat == "mean" else values.max()
        return float(values.percentiles([float(stat[1:])])[0])
    values = dropped_nan(values)
    if values.size == 0:
        return None
    if stat in ("mean", "max"):
        return float(values.mean() if stat == "mean" else values.max())
    return float(np.percentile(values, float(stat[1:]), overwrite_input=True))


def run_window_s(run: RunData, mask: np.ndarray) -> float:
    """Seconds from the first judged request's start to the last one's end."""
    if not mask.any():
        return 0.0
    start, e2e = run.requests["start_epoch_s"].to_numpy(), run.requests["e2e_s"].to_numpy()
    first, last = np.inf, -np.inf
    for part in chunks(len(start)):
        sel = mask[part]
        if sel.any():
            first = min(first, float(start[part][sel].min()))
            last = max(last, float((start[part][sel] + np.nan_to_num(e2e[part][sel])).max()))
    return max(1e-9, last - first)


def gpu_cost_per_hour(run: RunData, spec: SloSpec) -> float | None:
    """Price of one GPU-hour: the run's ``--gpu-cost-per-hour``, else the SLO file's
    ``gpu_cost_per_hour`` (``reports build --gpu-cost-per-hour`` overrides both); 0 or none: no cost."""
    value = float(run.meta.option("gpu_cost_per_hour", 0.0) or 0.0) or (spec.gpu_cost_per_hour or 0.0)
    return value or None


def gpu_count(run: RunData, spec: SloSpec) -> int:
    """GPUs behind the target: from GPU samples, else the SLO file's ``gpus``, else ``--gpus``, else 1."""
    if not run.gpu.empty and "gpu" in run.gpu.columns:
        keys = run.gpu[["host", "gpu"]] if "host" in run.gpu.columns else run.gpu[["gpu"]]
        return max(1, len(keys.drop_duplicates()))
    return spec.gpus or int(run.meta.option("gpus", 0) or 0) or 1


def evaluate(run: RunData, spec: SloSpec, within: np.ndarray | None = None, target: str = "") -> list[SloResult]:
    """Judge every target of ``spec`` on ``run``'s raw records (``within``: only those; an A/B ``target``'s)."""
    df = run.requests
    judged = judged_mask(run, spec) if within is None else judged_mask(run, spec) & within
    workloads = workloads_in(df, judged)
    results = []
    expanded: list[SloTarget] = []
    for t in spec.targets:
        if t.scope == "*" and is_quality_metric(t.metric):  # the workloads with a checked answer; none: no data
            found = [
                SloTarget(w, t.metric, t.stat, t.threshold, t.line)
                for w in workloads
                if _quality.quality_applies(run, judged, w, t.metric)
            ]
            expanded.extend(found or [t])
        elif t.scope == "*":
            expanded.extend(
                SloTarget(w, t.metric, t.stat, t.threshold, t.line)
                for w in workloads
                if measures(df, judged, w, t.metric)
            )
        else:
            expanded.append(t)
    ok_all = df["ok"].fillna(False).astype(bool).to_numpy() if len(df) else np.zeros(0, dtype=bool)
    for t in expanded:
        scope_mask = judged.copy()
        if t.scope not in ("run", "*"):  # "*" here: a quality target no workload's answers were checked for
            scope_mask &= (df["workload"] == t.scope).to_numpy()
        measured: float | None
        note = ""
        if t.metric in GPU_SAMPLED_METRICS and run.gpu.empty:  # not judged (said so), never failed for no sample
            results.append(
                SloResult(
                    t.scope,
                    t.metric,
                    t.stat,
                    t.op,
                    t.threshold,
                    None,
                    True,
                    NOT_JUDGED_NO_GPU,
                    None,
                    target,
                    judged=False,
                )
            )
            continue
        if t.metric == "gpu_memory_gb":
            measured = float(run.gpu["mem_used_mib"].max()) * 2**20 / 1e9
        elif t.metric == CONSISTENCY_METRIC:
            measured, note = _quality.measure_consistency(run, target)
        elif not scope_mask.any():
            measured, note = None, f"no judged requests for {t.scope!r}"
        elif t.metric == "error_rate":
            measured = float(1.0 - ok_all[scope_mask].mean())
        elif is_quality_metric(t.metric):
            measured, note = _quality.measure_quality(run, t.metric, scope_mask & ok_all)
        elif t.metric in LATENCY_METRICS:
            ok_mask = scope_mask & ok_all
            column = latency_column(run, t.metric)
            values: np.ndarray | ItlHistogram = (
                run.itl_values(ok_mask) if column == "itl" else selected(df, column, ok_mask)
            )
            seconds = stat_of(values, t.stat)
            measured = None if seconds is None else seconds * 1000
            if measured is None:
                note = "no tool calls to measure" if t.metric == "tool_call_ms" else "no successful requests to measure"
                note = NO_SERVER_TIMING if t.metric in SERVER_TIMING_METRICS and ok_mask.any() else note
        elif t.metric in SESSION_METRICS:
            rows = np.ones(len(df), dtype=bool) if within is None else within.copy()
            if t.scope != "run":
                rows &= (df["workload"] == t.scope).to_numpy()
            seconds = stat_of(sessions(run, judged, rows).latency_s, t.stat)
            measured = None if seconds is None else seconds * 1000
            if measured is None:
                note = "no completed sessions to measure"
        else:
            window = run_window_s(run, scope_mask)
            ok_mask = scope_mask & ok_all
            if t.metric == "requests_per_s":
                measured = float(ok_mask.sum()) / window
            elif t.metric == "goodput_requests_per_s":
                measured = goodput(run, spec, scope_mask) / window
            else:
                tokens = masked_sum(df, "output_tokens", ok_mask)
                measured = tokens / window
                if t.metric == "output_tokens_per_s_per_gpu":
                    measured /= gpu_count(run, spec)
        passed = measured is not None and (measured <= t.threshold if t.op == "<=" else measured >= t.threshold)
        margin = (measured - t.threshold) / t.threshold * 100 if measured is not None and t.threshold else None
        results.append(SloResult(t.scope, t.metric, t.stat, t.op, t.threshold, measured, passed, note, margin, target))
    return results


def per_request_spec(spec: SloSpec) -> SloSpec:
    """``spec`` cut to the targets any slice of requests can be judged by — latencies, error rate and
    answer quality, no warm-up — for judging a window of a run (a capacity-search step, a sweep level)."""
    keep = [
        t
        for t in spec.targets
        if t.metric in LATENCY_METRICS or t.metric == "error_rate" or is_quality_metric(t.metric)
    ]
    return replace(spec, targets=keep, warmup_s=0.0)


def goodput(run: RunData, spec: SloSpec, mask: np.ndarray) -> float:
    """How many judged requests met every per-request latency target of their workload."""
    df = run.requests
    good = mask & df["ok"].fillna(False).astype(bool).to_numpy()
    for t in spec.targets:
        if t.metric not in ("ttft_ms", "e2e_ms", "tpot_ms", "tool_call_ms"):
            continue
        col = latency_column(run, t.metric)
        values = np.multiply(df[col].to_numpy(dtype=float, na_value=np.nan), 1000)
        applies = np.ones(len(df), dtype=bool) if t.scope in ("*", "run") else (df["workload"] == t.scope).to_numpy()
        if t.metric == "tool_call_ms":
            applies = applies & ~np.isnan(values)  # a step that answered without a tool call has none to be late
        good &= ~applies | (values <= t.threshold)
    return float(good.sum())
