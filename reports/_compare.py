"""Comparing runs side by side (FP8 vs AWQ, block sizes, ...) with a regression verdict.

Each run's ``summary.json`` is read (built first if missing). For every metric the delta
against the baseline run is given in percent; a latency or error-rate metric that grew, or a
throughput that fell, by more than ``threshold_pct`` is a regression.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workloads.rundir import read_summary

__all__ = ["COMPARED_METRICS", "Comparison", "compare_runs"]

#: (summary key, label, True when higher is better)
COMPARED_METRICS = (
    ("median_ttft_ms", "TTFT p50 ms", False),
    ("p95_ttft_ms", "TTFT p95 ms", False),
    ("p99_ttft_ms", "TTFT p99 ms", False),
    ("median_itl_ms", "ITL p50 ms", False),
    ("p99_itl_ms", "ITL p99 ms", False),
    ("median_tpot_ms", "TPOT p50 ms", False),
    ("p95_e2el_ms", "E2E p95 ms", False),
    ("request_throughput", "requests/s", True),
    ("output_throughput", "output tok/s", True),
    ("output_throughput_per_gpu", "output tok/s per GPU", True),
    ("request_goodput", "goodput req/s", True),
    ("error_rate", "error rate", False),
    ("cost_per_1m_output_tokens", "cost / 1M output tok", False),
    ("cost_per_1m_total_tokens", "cost / 1M total tok", False),
)


@dataclass
class Comparison:
    """Rows of (scope, metric label, values per run, delta % per run, regressed per run)."""

    runs: list[str]
    baseline: int
    rows: list[dict[str, Any]]
    threshold_pct: float

    @property
    def regressions(self) -> list[dict[str, Any]]:
        """Rows where some run regressed against the baseline."""
        return [r for r in self.rows if any(r["regressed"])]

    def to_text(self) -> str:
        """A plain table for the console."""
        width = max(12, *(len(n) for n in self.runs))
        head = f"{'scope':<14} {'metric':<22} " + " ".join(f"{n[-width:]:>{width}}" for n in self.runs)
        lines = [head, "-" * len(head)]
        for r in self.rows:
            cells = []
            for i, v in enumerate(r["values"]):
                cell = "—" if v is None else f"{v:.4g}"
                if i != self.baseline and r["deltas"][i] is not None:
                    cell += f" ({r['deltas'][i]:+.1f}%{'!' if r['regressed'][i] else ''})"
                cells.append(f"{cell:>{width}}")
            lines.append(f"{r['scope']:<14} {r['label']:<22} " + " ".join(cells))
        verdict = (
            f"REGRESSION: {len(self.regressions)} metric(s) worse than baseline by > {self.threshold_pct:g}%"
            if self.regressions
            else f"no regression beyond {self.threshold_pct:g}% against {self.runs[self.baseline]}"
        )
        return "\n".join([*lines, "", verdict])

    def to_html(self) -> str:
        """A small self-contained HTML table (every name escaped)."""
        e = html.escape
        head = "".join(f"<th>{e(n)}</th>" for n in self.runs)
        body = []
        for r in self.rows:
            tds = []
            for i, v in enumerate(r["values"]):
                d = r["deltas"][i]
                txt = "—" if v is None else f"{v:.4g}"
                if i != self.baseline and d is not None:
                    txt += f" ({d:+.1f}%)"
                cls = ' class="fail"' if r["regressed"][i] else ""
                tds.append(f"<td{cls}>{e(txt)}</td>")
            body.append(f"<tr><td>{e(r['scope'])}</td><td>{e(r['label'])}</td>{''.join(tds)}</tr>")
        return (
            "<!doctype html><meta charset='utf-8'><title>tokenstorm comparison</title>"
            "<style>td,th{border:1px solid #ccc;padding:3px 8px}.fail{color:#c62828;font-weight:600}</style>"
            f"<table><tr><th>scope</th><th>metric</th>{head}</tr>{''.join(body)}</table>"
            f"<p>{e(self.to_text().splitlines()[-1])}</p>"
        )


def _summary(run_dir: Path) -> dict[str, Any]:
    summary = read_summary(run_dir)
    if summary is None:
        from ._build import build_report

        build_report(run_dir)
        summary = read_summary(run_dir)
    return summary or {}


def compare_runs(run_dirs: list[Path], baseline: int = 0, threshold_pct: float = 10.0) -> Comparison:
    """Compare ``run_dirs`` against ``run_dirs[baseline]``."""
    summaries = [_summary(d) for d in run_dirs]
    scopes: list[tuple[str, list[dict[str, Any]]]] = [("all", summaries)]
    workloads = sorted({w for s in summaries for w in s.get("workloads", {})})
    for w in workloads:
        scopes.append((w, [s.get("workloads", {}).get(w, {}) for s in summaries]))
    rows = []
    for scope, blocks in scopes:
        for key, label, higher_better in COMPARED_METRICS:
            values = [b.get(key) for b in blocks]
            if all(v is None for v in values):
                continue  # a figure no run has (cost without a price, a workload's cost): no empty row
            base = values[baseline]
            deltas: list[float | None] = []
            regressed = []
            for i, v in enumerate(values):
                if i == baseline or v is None or base is None:
                    deltas.append(None)
                    regressed.append(False)
                    continue
                if key == "error_rate":  # percentage points: 0% -> 2% is a regression
                    delta = (v - base) * 100
                else:
                    delta = (v - base) / base * 100 if base else (0.0 if v == base else float("inf"))
                deltas.append(delta)
                worse = -delta if higher_better else delta
                regressed.append(worse > threshold_pct)
            rows.append({"scope": scope, "key": key, "label": label, "values": values, "deltas": deltas,
                         "regressed": regressed})  # fmt: skip
    return Comparison([d.name for d in run_dirs], baseline, rows, threshold_pct)
