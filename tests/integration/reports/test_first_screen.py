"""The report's first screen in a real browser (Chromium, 1400×900): the verdict and the headline row,
its figures equal to numpy on the run's raw records, are inside the first 900 px; an A/B run's answer
comes before its SLO table; the figures use the page's width. Screenshots are kept in the test's tmp dir."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.integration.reports.test_reports import CHROMIUM
from tests.unit.reports.test_headline import _ab_run, headline_reference
from tokenstorm.reports import build_report, load_slo_spec

VIEWPORT = {"width": 1400, "height": 900}
#: the headline figures the test reads off the page
FIGURES = ("completed", "failed", "cancelled", "records", "request_throughput", "output_throughput",
           "total_token_throughput", "total_input_tokens", "total_output_tokens", "achieved_concurrency",
           "median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms", "median_tpot_ms", "p99_tpot_ms",
           "median_e2el_ms", "p99_e2el_ms")  # fmt: skip


def _first_screen(html_path: Path, screenshot: Path, rows: list[str]) -> dict[str, Any]:
    """Open the report; the boxes of the first screen's parts and the headline rows' figures as shown."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: scripts/test.sh installs Debian's chromium package")
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport=VIEWPORT)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(html_path.as_uri())
        page.wait_for_function("document.body.dataset.ready === '1'")
        page.screenshot(path=str(screenshot))  # the first screen only, as a user first sees it

        def box(selector: str) -> dict[str, float] | None:
            loc = page.locator(selector)
            return loc.first.bounding_box() if loc.count() else None

        boxes = {name: box(sel) for name, sel in (("verdict", "#verdict"), ("answer", "#ab-answer"),
                                                  ("slos", "#slos table"), ("body", "body"))}  # fmt: skip
        shown = {}
        for scope in rows:
            row = page.locator(f'#headline-table tr[data-scope="{scope}"]')
            boxes[scope] = row.bounding_box()
            shown[scope] = {f: row.locator(f'[data-figure="{f}"]').inner_text() for f in FIGURES}
        figures = page.evaluate("Array.from(document.querySelectorAll('img.figure, figure.chart[data-kind=time]'))"
                                ".map(i => i.getBoundingClientRect().width)")  # fmt: skip
        verdict = page.locator("#verdict").inner_text()
        browser.close()
    return {"boxes": boxes, "shown": shown, "figures": figures, "verdict": verdict, "problems": problems}


def _number(text: str) -> float:
    assert re.fullmatch(r"-?[\d,]+(\.\d+)?(e[+-]?\d+)?", text.strip()), text
    return float(text.replace(",", ""))


def _assert_shown_as(shown: dict[str, str], ref: dict[str, float]) -> None:
    """Each figure on the page is the reference as the report rounds it (3 significant digits, or one
    decimal from 100 up; counts exact)."""
    for key in FIGURES:
        value, want = _number(shown[key]), float(ref[key])
        if key in ("completed", "failed", "cancelled", "records", "total_input_tokens", "total_output_tokens"):
            assert value == want, (key, shown[key], want)
        else:
            assert value == pytest.approx(want, rel=0.005, abs=0.05), (key, shown[key], want)


def _inside_first_screen(box: dict[str, float] | None) -> bool:
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"]


def test_first_screen_of_a_real_run_holds_the_verdict_and_the_headline_row(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = locust_runner("mixed.py", "-u", "9", "-r", "9", "-t", "6s", "--max-tokens", "24",
                        "--emulator-args", "--ttft-ms 40 --itl-ms 4 --fault 500=0.05 --seed 3")  # fmt: skip
    assert run.run_dir is not None and (run.run_dir / "report.html").exists(), run.output[-2000:]
    records = run.records()
    screenshot = tmp_path / "first_screen.png"
    workloads = sorted({r["workload"] for r in records})
    seen = _first_screen(run.run_dir / "report.html", screenshot, ["all", *(f"workload:{w}" for w in workloads)])
    print(f"first screen: {screenshot}")
    assert seen["problems"] == []
    assert _inside_first_screen(seen["boxes"]["verdict"]) and seen["verdict"].strip()
    assert _inside_first_screen(seen["boxes"]["all"]), seen["boxes"]["all"]
    _assert_shown_as(seen["shown"]["all"], headline_reference(records))
    for w in workloads:
        if not any(r["ok"] and r["workload"] == w for r in records):
            # a busy machine's 6 s may finish none of the long-prompt workload's requests: no percentile to check
            assert _number(seen["shown"][f"workload:{w}"]["completed"]) == 0
            continue
        _assert_shown_as(seen["shown"][f"workload:{w}"], headline_reference(records, w))
    assert any(r["ok"] for r in records)
    # Full-width figures: each as wide as the page's content (the body less its padding).
    body = seen["boxes"]["body"]
    assert body is not None and seen["figures"] and all(w >= 0.95 * (body["width"] - 48) for w in seen["figures"])
    assert screenshot.stat().st_size > 20_000


def test_first_screen_of_an_ab_run_gives_the_answer_before_the_slo_table(tmp_path: Path) -> None:
    run_dir, records = _ab_run(tmp_path)
    spec = load_slo_spec(text="slos:\n  '*':\n    ttft_ms: {p95: 800}\n    e2e_ms: {p95: 2000}\n"
                              "    itl_ms: {p99: 150}\n    error_rate: {max: 0.01}\n")  # fmt: skip
    build_report(run_dir, spec)
    screenshot = tmp_path / "first_screen_ab.png"
    seen = _first_screen(run_dir / "report.html", screenshot, ["target:fast", "target:slow"])
    print(f"first screen (A/B): {screenshot}")
    answer, slos = seen["boxes"]["answer"], seen["boxes"]["slos"]
    assert answer is not None and slos is not None
    assert _inside_first_screen(answer) and answer["y"] + answer["height"] <= slos["y"]
    for target in ("fast", "slow"):
        assert _inside_first_screen(seen["boxes"][f"target:{target}"])
        _assert_shown_as(seen["shown"][f"target:{target}"],
                         headline_reference([r for r in records if r["target"] == target]))  # fmt: skip
