"""The end of a run: its report built (report.html, junit.xml, summary.json), the process exit code set
from its verdict, and the closing block printed — the report's exact figures, then its path, whether its
timing can be trusted and the verdict, the last line."""

from __future__ import annotations

import logging
from pathlib import Path

from locust.env import Environment

from ...rundir import EXIT_RUN_FAILED
from . import otlp, write_faults
from .context import RunContext
from .progress_display import console_logger

__all__ = ["build_outputs", "print_closing"]

log = logging.getLogger("tokenstorm")


def build_outputs(environment: Environment, ctx: RunContext) -> None:
    """Write report.html, junit.xml, summary.json and set the process exit code."""
    from tokenstorm.reports import build_report, console_block
    from tokenstorm.reports.render.console import fit

    if ctx.run_dir is None or ctx.report_built:
        return
    ctx.report_built = True
    otlp.await_last_spans(environment, ctx.writer.count if ctx.writer else 0)  # vLLM sends its spans every 5 s
    if ctx.snapshots is not None:
        ctx.snapshots.stop()  # a snapshot finishing later would overwrite the final report
    ctx.flush()
    ctx.server_timing.at_end()  # every record is in: a run whose server sent no timing of its own says so
    try:
        result = build_report(ctx.run_dir, ctx.slo_spec)
    except write_faults.WriteFailed:
        raise  # a run-level fault, said in one line (write_faults.end_run)
    except Exception:  # a bug in the report must not hide the records; say where they are
        log.exception("tokenstorm: building the report failed; the records are in %s", ctx.run_dir)
        environment.process_exit_code = EXIT_RUN_FAILED
        return
    if environment.process_exit_code != EXIT_RUN_FAILED:
        environment.process_exit_code = result.exit_code
    summary = result.summary
    # The report's exact figures, as vllm bench serve prints them; then the report's path, whether the
    # figures can be trusted at all, and the verdict — the last line.
    lines = [(logging.INFO, line) for line in console_block(summary)]
    lines.append((logging.INFO, f"report {_shown_path(result.report)}"))
    if summary.fidelity is not None:
        lines.append((logging.INFO if summary.fidelity.trustworthy else logging.WARNING, summary.fidelity.reason))
    # (non-breaking spaces: a wrapped verdict keeps "(exit code N)" whole)
    verdict = f"{summary.verdict.upper()} — {summary.reason} (exit\u00a0code\u00a0{result.exit_code})"
    lines.append((logging.INFO if result.exit_code == 0 else logging.ERROR, verdict))
    ctx.closing_lines = [(level, part.replace("\u00a0", " ")) for level, line in lines for part in fit(line)]
    if not ctx.options.headless:  # the web UI's runs: at each run's end (a headless one's at Locust's quit)
        print_closing(ctx)


def _shown_path(path: Path) -> str:
    """``path`` as the user can type it from here: relative to the working folder when it is under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def print_closing(ctx: RunContext) -> None:
    """Print the closing block as a block: no log prefix on its lines (Locust's own tables are printed
    the same way). A headless run prints it at Locust's ``quit`` event, after Locust's error report."""
    lines, ctx.closing_lines = ctx.closing_lines, []
    out = console_logger()
    for level, line in lines:
        out.log(max(level, logging.INFO), "%s", line)
