"""JUnit XML: one test case per SLO, so CI systems show which target broke."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from ._summary import RunSummary

__all__ = ["junit_xml"]


def junit_xml(summary: RunSummary, suite: str = "tokenstorm.slo") -> str:
    """The JUnit document as a string."""
    cases = summary.slo_results if summary.sweep is None else []
    failures = sum(not r.passed for r in cases)
    root = ET.Element("testsuites")
    tests = len(cases) + 1 + (len(summary.sweep.get("levels") or []) + 1 if summary.sweep is not None else 0)
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(tests),
                       errors=str(int(summary.verdict == "run_failed")))  # fmt: skip
    run_case = ET.SubElement(ts, "testcase", classname=suite, name="run completed")
    if summary.verdict == "run_failed":
        ET.SubElement(run_case, "error", message=summary.reason)
    elif summary.incomplete:
        failures += 1
        ET.SubElement(run_case, "failure", message="run incomplete: " + "; ".join(summary.incomplete))
    if summary.sweep is not None:  # a sweep: one case per level; those past the knee broke by design
        failures += _sweep_cases(ts, summary.sweep, suite)
        cases = []
    for r in cases:
        name = f"{r.target + ': ' if r.target else ''}{r.scope} {r.metric} {r.stat} {r.op} {r.threshold:g}"
        # A/B: each target's cases apart ('.' splits package and class in CI viewers: not in a label)
        scope = f"{r.target.replace('.', '_')}.{r.scope}" if r.target else r.scope
        case = ET.SubElement(ts, "testcase", classname=f"{suite}.{scope}", name=name)
        measured = "no data" if r.measured is None else f"{r.measured:.4g}"
        if not r.passed:
            ET.SubElement(case, "failure", message=f"measured {measured}; target {r.op} {r.threshold:g}. {r.note}")
        ET.SubElement(case, "system-out").text = f"measured {measured}"
    ts.set("failures", str(failures))
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def _sweep_cases(ts: ET.Element, sweep: dict[str, Any], suite: str) -> int:
    """The knee case (fails without a knee) and one case per level: held, or skipped past the knee."""
    knee = sweep.get("knee_users")
    case = ET.SubElement(ts, "testcase", classname=f"{suite}.sweep", name="goodput knee found")
    if knee is None:
        ET.SubElement(case, "failure", message="no level met every per-request SLO")
    else:
        ET.SubElement(case, "system-out").text = f"knee: {knee} users, {sweep.get('knee_requests_per_s'):.4g} req/s"
    for level in sweep.get("levels") or []:
        case = ET.SubElement(
            ts, "testcase", classname=f"{suite}.sweep", name=f"{level['users']} users ({level['kind']})"
        )
        out = f"{level['requests_per_s']:.4g} req/s, {level['output_tokens_per_s']:.4g} output tok/s"
        if not level["held"]:
            ET.SubElement(case, "skipped", message=f"broke an SLO (past the knee): {out}")
        ET.SubElement(case, "system-out").text = out
    return int(knee is None)
