"""Comparing runs side by side (FP8 vs AWQ, block sizes, one tool against another) with a
regression verdict that says when the runs' load differed.

Each argument is a tokenstorm run directory (its ``summary.json``, built first if missing; an A/B
run gives one column per target) or another tool's result file (``vllm bench serve
--save-result``, GuideLLM's JSON; :mod:`tokenstorm.reports.compare.foreign`). For every metric the delta against
the baseline is given in percent (error rate: percentage points); a latency or error-rate metric
that grew, or a throughput that fell, by more than ``threshold_pct`` is a regression. A column of
an A/B target is compared with the baseline run's column of the same target where it has one.
Each figure carries its sample size (requests, sessions, tool calls, answers checked), and a delta from
few samples is marked. What is said first (:mod:`tokenstorm.reports.compare.headline`): the runs labelled A, B, ...
with their whole names and status, a warning when the load differed, one sentence per run against its
baseline; then the headline figures, what differs in the deployment, each run's context (tool, users,
shape, target, model, SIMULATED, verdict, timing fidelity) and every figure (:mod:`tokenstorm.reports.compare.text`,
:mod:`tokenstorm.reports.compare.html`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenstorm.reports.compare.diff import deployment_rows, load_differences
from tokenstorm.reports.compare.foreign import read_foreign
from tokenstorm.reports.compare.model import (
    ALL,
    RATES,
    SECTIONS,
    ComparedRun,
    CompareInputError,
    column_label,
    count_of,
    few_samples,
)
from tokenstorm.reports.compare.significance import Change, change_interval, judge
from tokenstorm.reports.compare.tokenstorm import read_tokenstorm
from tokenstorm.reports.compare.uncertainty import attach_intervals, stat_of_key
from tokenstorm.reports.judging.intervals import DEFAULT_CONFIDENCE
from tokenstorm.reports.judging.twins import paired_change

__all__ = ["COMPARED_METRICS", "CompareInputError", "Comparison", "compare_runs", "read_runs"]

#: (summary key, label, section, True when higher is better / None: shown, never a regression)
COMPARED_METRICS: tuple[tuple[str, str, str, bool | None], ...] = (
    *(
        (f"{stat}_{stem}_ms", f"{name} {label} ms", "latency", False)
        for stem, name in (("ttft", "TTFT"), ("itl", "ITL"), ("tpot", "TPOT"), ("e2el", "E2E"))
        for stat, label in (("mean", "mean"), ("median", "p50"), ("p95", "p95"), ("p99", "p99"))
    ),
    # where the time went: explains TTFT and E2E (whose deltas are the regressions), never a regression itself
    *(
        (f"{stat}_{stem}_ms", f"{name} {label} ms", "server", None)
        for stem, name in (
            ("overhead", "overhead"),
            ("server_queue", "queue"),
            ("server_ttft", "server TTFT (prefill)"),
            ("server_decode", "decode"),
            ("server_itl", "server ITL"),
        )
        for stat, label in (("mean", "mean"), ("median", "p50"), ("p95", "p95"), ("p99", "p99"))
    ),
    ("request_throughput", "requests/s", "throughput", True),
    ("output_throughput", "output tok/s", "throughput", True),
    ("total_token_throughput", "total tok/s", "throughput", True),
    ("output_throughput_per_gpu", "output tok/s per GPU", "throughput", True),
    ("request_goodput", "goodput req/s", "throughput", True),
    ("completed", "completed", "errors", None),
    ("failed", "failed", "errors", None),
    ("error_rate", "error rate", "errors", False),
    ("cost_per_1m_output_tokens", "cost / 1M output tok", "cost", False),
    ("cost_per_1m_total_tokens", "cost / 1M total tok", "cost", False),
    *(
        (f"{stat}_session_ms", f"session {label} ms", "agent", False)
        for stat, label in (("median", "p50"), ("p95", "p95"), ("p99", "p99"))
    ),
    ("mean_steps_per_session", "steps per session", "agent", None),
    *(
        (f"{stat}_{stem}_ms", f"{name} {label} ms", "agent", False)
        for stem, name in (("tool_call", "complete tool call"), ("ttft_tool", "first tool-call delta"))
        for stat, label in (("median", "p50"), ("p95", "p95"), ("p99", "p99"))
    ),
    ("prefix_cache_hit_rate", "prefix-cache hit rate", "cache", True),
    ("prefix_cache_hit_rate_server", "prefix-cache hit rate (/metrics)", "cache", True),
    ("quality_pass_rate", "answers passing their checks", "quality", True),
    ("needle_pass_rate", "needle recall", "quality", True),
    ("consistency_changed_share", "probe answers changed under load", "quality", False),
)


@dataclass
class Comparison:
    """Rows of (section, scope, metric label, values per column, delta per column, regressed per
    column), with each column's context, the load differences and the deployment differences."""

    runs: list[str]  # column names
    baseline: int  # column index of the baseline
    rows: list[dict[str, Any]]
    threshold_pct: float
    columns: list[ComparedRun] = field(default_factory=list)
    refs: list[int | None] = field(default_factory=list)  # the column each one's deltas are against
    load_diffs: list[str] = field(default_factory=list)
    deployment_diffs: list[tuple[str, list[str]]] = field(default_factory=list)
    deployment_alike: int = 0
    #: the confidence of the changes' intervals; 0: judged on point estimates
    confidence: float = 0.0

    @property
    def regressions(self) -> list[dict[str, Any]]:
        """Rows where some run regressed against the baseline."""
        return [r for r in self.rows if any(r["regressed"])]

    @property
    def verdict(self) -> str:
        """The one-line answer; it says when the load differed, so no regression reads as the deployment's."""
        base = f"{self.labels[self.baseline]} ({self.runs[self.baseline]})"
        caveat = "; the runs' LOAD DIFFERED: the deltas are not the deployment's alone" if self.load_diffs else ""
        sure = f" at {self.confidence:.0%} confidence" if self.confidence else ""
        if self.regressions:
            return (
                f"REGRESSION: {len(self.regressions)} figure(s) worse than baseline {base} by > "
                f"{self.threshold_pct:g}%{sure}{caveat}"
            )
        unclear = [r for r in self.rows if "unclear" in r["judged"]]
        if not unclear:
            return f"no regression beyond {self.threshold_pct:g}%{sure} against {base}{caveat}"
        return (
            f"no regression beyond {self.threshold_pct:g}%{sure} against {base}; {len(unclear)} figure(s) "
            f"with no significant difference that the runs were too short to bound within "
            f"±{self.threshold_pct:g}%{caveat}"
        )

    def context_rows(self) -> list[tuple[str, list[str]]]:
        """(what, each column's value) for the run-context table."""

        def yes_no(v: bool | None) -> str:
            return "—" if v is None else ("SIMULATED (built-in emulator)" if v else "no (a real server)")

        cols = self.columns
        return [
            ("tool", [c.tool for c in cols]),
            ("users / concurrency (peak)", ["—" if c.users_peak is None else str(c.users_peak) for c in cols]),
            ("duration s", ["—" if c.duration_s is None else f"{c.duration_s:.1f}" for c in cols]),
            ("load shape", [c.load_shape for c in cols]),
            ("max tokens", [c.max_tokens or "—" for c in cols]),
            ("workload mix", [", ".join(f"{w} {s:.0%}" for w, s in c.workload_mix.items()) or "—" for c in cols]),
            (
                "prompt tok / request",
                ["—" if c.prompt_tokens_mean is None else f"{c.prompt_tokens_mean:.0f}" for c in cols],
            ),
            (
                "output tok / request",
                ["—" if c.output_tokens_mean is None else f"{c.output_tokens_mean:.0f}" for c in cols],
            ),
            (
                "target",
                [(f"{c.target_label}: " if c.target_label else "") + (c.target_url or "— (not in file)") for c in cols],
            ),
            ("model", [c.model or "—" for c in cols]),
            ("server version", [str(c.deployment.get("server_version") or "—") for c in cols]),
            ("simulated", [yes_no(c.simulated) for c in cols]),
            ("verdict", [c.verdict or "— (no SLOs judged)" for c in cols]),
            ("timing fidelity", [c.fidelity or "— (not measured by this tool)" for c in cols]),
        ]

    @property
    def labels(self) -> list[str]:
        """Each column's short label (A, B, ...): the console's column heads, with a legend of the names."""
        return [column_label(i) for i in range(len(self.runs))]

    def to_text(self, details: bool = False) -> str:
        """The comparison for the console, no line over 100 characters: the runs' legend, a summary of the
        changes that matter and the headline figures with their sample sizes, what differs in the load and
        the deployment, then the verdict; ``details``: every figure, per workload, and each run's context."""
        from tokenstorm.reports.compare.text import comparison_text

        return comparison_text(self, details)

    def to_html(self) -> str:
        """The comparison as a self-contained, styled HTML page (every name escaped)."""
        from tokenstorm.reports.compare.html import render_comparison

        return render_comparison(self)


