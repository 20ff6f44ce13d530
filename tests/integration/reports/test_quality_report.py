"""Answer quality as a user meets it: ``python -m tokenstorm.reports build`` on a written run directory exits 1 when a
``quality`` SLO is below its minimum (its JUnit case fails), 0 when the minimum is met; in a real browser
the pass rate sits on the first screen beside the verdict, and a failed answer holding markup and script is
shown as text — it never runs."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.integration.reports.test_reports import CHROMIUM, XSS
from tests.unit.reports.test_agent_report import _write_run
from tests.unit.reports.test_quality import _reference, quality_rows

VIEWPORT = {"width": 1400, "height": 900}


def _build(run_dir: Path, slo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokenstorm.reports", "build", str(run_dir), "--slo", str(slo)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def _open(html: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: scripts/test.sh installs Debian's chromium package")
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport=VIEWPORT)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(html.as_uri())
        page.wait_for_function("document.body.dataset.ready === '1'")
        line = page.locator('#quality-verdict .quality-line[data-scope="workload:chat"]')
        out = {
            "line_box": line.bounding_box(),
            "line": line.inner_text(),
            "line_colour": line.evaluate("e => getComputedStyle(e).backgroundColor"),
            "verdict_colour": page.locator("#verdict").evaluate("e => getComputedStyle(e).backgroundColor"),
            "pwned": page.evaluate("document.body.dataset.pwned || ''"),
            "samples": page.locator("#failed-answers-table td.answer-sample").all_inner_texts(),
            "problems": problems,
        }
        browser.close()
    return out


def test_a_quality_slo_below_its_minimum_fails_the_build_and_the_page_shows_it(tmp_path: Path) -> None:
    rows = quality_rows()
    for r in rows:  # the answers as a server sent them: markup and script included
        if r.get("answer_sample"):
            r["answer_sample"] = f"{r['answer_sample']} {XSS}"
    run_dir = _write_run(tmp_path / "run", rows)
    ref = _reference(rows)["chat"]
    rate = ref["passed"] / ref["checked"]
    strict = tmp_path / "strict.yaml"
    strict.write_text("slos:\n  chat:\n    quality: {min: 99%}\n    ttft_ms: {p95: 60000}\n")
    failed = _build(run_dir, strict)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "chat quality min" in failed.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["verdict"] == "failed" and summary["quality"]["workloads"]["chat"]["pass_rate"] == rate
    cases = {c.get("name"): c for c in ET.fromstring((run_dir / "junit.xml").read_text()).iter("testcase")}
    assert cases["chat quality min >= 0.99"].find("failure") is not None
    assert cases["chat ttft_ms p95 <= 60000"].find("failure") is None
    shown = _open(run_dir / "report.html")
    assert shown["problems"] == [] and shown["pwned"] == ""  # the answers' script never ran
    assert any(XSS in s for s in shown["samples"])  # ... and reads as the text the server sent
    box = shown["line_box"]
    assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"]  # on the first screen
    assert f"Answers chat: {rate:.2%} passed" in shown["line"] and "FAILED" in shown["line"]
    assert shown["line_colour"] == shown["verdict_colour"]  # red as the failed verdict is
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text(f"slos:\n  chat:\n    quality: {{min: {rate * 100 - 0.5:.2f}%}}\n")
    held = _build(run_dir, lenient)
    assert held.returncode == 0, held.stdout + held.stderr
    cases = {c.get("name"): c for c in ET.fromstring((run_dir / "junit.xml").read_text()).iter("testcase")}
    assert all(c.find("failure") is None for c in cases.values())
