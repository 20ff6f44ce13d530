"""JUnit XML: one test case per SLO, so CI systems show which target broke."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ._summary import RunSummary

__all__ = ["junit_xml"]


def junit_xml(summary: RunSummary, suite: str = "tokenstorm.slo") -> str:
    """The JUnit document as a string."""
    cases = summary.slo_results
    failures = sum(not r.passed for r in cases)
    root = ET.Element("testsuites")
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases) + 1),
                       errors=str(int(summary.verdict == "run_failed")))  # fmt: skip
    run_case = ET.SubElement(ts, "testcase", classname=suite, name="run completed")
    if summary.verdict == "run_failed":
        ET.SubElement(run_case, "error", message=summary.reason)
    elif summary.incomplete:
        failures += 1
        ET.SubElement(run_case, "failure", message="run incomplete: " + "; ".join(summary.incomplete))
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
