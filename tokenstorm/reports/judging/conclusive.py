"""Is every SLO answered yet? What ``--until-conclusive`` asks of a run while it runs.

A run with ``--until-conclusive`` keeps its load on until every SLO of its spec is held or failed — none
inconclusive — judged exactly as the final report will judge it: the run directory's records so far
(:func:`tokenstorm.reports.data.rundir.load_run`), the warm-up left out, every A/B target on its own, on the timing
source the run asked for, at its ``--confidence``. A target measured on nothing yet (no judged request of its
workload) is not answered either: a figure missing early in a run is no failure.

The load generator asks in a child process (``python -m tokenstorm.reports.judging.conclusive``, one JSON line in, one
out per check), so the reading and the statistics never hold up the event loop that reads the streams.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tokenstorm.reports.data.rundir import RunData, load_run
from tokenstorm.reports.judging.confidence import INCONCLUSIVE
from tokenstorm.reports.judging.formats import slo_value
from tokenstorm.reports.judging.slo import SloResult, judged_mask
from tokenstorm.reports.judging.slo_spec import SloSpec, load_slo_spec
from tokenstorm.reports.judging.targets import evaluate_each_target, target_labels
from tokenstorm.reports.judging.timing_source import choose_timing_source

__all__ = ["Answer", "answer", "is_open", "main", "result_words", "run_results"]


def run_results(run: RunData, spec: SloSpec) -> list[SloResult]:
    """Every SLO of ``spec`` judged on ``run`` as ``summary.json`` judges it (timing source, A/B targets)."""
    labels = target_labels(run)
    source = choose_timing_source(run, spec, labels, judged_mask(run, spec))
    return source.results if source.results is not None else evaluate_each_target(run, spec, labels)


def is_open(result: SloResult) -> bool:
    """Not answered yet: inconclusive, or judged on nothing measured so far (the run may still measure it)."""
    return result.judged and (result.result == INCONCLUSIVE or result.measured is None)


def result_words(result: SloResult) -> str:
    """``ttft_ms p99 412 ms [380 ms, 460 ms] vs <= 500 ms: held`` (an A/B target first, a workload before)."""
    head = " ".join(w for w in (result.target, "" if result.scope == "run" else result.scope) if w)
    name = f"{head + ' ' if head else ''}{result.metric} {result.stat}"
    value = slo_value(result.metric, result.measured)
    if result.ci_low is not None or result.ci_high is not None:
        low = "−∞" if result.ci_low is None else slo_value(result.metric, result.ci_low)
        high = "∞" if result.ci_high is None else slo_value(result.metric, result.ci_high)
        value += f" [{low}, {high}]"
    bound = slo_value(result.metric, result.threshold, threshold=True)
    word = result.result or ("not judged" if not result.judged else "held" if result.passed else "failed")
    if is_open(result) and result.measured is None:
        word = "not measured yet"
    elif result.result == INCONCLUSIVE and result.needed_requests:
        word += f", needs about {result.needed_requests:,} requests"
    return f"{name} {value} vs {result.op} {bound}: {word}"


@dataclass
class Answer:
    """One check of a running run: how many requests were judged, and each SLO in words."""

    requests: int
    answered: bool  # every SLO held or failed (and there was a judged request)
    held: list[str]
    failed: list[str]
    open: list[str]

    def as_dict(self) -> dict[str, Any]:
        """For the JSON line the child answers with."""
        return {
            "requests": self.requests,
            "answered": self.answered,
            "held": self.held,
            "failed": self.failed,
            "open": self.open,
        }


def answer(run: RunData, spec: SloSpec) -> Answer:
    """Whether every SLO of ``spec`` is answered on ``run``'s records so far."""
    requests = int(np.count_nonzero(judged_mask(run, spec)))
    results = run_results(run, spec) if requests else []
    still = [result_words(r) for r in results if is_open(r)]
    held = [result_words(r) for r in results if not is_open(r) and r.passed]
    failed = [result_words(r) for r in results if not is_open(r) and not r.passed]
    return Answer(requests, bool(requests) and not still, held, failed, still)


def main() -> None:
    """The child: for each line ``{"run_dir": ..., "slo": PATH or "", "slo_text": its text or null}`` on stdin
    (the text the run checked at its start, so an edit since changes nothing), one JSON line of
    :class:`Answer` (or ``{"error": ...}``) on stdout; ends at the end of stdin."""
    for line in sys.stdin:
        try:
            asked = json.loads(line)
            spec = load_slo_spec(str(asked.get("slo") or "") or None, asked.get("slo_text"))
            out: dict[str, Any] = answer(load_run(Path(asked["run_dir"])), spec).as_dict()
        except Exception as exc:  # one bad check must not end the run: the next may read a whole file
            out = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
