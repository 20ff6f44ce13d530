"""Building the outputs of a run: report.html, junit.xml, summary.json; and the exit code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenstorm.reports.data.rundir import load_run
from tokenstorm.reports.judging.slo_spec import SloSpec, load_slo_spec
from tokenstorm.reports.judging.summary import RunSummary, summarize
from tokenstorm.reports.render.html import render_report
from tokenstorm.reports.render.junit import junit_xml
from tokenstorm.reports.sections.sweep.capacity import capacity_block, capacity_verdict
from tokenstorm.reports.sections.sweep.verdict import sweep_block, sweep_verdict
from tokenstorm.workloads.rundir import EXIT_CODES, JUNIT_FILE, REPORT_FILE, SUMMARY_FILE, read_run_meta, write_summary
from tokenstorm.workloads.rundir.faults import write_bytes_atomic

__all__ = ["EXIT_CODES", "BuildResult", "build_report", "spec_for_run"]


@dataclass
class BuildResult:
    """What was written and what it concluded."""

    summary: RunSummary
    report: Path
    junit: Path
    summary_json: Path

    @property
    def exit_code(self) -> int:
        """0 SLOs held, 1 an SLO failed, 3 the run itself failed, 4 the run is incomplete, 5 the SLOs
        were judged on timing that is not trustworthy (the load generator read late: see
        ``summary.fidelity``), 6 inconclusive (no SLO failed; an interval straddles its target)."""
        return EXIT_CODES[self.summary.verdict]


def spec_for_run(run_dir: Path, override: Path | None = None) -> SloSpec:
    """The SLO spec to judge ``run_dir`` by: ``override``, else the one the run used."""
    if override is not None:
        return load_slo_spec(override)
    meta = read_run_meta(run_dir)
    if meta is not None and meta.slo_spec_text:
        spec = load_slo_spec(text=meta.slo_spec_text)
        spec.source = meta.slo_spec_source or spec.source
        return spec
    return load_slo_spec()


def build_report(
    run_dir: Path,
    spec: SloSpec | None = None,
    run_failed_error_rate: float = 0.5,
    live: bool = False,
    gpu_cost_per_hour: float | None = None,
    confidence: float | None = None,
) -> BuildResult:
    """Write the three outputs into ``run_dir`` (``live``: a view of a run still going — report.html only;
    ``gpu_cost_per_hour``: a price that overrides the run's and the SLO file's; ``confidence``: the SLO
    intervals' (overrides the run's ``--confidence``; 0: point estimates))."""
    run = load_run(run_dir)
    if confidence is not None:
        run.meta.options["confidence"] = confidence
    spec = spec or spec_for_run(run_dir)
    limit = float(run.meta.option("run_fail_error_rate", run_failed_error_rate))
    summary = summarize(run, spec, run_failed_error_rate=limit, live=live, gpu_cost_per_hour=gpu_cost_per_hour)
    summary.sweep = sweep_block(run)
    # The knee, not the pooled levels: a sweep means to push its top levels past what holds (its load
    # generators' too), and each level's timing is judged with the level.
    if summary.sweep is not None and summary.verdict in ("passed", "failed", "unreliable", "inconclusive"):
        summary.verdict, summary.reason = sweep_verdict(summary.sweep)
    # A capacity search stops at the step that broke: its verdict is the highest step that held, not the pool.
    summary.capacity = capacity_block(run) if summary.sweep is None else None
    if summary.capacity is not None and summary.verdict in ("passed", "failed", "unreliable", "inconclusive"):
        summary.verdict, summary.reason = capacity_verdict(summary.capacity)
    report = run_dir / REPORT_FILE
    # Each written whole or not at all (WriteFailed on a full disk; no .tmp file left behind).
    write_bytes_atomic(report, render_report(run, spec, summary).encode(), "the report")
    junit = run_dir / JUNIT_FILE
    summary_json = run_dir / SUMMARY_FILE
    if not live:  # a live view is only a page: CI must never pick up a verdict of a run still going
        write_bytes_atomic(junit, junit_xml(summary).encode(), "the report")
        summary_json = write_summary(run_dir, summary.to_json(run))
    return BuildResult(summary, report, junit, summary_json)
