"""The report's answer quality as a reader sees it: the pass-rate lines on the first screen beside the
verdict, coloured by their SLOs; the quality section's table, needle table, figures (over time, against a
sweep's levels and a capacity search's steps), the consistency pairs and the failed answers — bounded and
escaped."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np

from tests.unit.reports.test_agent_report import _write_run
from tests.unit.reports.test_quality import SCRIPT, SLO, _probe, _reference, quality_rows
from tokenstorm.reports import build_report, load_slo_spec
from tokenstorm.reports.sections.quality.view import FAILED_ANSWERS_SHOWN
from tokenstorm.workloads.rundir import (
    CapacityResult,
    CapacityStep,
    LoadSample,
    LoadWriter,
    SweepLevel,
    SweepResult,
    write_capacity,
    write_sweep,
)


class _Elements(HTMLParser):
    """Every element's tag and attributes, and whether a <script> element holds the answer's text."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False


def _page(run_dir: Path) -> tuple[str, _Elements]:
    html = (run_dir / "report.html").read_text()
    parser = _Elements()
    parser.feed(html)
    return html, parser


def test_first_screen_shows_each_workloads_pass_rate_beside_the_verdict_coloured_by_its_slo(tmp_path: Path) -> None:
    rows = quality_rows()
    run_dir = _write_run(tmp_path / "run", rows)
    build_report(run_dir, load_slo_spec(text=SLO))
    html, page = _page(run_dir)
    ref = _reference(rows)
    # right under the verdict banner, before the headline table
    assert html.index('id="verdict"') < html.index('id="quality-verdict"') < html.index('id="headline"')
    lines = {a["data-scope"]: a for tag, a in page.elements
             if tag == "div" and "quality-line" in (a.get("class") or "")}  # fmt: skip
    assert set(lines) == {f"workload:{w}" for w in ref}
    for w, expected in ref.items():
        rate = expected["passed"] / expected["checked"]
        assert float(lines[f"workload:{w}"]["data-pass-rate"] or "nan") == rate
        assert f"Answers {w}: {rate:.2%} passed" in html
    # chat broke its quality SLO: red; contract held its needle SLO: green; code has none: neither
    assert "fail" in (lines["workload:chat"]["class"] or "") and "pass" in (lines["workload:contract"]["class"] or "")
    assert (lines["workload:code"]["class"] or "").split() == ["quality-line"]
    assert "quality ≥ 99.00% FAILED" in html


def test_quality_section_tables_and_failed_answers_are_bounded_and_escaped(tmp_path: Path) -> None:
    rows = quality_rows(n=1500)
    run_dir = _write_run(tmp_path / "run", rows)
    (run_dir / "probes.jsonl").write_text("\n".join([_probe("before", 0, "same"), _probe("under_load", 0, "same"),
                                                     _probe("before", 1, "before"),
                                                     _probe("under_load", 1, SCRIPT)]) + "\n")  # fmt: skip
    build_report(run_dir, load_slo_spec(text=SLO))
    html, page = _page(run_dir)
    assert not any("alert(" in s for s in page.scripts)  # the answers never became a script the page runs
    assert "&lt;script&gt;alert(&#39;answer&#39;)&lt;/script&gt;" in html and "&lt;b&gt;here&lt;/b&gt;" in html
    section = html[html.index('id="quality"') :]
    failed = re.findall(r'<tr data-check="([^"]+)"><td class="l">(\w+)</td>', section)
    assert len(failed) == FAILED_ANSWERS_SHOWN  # of hundreds kept: spread over every workload and check
    assert {w for _, w in failed} == {"chat", "code", "contract", "mine"}
    judged_failed = sum(1 for r in rows if r.get("check") not in (None, "pass") and r["ok"] and not r["warmup"])
    assert f"({judged_failed:,} judged answers failed a check;" in section
    cells = {(a["data-scope"], a["data-check"]) for tag, a in page.elements if tag == "tr" and a.get("data-check")
             and a.get("data-scope")}  # fmt: skip
    assert ("workload:chat", "every") in cells and ("workload:chat", "repetition") in cells
    assert ("workload:mine", "my_check") in cells
    assert 'id="needle-table"' in section and 'data-context="&gt;64K"' in section
    assert "<b>1 of 2</b> probe answers changed under load (50.00%)" in section
    assert 'id="quality-load"' not in section  # no load levels
    # Pass rate over time: interactive charts, a line per workload and per check.
    assert 'data-chart="quality-workloads"' in section and 'data-chart="quality-checks"' in section
    charts = {c["id"]: c for c in json.loads(re.search(r'id="chart-data">(.*?)</script>', html, re.S)[1])["charts"]}
    assert {s["label"] for s in charts["quality-workloads"]["series"]} == {"chat", "code", "contract", "mine"}
    assert {"repetition", "my_check"} <= {s["label"] for s in charts["quality-checks"]["series"]}
    assert all(0 <= y <= 100 for s in charts["quality-workloads"]["series"] for y in s["y"] if y is not None)


def test_a_run_without_checks_has_no_quality_section(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k not in ("check", "check_results", "answer_sample")}
            for r in quality_rows(n=100)]  # fmt: skip
    run_dir = _write_run(tmp_path / "run", rows)
    build_report(run_dir)
    html = (run_dir / "report.html").read_text()
    assert 'id="quality"' not in html and 'id="quality-verdict"' not in html
    assert "quality" not in json.loads((run_dir / "summary.json").read_text())


def test_pass_rate_against_sweep_levels_and_capacity_steps(tmp_path: Path) -> None:
    rows = [r for r in quality_rows(n=900) if r["workload"] == "contract"]
    sweep_dir = _write_run(tmp_path / "sweep", rows)
    levels = [SweepLevel(users=u, kind="level", started_epoch_s=1000.0 + 30 * i, judged_from_epoch_s=1015.0 + 30 * i,
                         judged_to_epoch_s=1030.0 + 30 * i, requests=10, requests_per_s=1.0, output_tokens_per_s=40.0,
                         held=True) for i, u in enumerate((2, 4, 8))]  # fmt: skip
    write_sweep(sweep_dir, SweepResult(levels=levels, level_time_s=30.0, complete=True))
    build_report(sweep_dir, load_slo_spec(text="slos:\n  contract:\n    quality_needle: {min: 50%}\n"))
    html = (sweep_dir / "report.html").read_text()
    assert 'id="quality-load"' in html and "sweep level (offered users" in html
    capacity_dir = _write_run(tmp_path / "capacity", rows)
    write_capacity(capacity_dir, CapacityResult(4, 8, [CapacityStep(2, 10, True), CapacityStep(4, 10, True),
                                                       CapacityStep(8, 10, False)]))  # fmt: skip
    writer = LoadWriter(capacity_dir)
    for t in np.arange(1000.0, 1100.0, 1.0):
        writer.write(LoadSample(float(t), 2 if t < 1030 else 4 if t < 1060 else 8))
    writer.close()
    build_report(capacity_dir, load_slo_spec(text="slos:\n  contract:\n    quality_needle: {min: 50%}\n"))
    assert "capacity step (users when the request started)" in (capacity_dir / "report.html").read_text()
