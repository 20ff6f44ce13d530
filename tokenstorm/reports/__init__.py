"""Run directory reader, SLO evaluation, HTML/JUnit/JSON outputs and run comparison."""

from tokenstorm.reports.build import EXIT_CODES, BuildResult, build_report, spec_for_run
from tokenstorm.reports.compare.runs import Comparison, compare_runs
from tokenstorm.reports.data.rundir import RunData, load_run, run_from_records
from tokenstorm.reports.judging.fidelity import Fidelity, evaluate_fidelity
from tokenstorm.reports.judging.slo import SloResult, evaluate, per_request_spec
from tokenstorm.reports.judging.slo_spec import DEFAULT_SLO_TEXT, SloSpec, SloSpecError, SloTarget, load_slo_spec
from tokenstorm.reports.judging.summary import RunSummary, summarize
from tokenstorm.reports.judging.targets import evaluate_each_target
from tokenstorm.reports.render.console import console_block
from tokenstorm.reports.sections.sweep.model import measure_sweep_level

__all__ = [
    "DEFAULT_SLO_TEXT",
    "EXIT_CODES",
    "BuildResult",
    "Comparison",
    "Fidelity",
    "RunData",
    "RunSummary",
    "SloResult",
    "SloSpec",
    "SloSpecError",
    "SloTarget",
    "build_report",
    "compare_runs",
    "console_block",
    "evaluate",
    "evaluate_each_target",
    "evaluate_fidelity",
    "load_run",
    "load_slo_spec",
    "measure_sweep_level",
    "per_request_spec",
    "run_from_records",
    "spec_for_run",
    "summarize",
]
