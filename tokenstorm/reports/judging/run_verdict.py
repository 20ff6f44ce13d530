"""A run's verdict: passed, failed, inconclusive, run_failed, incomplete or unreliable, and the sentence that
says why (:func:`run_verdict`), from the SLO results, the error rate, the timing fidelity and whether the run
finished (:func:`incompleteness`)."""

from __future__ import annotations

from dataclasses import replace  # noqa: F401
from typing import Any

from tokenstorm.reports.data.rundir import RunData
from tokenstorm.reports.judging.fidelity import UNTRUSTED, Fidelity
from tokenstorm.reports.judging.refusals import why_none_succeeded, why_tools_refused
from tokenstorm.reports.judging.slo import SloResult
from tokenstorm.reports.judging.slo_spec import SloSpec
from tokenstorm.reports.judging.timing_source import TimingSource
from tokenstorm.reports.judging.verdict_words import (
    SLO_VERDICTS,
    default_check_sentence,
    is_default_spec,
    results_word,
    slo_verdict,
)

__all__ = ["incompleteness", "run_verdict"]

#: the verdicts the SLOs alone set; summary.json's verdict by the SLOs' word
_JUDGED = ("passed", "failed", "inconclusive")
_WORDS = {"passed": "held", "failed": "failed", "inconclusive": "inconclusive"}


def incompleteness(run: RunData, live: bool = False) -> list[str]:
    """Why ``run``'s figures are partial: interrupted before its planned end (SIGTERM, Ctrl-C), workers lost
    (unless ``--allow-lost-workers``), or never finished (run.json says running, and this is not a live view)."""
    meta = run.meta
    out = []
    if meta.status == "interrupted":
        out.append(f"interrupted by {meta.interrupted or 'a signal'} — the figures cover what completed until then")
    if meta.workers_lost and not meta.option("allow_lost_workers", False):
        out.append(
            f"{len(meta.workers_lost)} of {len(meta.workers_seen) or '?'} workers were lost during the run "
            f"({', '.join(sorted(meta.workers_lost))}): the load after that was lower than asked for "
            "(--allow-lost-workers accepts this)"
        )
    if meta.status == "running" and not live:
        out.append(
            "the run never finished (run.json still says 'running': the load test was killed or crashed); "
            "the figures cover what was recorded until then"
        )
    return out


def run_verdict(
    run: RunData,
    spec: SloSpec,
    overall: dict[str, Any],
    results: list[SloResult],
    fidelity: Fidelity,
    source: TimingSource,
    ab: dict[str, Any] | None,
    run_failed_error_rate: float,
    live: bool,
) -> tuple[str, str, list[str]]:
    """The run's verdict, the sentence that says why, and what left it incomplete."""
    df = run.requests
    default_check = is_default_spec(spec)
    problem = run.meta.problem
    if problem:
        verdict, reason = "run_failed", str(problem)
    elif overall["requests"] == 0 and len(df):
        verdict = "run_failed"
        reason = (
            f"none of the {len(df)} recorded requests could be judged: all fell in the warm-up "
            f"({spec.warmup_s:g} s) or were cancelled at the end — run longer than the warm-up"
        )
    elif overall["requests"] == 0:
        verdict, reason = "run_failed", "no requests were recorded"
    elif overall["completed"] == 0:
        verdict, reason = "run_failed", "no request succeeded" + why_none_succeeded(df)
    elif (overall["error_rate"] or 0) > run_failed_error_rate:
        verdict = "run_failed"
        reason = f"{overall['error_rate']:.0%} of requests failed (the run fails above {run_failed_error_rate:.0%})"
    elif default_check:
        verdict, reason = SLO_VERDICTS[results_word(results)], default_check_sentence(results)
    else:
        verdict, reason = slo_verdict(results)
    if verdict in ("failed", "run_failed"):
        reason += why_tools_refused(df)
    incomplete = incompleteness(run, live)
    untrusted = fidelity.reason.removeprefix(UNTRUSTED)
    if incomplete and verdict != "run_failed":
        slos = "" if default_check else f"SLOs {_WORDS[verdict]} "
        timing = "" if fidelity.trustworthy else f"; timing not trustworthy either — {untrusted}"
        verdict = "incomplete"
        reason = f"run incomplete — {incomplete[0]} ({slos}on what was recorded: {reason}){timing}"
    elif source.used == "server":
        pass  # the latency was judged on the server's timing: the client's late reads set no verdict (said below)
    elif not fidelity.trustworthy and verdict in _JUDGED and run.meta.option("timing_verdict") == "warn":
        reason += f" — timing not trustworthy (--timing-verdict warn): {untrusted}"
    elif not fidelity.trustworthy and verdict in _JUDGED:
        failed = reason.replace(" SLOs failed:", " SLOs failed on what was measured:", 1)
        slos = reason if default_check else "SLOs held" if verdict == "passed" else failed
        verdict, reason = "unreliable", f"timing not trustworthy — {untrusted} ({slos})"
    verdict, reason = source.said(verdict, reason)
    if ab is not None and ab.get("sentence") and verdict in _JUDGED:
        reason += f" — {ab['sentence']}"
    return verdict, reason, incomplete