def read_runs(paths: list[Path]) -> list[ComparedRun]:
    """The columns of each path: a tokenstorm run directory or another tool's result file."""
    columns: list[ComparedRun] = []
    for i, path in enumerate(paths):
        if path.is_dir():
            columns += read_tokenstorm(path, i)
        elif path.is_file():
            columns += read_foreign(path, i)
        else:
            raise FileNotFoundError(f"{path}: no such run directory or result file")
    return columns


def _reference(columns: list[ComparedRun], i: int, baseline_arg: int) -> int | None:
    """The column that column ``i``'s deltas are against: the baseline run's column of the same A/B
    target, else the baseline run's first column; None for the baseline itself."""
    base_cols = [j for j, c in enumerate(columns) if c.argument == baseline_arg]
    same = [j for j in base_cols if columns[j].target_label and columns[j].target_label == columns[i].target_label]
    if same and same[0] != i:
        return same[0]
    return None if i == base_cols[0] else base_cols[0]


def _delta(key: str, value: Any, base: Any) -> float | None:
    if value is None or base is None:
        return None
    if key in RATES:  # percentage points: 0% -> 2% errors is a regression
        return float(value - base) * 100
    return (value - base) / base * 100 if base else (0.0 if value == base else float("inf"))


def _sample_size(figures: dict[str, Any], key: str) -> float | None:
    """How many samples figure ``key`` of a scope is from (requests, sessions, tool calls, answers
    checked...); None when the run's tool does not say."""
    counted = count_of(key)
    if counted is None:
        return None
    if counted[0] == "attempts":  # an error rate is over every request, failed or not
        done, failed = figures.get("completed"), figures.get("failed")
        return None if done is None else float(done) + float(failed or 0)
    value = figures.get(counted[0])
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _confidence(columns: list[ComparedRun], base_col: int, given: float | None) -> float:
    """``given`` (``reports compare --confidence``), else the baseline run's own ``--confidence`` (else the first
    tokenstorm run's; a run that does not say: :data:`DEFAULT_CONFIDENCE`)."""
    if given is not None:
        return given
    for col in (columns[base_col], *columns):
        if col.options is not None:
            value = col.options.get("confidence", DEFAULT_CONFIDENCE)
            return (
                float(value) if isinstance(value, int | float) and not isinstance(value, bool) else (DEFAULT_CONFIDENCE)
            )
    return DEFAULT_CONFIDENCE


