"""Comparing runs side by side (FP8 vs AWQ, block sizes, one tool against another) with a
regression verdict that says when the runs' load differed.

Each argument is a tokenstorm run directory (its ``summary.json``, built first if missing; an A/B
run gives one column per target) or another tool's result file (``vllm bench serve
--save-result``, GuideLLM's JSON; :mod:`reports.compare.foreign`). For every metric the delta against
the baseline is given in percent (error rate: percentage points); a latency or error-rate metric
that grew, or a throughput that fell, by more than ``threshold_pct`` is a regression. A column of
an A/B target is compared with the baseline run's column of the same target where it has one.
Before the figures: each run's context (tool, users, shape, target, model, SIMULATED, verdict,
timing fidelity), a warning when the load differed, and what differs in the deployment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports.compare.diff import deployment_rows, load_differences
from reports.compare.foreign import read_foreign
from reports.compare.model import ALL, RATES, SECTIONS, ComparedRun, CompareInputError, fmt_delta, fmt_value
from reports.compare.tokenstorm import read_tokenstorm

__all__ = ["COMPARED_METRICS", "CompareInputError", "Comparison", "compare_runs", "read_runs"]

#: (summary key, label, section, True when higher is better / None: shown, never a regression)
COMPARED_METRICS: tuple[tuple[str, str, str, bool | None], ...] = (
    *((f"{stat}_{stem}_ms", f"{name} {label} ms", "latency", False)
      for stem, name in (("ttft", "TTFT"), ("itl", "ITL"), ("tpot", "TPOT"), ("e2el", "E2E"))
      for stat, label in (("mean", "mean"), ("median", "p50"), ("p95", "p95"), ("p99", "p99"))),
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
    *((f"{stat}_{stem}_ms", f"{name} {label} ms", "agent", False)
      for stem, name in (("session", "session"), ("tool_call", "complete tool call"),
                         ("ttft_tool", "first tool-call delta"))
      for stat, label in (("median", "p50"), ("p95", "p95"), ("p99", "p99"))),
    ("mean_steps_per_session", "steps per session", "agent", None),
    ("prefix_cache_hit_rate", "prefix-cache hit rate", "cache", True),
    ("prefix_cache_hit_rate_server", "prefix-cache hit rate (/metrics)", "cache", True),
    ("quality_pass_rate", "answers passing their checks", "quality", True),
    ("needle_pass_rate", "needle recall", "quality", True),
    ("consistency_changed_share", "probe answers changed under load", "quality", False),
)  # fmt: skip


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

    @property
    def regressions(self) -> list[dict[str, Any]]:
        """Rows where some run regressed against the baseline."""
        return [r for r in self.rows if any(r["regressed"])]

    @property
    def verdict(self) -> str:
        """The one-line answer; it says when the load differed, so no regression reads as the deployment's."""
        base = self.runs[self.baseline]
        caveat = ("; the runs' LOAD DIFFERED: the deltas are not the deployment's alone"
                  if self.load_diffs else "")  # fmt: skip
        if self.regressions:
            return (f"REGRESSION: {len(self.regressions)} metric(s) worse than baseline {base} by > "
                    f"{self.threshold_pct:g}%{caveat}")  # fmt: skip
        return f"no regression beyond {self.threshold_pct:g}% against {base}{caveat}"

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
            ("prompt tok / request", ["—" if c.prompt_tokens_mean is None else f"{c.prompt_tokens_mean:.0f}"
                                      for c in cols]),
            ("output tok / request", ["—" if c.output_tokens_mean is None else f"{c.output_tokens_mean:.0f}"
                                      for c in cols]),
            ("target", [(f"{c.target_label}: " if c.target_label else "") + (c.target_url or "— (not in file)")
                        for c in cols]),
            ("model", [c.model or "—" for c in cols]),
            ("server version", [str(c.deployment.get("server_version") or "—") for c in cols]),
            ("simulated", [yes_no(c.simulated) for c in cols]),
            ("verdict", [c.verdict or "— (no SLOs judged)" for c in cols]),
            ("timing fidelity", [c.fidelity or "— (not measured by this tool)" for c in cols]),
        ]  # fmt: skip

    def to_text(self) -> str:
        """The comparison for the console: context, load warning, deployment differences, figures, verdict."""
        out = [f"Runs compared (* baseline: {self.runs[self.baseline]}; '!' = worse by more than "
               f"{self.threshold_pct:g}%; '—' = not given by that run's tool)", ""]  # fmt: skip
        short = [(w, v) for w, v in self.context_rows() if w not in _LONG]
        out += _table("", [("run", [n + (" *" if i == self.baseline else "") for i, n in enumerate(self.runs)]),
                           *short], _width([*self.runs, *(x for _, v in short for x in v)]))  # fmt: skip
        for what, values in self.context_rows():
            if what in _LONG:  # verdict and fidelity lines are sentences: one line a run, not cut
                out += [f"{what}:", *(f"  {n}: {v}" for n, v in zip(self.runs, values, strict=True))]
        against = [f"{n} against {self.runs[ref]}" for n, ref in zip(self.runs, self.refs, strict=True)
                   if ref is not None and ref != self.baseline]  # fmt: skip
        if against:
            out.append("A/B targets against the baseline run's same target: " + "; ".join(against))
        if self.load_diffs:
            out += ["", "LOAD DIFFERS: these runs did not offer the same load, so their deltas are not the "
                    "deployment's alone:", *(f"  - {line}" for line in self.load_diffs)]  # fmt: skip
        out += ["", *self._deployment_text(), ""]
        cells = [[_cell(r["key"], *each) for each in zip(r["values"], r["deltas"], r["regressed"], strict=True)]
                 for r in self.rows]  # fmt: skip
        width = _width([*self.runs, *(c for row in cells for c in row)])
        head = f"{'scope':<14} {'metric':<22} " + " ".join(f"{n[-width:]:>{width}}" for n in self.runs)
        section = None
        for r, row in zip(self.rows, cells, strict=True):
            if r["section"] != section:
                section = r["section"]
                out += ["", section.upper(), head, "-" * len(head)]
            out.append(f"{r['scope']:<14} {r['label']:<22} " + " ".join(f"{c:>{width}}" for c in row))
        notes = sorted({n for c in self.columns for n in c.notes})
        if notes:
            out += ["", "Notes:", *(f"  - {n}" for n in notes)]
        return "\n".join([*out, "", self.verdict])

    def _deployment_text(self) -> list[str]:
        if not self.deployment_diffs:
            captured = any(c.deployment for c in self.columns)
            alike = f" ({self.deployment_alike} alike)" if self.deployment_alike else ""
            return [f"Deployment: no differences found ({self.deployment_alike} settings alike)" if captured else
                    f"Deployment: not captured in these runs (no run.json deployment block): only the options were "
                    f"compared{alike}"]  # fmt: skip
        width = _width([*self.runs, *(v for _, values in self.deployment_diffs for v in values)])
        return _table(f"Deployment and options — what differs ({self.deployment_alike} settings alike):",
                      [("setting", list(self.runs)), *self.deployment_diffs], width)  # fmt: skip

    def to_html(self) -> str:
        """The comparison as a self-contained, styled HTML page (every name escaped)."""
        from reports.compare.html import render_comparison

        return render_comparison(self)


