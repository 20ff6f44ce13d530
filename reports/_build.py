"""Building the outputs of a run: report.html, junit.xml, summary.json; and the exit code."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ._html import render_report
from ._junit import junit_xml
from ._rundir import load_run
from ._slo import SloSpec, load_slo_spec
from ._summary import RunSummary, summarize

__all__ = ["EXIT_CODES", "BuildResult", "build_report", "spec_for_run"]

#: Exit codes of a headless run (and of ``python -m reports build``).
EXIT_CODES = {"passed": 0, "failed": 1, "run_failed": 3}


@dataclass
class BuildResult:
    """What was written and what it concluded."""

    summary: RunSummary
    report: Path
    junit: Path
    summary_json: Path

    @property
    def exit_code(self) -> int:
        """0 SLOs held, 1 an SLO failed, 3 the run itself failed."""
        return EXIT_CODES[self.summary.verdict]


def spec_for_run(run_dir: Path, override: Path | None = None) -> SloSpec:
    """The SLO spec to judge ``run_dir`` by: ``override``, else the one the run used."""
    if override is not None:
        return load_slo_spec(override)
    meta_path = run_dir / "run.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        text = meta.get("slo_spec_text")
        if text:
            spec = load_slo_spec(text=text)
            spec.source = meta.get("slo_spec_source") or spec.source
            return spec
    return load_slo_spec()


def build_report(run_dir: Path, spec: SloSpec | None = None, run_failed_error_rate: float = 0.5) -> BuildResult:
    """Write the three outputs into ``run_dir``."""
    run = load_run(run_dir)
    spec = spec or spec_for_run(run_dir)
    limit = float(run.meta.get("options", {}).get("run_fail_error_rate") or run_failed_error_rate)
    summary = summarize(run, spec, run_failed_error_rate=limit)
    report = run_dir / "report.html"
    tmp = run_dir / "report.html.tmp"
    tmp.write_text(render_report(run, spec, summary), encoding="utf-8")
    tmp.replace(report)
    junit = run_dir / "junit.xml"
    junit.write_text(junit_xml(summary), encoding="utf-8")
    summary_json = run_dir / "summary.json"
    summary_json.write_text(json.dumps(summary.to_json(run), indent=2, default=str), encoding="utf-8")
    return BuildResult(summary, report, junit, summary_json)