def _change(
    columns: list[ComparedRun], scope: str, key: str, values: list[Any], i: int, ref: int | None, confidence: float
) -> tuple[Change | None, bool]:
    """(the interval of column ``i``'s change against ``ref`` in figure ``key``, whether it is of pairs):
    two A/B targets of one run paired request by request, else as two independent samples; None when
    either figure has no interval."""
    if ref is None or values[i] is None or values[ref] is None:
        return None, False
    new, base = columns[i], columns[ref]
    stat = stat_of_key(key)
    if stat is not None and new.argument == base.argument and new.target_label != base.target_label:
        pairs = new.pairs.get(scope, {}).get(stat[1]), base.pairs.get(scope, {}).get(stat[1])
        if pairs[0] is not None and pairs[1] is not None:
            paired = paired_change(stat[0], pairs[1], pairs[0], confidence)
            if paired is not None:
                return paired, True
    new_ci, base_ci = new.intervals.get(scope, {}).get(key), base.intervals.get(scope, {}).get(key)
    if new_ci is None or base_ci is None:
        return None, False
    return change_interval(key, float(values[ref]), base_ci, float(values[i]), new_ci), False


def compare_runs(
    run_dirs: list[Path], baseline: int = 0, threshold_pct: float = 10.0, confidence: float | None = None
) -> Comparison:
    """Compare the runs at ``run_dirs`` (run directories or result files) against ``run_dirs[baseline]``, each
    change judged by its interval at ``confidence`` (None: the baseline run's own ``--confidence``; 0: on the
    point estimates)."""
    columns = read_runs(run_dirs)
    if not 0 <= baseline < len(run_dirs):
        raise CompareInputError(f"--baseline {baseline}: give the index of one of the {len(run_dirs)} runs")
    base_col = next(j for j, c in enumerate(columns) if c.argument == baseline)
    refs = [_reference(columns, i, baseline) for i in range(len(columns))]
    confidence = _confidence(columns, base_col, confidence)
    attach_intervals(columns, confidence)
    scopes = [ALL, *sorted({w for c in columns for w in c.figures if w != ALL})]
    rows = []
    for section in SECTIONS:
        for scope in scopes:
            for key, label, section_of, higher_better in COMPARED_METRICS:
                if section_of != section:
                    continue
                values = [c.figures.get(scope, {}).get(key) for c in columns]
                if all(v is None for v in values):
                    continue  # a figure no run has (cost without a price): no empty row
                deltas = [None if ref is None else _delta(key, values[i], values[ref]) for i, ref in enumerate(refs)]
                changes = [_change(columns, scope, key, values, i, ref, confidence) for i, ref in enumerate(refs)]
                judged = [
                    judge(d, ci, higher_better, threshold_pct) for d, (ci, _) in zip(deltas, changes, strict=True)
                ]
                n = [_sample_size(c.figures.get(scope, {}), key) for c in columns]
                few = [few_samples(key, x) for x in n]
                few_delta = [ref is not None and (few[i] or few[ref]) for i, ref in enumerate(refs)]
                rows.append(
                    {
                        "section": section,
                        "scope": scope,
                        "key": key,
                        "label": label,
                        "values": values,
                        "deltas": deltas,
                        "ci": [ci for ci, _ in changes],  # each delta's interval (None: judged on the point)
                        "paired": [paired for _, paired in changes],  # of an A/B run's twin requests
                        "judged": judged,  # "worse", "better", "within", "unclear" or None
                        "regressed": [j == "worse" for j in judged],
                        "higher_better": higher_better,
                        "n": n,  # how many samples each figure is from (requests, sessions...)
                        "noun": (count_of(key) or (None, None))[1],  # what n counts
                        "few": few,  # the figure is from too few samples to mean much
                        "few_delta": few_delta,  # its delta is (either figure is from few samples)
                    }
                )
    diffs, alike = deployment_rows(columns)
    labels = [column_label(i) for i in range(len(columns))]
    load_diffs = load_differences(columns, labels)
    names = [c.name for c in columns]
    return Comparison(names, base_col, rows, threshold_pct, columns, refs, load_diffs, diffs, alike, confidence)