#: context rows printed as one line a run (sentences), not as table cells
_LONG = ("verdict", "timing fidelity")


def _cell(key: str, value: Any, delta: float | None, regressed: bool) -> str:
    """``130 (+30.0%!)``: the figure, its delta against the baseline, '!' when worse beyond the threshold."""
    if delta is None:
        return fmt_value(key, value)
    return f"{fmt_value(key, value)} ({fmt_delta(key, delta)}{'!' if regressed else ''})"


def _width(texts: list[str]) -> int:
    """A console column's width: its longest text, from 12 to 30 characters."""
    return min(30, max(12, *(len(t) for t in texts)))


def _table(title: str, rows: list[tuple[str, list[str]]], width: int) -> list[str]:
    """A console table, a column per run; a cell longer than ``width`` is cut with "…" (HTML keeps it)."""

    def cell(v: str) -> str:
        return v if len(v) <= width else v[: width - 1] + "…"

    out = [title] if title else []
    for what, values in rows:
        out.append(f"{what:<28} " + " ".join(f"{cell(v):<{width}}" for v in values))
    return out


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


def compare_runs(run_dirs: list[Path], baseline: int = 0, threshold_pct: float = 10.0) -> Comparison:
    """Compare the runs at ``run_dirs`` (run directories or result files) against ``run_dirs[baseline]``."""
    columns = read_runs(run_dirs)
    if not 0 <= baseline < len(run_dirs):
        raise CompareInputError(f"--baseline {baseline}: give the index of one of the {len(run_dirs)} runs")
    base_col = next(j for j, c in enumerate(columns) if c.argument == baseline)
    refs = [_reference(columns, i, baseline) for i in range(len(columns))]
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
                regressed = [d is not None and higher_better is not None
                             and (-d if higher_better else d) > threshold_pct for d in deltas]  # fmt: skip
                rows.append({"section": section, "scope": scope, "key": key, "label": label, "values": values,
                             "deltas": deltas, "regressed": regressed})  # fmt: skip
    diffs, alike = deployment_rows(columns)
    return Comparison([c.name for c in columns], base_col, rows, threshold_pct, columns, refs,
                      load_differences(columns), diffs, alike)  # fmt: skip
