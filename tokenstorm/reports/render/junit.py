"""JUnit XML: one test case per SLO, so CI systems show which target broke (a ``quality`` target among
them; a sweep's and a capacity search's: one per level or step instead), one
(``tokenstorm.timing_fidelity``) that fails when the run's timing is not trustworthy (skipped, saying so,
when ``--timing-source`` judged the latency on the server's timing instead), and one
(``tokenstorm.quality``) that lists the answers' pass rates (skipped when no answer was checked)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from tokenstorm.reports.judging.quality import CONSISTENCY_METRIC, is_quality_metric
from tokenstorm.reports.judging.summary import RunSummary
from tokenstorm.reports.judging.verdict_words import ci_text, needed_text

__all__ = ["junit_xml"]


def junit_xml(summary: RunSummary, suite: str = "tokenstorm.slo") -> str:
    """The JUnit document as a string."""
    levelled = summary.sweep is not None or summary.capacity is not None  # judged per level / step, not pooled
    cases = [] if levelled else summary.slo_results
    failures = sum(not r.passed and r.result != "inconclusive" for r in cases)
    root = ET.Element("testsuites")
    tests = len(cases) + 1 + (len(summary.sweep.get("levels") or []) + 1 if summary.sweep is not None else 0)
    tests += len(summary.capacity.get("steps") or []) + 1 if summary.capacity is not None else 0
    tests += (summary.fidelity is not None) + 1
    ts = ET.SubElement(
        root, "testsuite", name=suite, tests=str(tests), errors=str(int(summary.verdict == "run_failed"))
    )
    run_case = ET.SubElement(ts, "testcase", classname=suite, name="run completed")
    if summary.verdict == "run_failed":
        ET.SubElement(run_case, "error", message=summary.reason)
    elif summary.incomplete:
        failures += 1
        ET.SubElement(run_case, "failure", message="run incomplete: " + "; ".join(summary.incomplete))
    failures += _fidelity_case(ts, summary)
    _quality_case(ts, summary)
    if summary.sweep is not None:  # a sweep: one case per level; those past the knee broke by design
        failures += _sweep_cases(ts, summary.sweep, suite)
    if summary.capacity is not None:  # a capacity search: one case per step; the one that broke ended it
        failures += _capacity_cases(ts, summary.capacity, suite)
    for r in cases:
        name = f"{r.target + ': ' if r.target else ''}{r.scope} {r.metric} {r.stat} {r.op} {r.threshold:g}"
        # A/B: each target's cases apart ('.' splits package and class in CI viewers: not in a label)
        scope = f"{r.target.replace('.', '_')}.{r.scope}" if r.target else r.scope
        case = ET.SubElement(ts, "testcase", classname=f"{suite}.{scope}", name=name)
        measured = "no data" if r.measured is None else f"{r.measured:.4g}"
        if r.measured is not None and (is_quality_metric(r.metric) or r.metric == CONSISTENCY_METRIC):
            measured += f" ({r.measured:.2%})"
        if not r.judged:  # a GPU SLO in a run that sampled no GPU: skipped, saying why
            ET.SubElement(case, "skipped", message=r.note)
            continue
        if r.confidence:
            measured += f" ({ci_text(r)})"
        if r.result == "inconclusive":  # neither held nor failed: the run's exit code 6 says so
            message = f"inconclusive: measured {measured}; target {r.op} {r.threshold:g}{needed_text(r)}"
            ET.SubElement(case, "skipped", message=message)
        elif not r.passed:
            ET.SubElement(case, "failure", message=f"measured {measured}; target {r.op} {r.threshold:g}. {r.note}")
        ET.SubElement(case, "system-out").text = f"measured {measured}" + (f" ({r.note})" if r.note else "")
    ts.set("failures", str(failures))
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def _fidelity_case(ts: ET.Element, summary: RunSummary) -> int:
    """The timing-fidelity case: fails when the timing is not trustworthy; skipped when it was not
    measured, with ``--timing-verdict warn``, or on a sweep (each level's timing is judged with the
    level, not pooled)."""
    fidelity = summary.fidelity
    if fidelity is None:
        return 0
    case = ET.SubElement(ts, "testcase", classname="tokenstorm", name="timing_fidelity")
    # passed/failed with untrustworthy timing: the run said so but was told not to fail on it
    levelled = summary.sweep is not None or summary.capacity is not None
    warned = not fidelity.trustworthy and summary.verdict in ("passed", "failed", "inconclusive") and not levelled
    failed = fidelity.measured and not fidelity.trustworthy and not levelled and not warned
    server = summary.timing is not None and summary.timing.used == "server"
    if not fidelity.measured:
        ET.SubElement(case, "skipped", message=fidelity.reason)
    elif server and summary.timing is not None:  # --timing-source: the SLOs did not rest on the client's reads
        why = f"latency judged on the server's timing, not what users saw: {summary.timing.why}"
        ET.SubElement(case, "skipped", message=f"{why}. {fidelity.reason}")
    elif warned:
        ET.SubElement(case, "skipped", message=f"--timing-verdict warn: {fidelity.reason}")
    elif not fidelity.trustworthy and levelled:
        what = "sweep: each level" if summary.sweep is not None else "capacity search: each step"
        ET.SubElement(case, "skipped", message=f"{what} judged apart; pooled: {fidelity.reason}")
    elif failed:
        ET.SubElement(case, "failure", message=fidelity.reason)
    ET.SubElement(case, "system-out").text = fidelity.reason  # after the outcome, as the JUnit schema orders
    return int(failed)


def _rate(block: dict[str, Any]) -> str:
    rate = block.get("pass_rate")
    return f"{'—' if rate is None else f'{rate:.2%}'} of {block.get('checked', 0):,}"


def _quality_case(ts: ET.Element, summary: RunSummary) -> None:
    """The answers' pass rates, per workload and check (the quality SLOs' own cases judge them)."""
    case = ET.SubElement(ts, "testcase", classname="tokenstorm", name="quality")
    quality = summary.quality
    if quality is None:
        ET.SubElement(case, "skipped", message="no answer was checked")
        return
    lines = [f"all workloads: {_rate(quality['run'])} checked answers passed"]
    for workload, block in sorted((quality.get("workloads") or {}).items()):
        checks = ", ".join(f"{name} {_rate(b)}" for name, b in (block.get("by_check") or {}).items())
        lines.append(f"{workload}: {_rate(block)} passed ({checks})")
    ET.SubElement(case, "system-out").text = "\n".join(lines)


def _found_case(
    ts: ET.Element, classname: str, name: str, found: str | None, failure: str, undecided: list[int] | None = None
) -> int:
    """A search's own case: what it found as its output, or a failure when it found nothing — skipped instead
    when levels that were too short to tell (``undecided``) may hold it; 1 when it failed."""
    case = ET.SubElement(ts, "testcase", classname=classname, name=name)
    if found is None and undecided:
        users = ", ".join(str(u) for u in undecided)
        ET.SubElement(case, "skipped", message=f"inconclusive: {users} users too few requests to tell; {failure}")
    elif found is None:
        ET.SubElement(case, "failure", message=failure)
        return 1
    else:
        ET.SubElement(case, "system-out").text = found
    return 0


def _sweep_cases(ts: ET.Element, sweep: dict[str, Any], suite: str) -> int:
    """The knee case (fails without a knee) and one case per level: held, or skipped past the knee."""
    knee = sweep.get("knee_users")
    found = None if knee is None else f"knee: {knee} users, {sweep.get('knee_requests_per_s'):.4g} req/s"
    undecided = [int(u) for u in sweep.get("knee_inconclusive_users") or []]
    failed = _found_case(
        ts, f"{suite}.sweep", "goodput knee found", found, "no level met every per-request SLO", undecided
    )
    for level in sweep.get("levels") or []:
        case = ET.SubElement(
            ts, "testcase", classname=f"{suite}.sweep", name=f"{level['users']} users ({level['kind']})"
        )
        out = f"{level['requests_per_s']:.4g} req/s, {level['output_tokens_per_s']:.4g} output tok/s"
        if level.get("result") == "inconclusive":
            ET.SubElement(case, "skipped", message=f"inconclusive (too few requests to tell): {out}")
        elif not level["held"]:
            ET.SubElement(case, "skipped", message=f"broke an SLO (past the knee): {out}")
        ET.SubElement(case, "system-out").text = out
    return failed


def _capacity_cases(ts: ET.Element, capacity: dict[str, Any], suite: str) -> int:
    """The capacity case (fails when no step held) and one case per step: held, or skipped where it broke."""
    best = capacity.get("highest_users_that_held")
    found = None if best is None else f"highest load that held: {best} users"
    undecided = [int(u) for u in capacity.get("inconclusive_users") or []]
    failed = _found_case(ts, f"{suite}.capacity", "a step held", found, "no step met every per-request SLO", undecided)
    for step in capacity.get("steps") or []:
        case = ET.SubElement(ts, "testcase", classname=f"{suite}.capacity", name=f"{step['users']} users")
        measured = (step.get("measured") or {}).items()
        out = ", ".join(f"{k} {'no data' if v is None else f'{v:.4g}'}" for k, v in measured)
        if step.get("result") == "inconclusive":
            ET.SubElement(case, "skipped", message=f"inconclusive (too few requests to tell): {out}")
        elif not step["held"]:
            why = "broke an SLO" if step.get("timing_trustworthy", True) else "timing not trustworthy"
            ET.SubElement(case, "skipped", message=f"{why} (where the search stopped): {out}")
        ET.SubElement(case, "system-out").text = out or "no SLO measured"
    return failed
