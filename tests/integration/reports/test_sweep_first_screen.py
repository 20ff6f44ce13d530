"""A real sweep's report in a real browser (Chromium, 1400×900): the first screen holds the goodput knee and
every level's row with its TTFT, ITL and E2E p50/p95/p99 as sweep.json measured them, and no table of SLOs
pooled across levels exists anywhere on the page. The screenshot is kept in the test's tmp dir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.reports.test_reports import CHROMIUM
from tokenstorm.reports.judging.formats import ms, per_s

VIEWPORT = {"width": 1400, "height": 900}


@pytest.mark.serial  # the knee where the emulator puts it: TTFT p95 within 250 ms at 4 users, not on a busy box
def test_a_sweeps_first_screen_shows_the_knee_and_each_levels_percentiles(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: scripts/test.sh installs Debian's chromium package")
    slo = tmp_path / "slo.yaml"
    slo.write_text("slos:\n  code:\n    ttft_ms: {p95: 250}\n    error_rate: {max: 0.01}\n")
    # 4 sequences at once: 1 and 4 users hold TTFT p95 250 ms, 8 wait a whole request for a slot and break it
    run = locust_runner(
        "code_completion.py,locustfiles/shape_sweep.py",
        "--slo",
        str(slo),
        "--wait-time",
        "0",
        "--max-tokens",
        "20",
        "--ignore-eos",
        "--sweep-levels",
        "1,4,8",
        "--sweep-level-time",
        "4",
        "--emulator-args",
        "--max-num-seqs 4 --ttft-ms 100 --itl-ms 10 --prefill-us-per-token 0",
    )
    assert run.run_dir is not None and (run.run_dir / "report.html").exists(), run.output[-2000:]
    sweep = json.loads((run.run_dir / "sweep.json").read_text())
    assert sweep["knee_users"] == 4, sweep
    screenshot = tmp_path / "first_screen_sweep.png"
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport=VIEWPORT)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto((run.run_dir / "report.html").as_uri())
        page.wait_for_function("document.body.dataset.ready === '1'")
        page.screenshot(path=str(screenshot))
        print(f"first screen (sweep): {screenshot}")
        knee = page.locator("#sweep-knee")
        boxes = [knee.bounding_box(), page.locator("#sweep-levels thead").bounding_box()]
        shown: dict[int, dict[str, str]] = {}
        for level in sweep["levels"]:
            row = page.locator(f'#sweep-levels tbody tr[data-users="{level["users"]}"]')
            boxes.append(row.bounding_box())
            shown[level["users"]] = {
                f"{m}_{p}": row.locator(f'[data-figure="{m}_{p}"]').inner_text()
                for m in ("ttft", "itl", "e2e")
                for p in ("p50", "p95", "p99")
            }
            shown[level["users"]]["requests_per_s"] = row.locator('[data-figure="requests_per_s"]').inner_text()
            shown[level["users"]]["slos"] = row.locator("td.slos").inner_text()
        knee_text, verdict = knee.inner_text(), page.locator("#verdict").inner_text()
        pooled_slo_tables = page.locator("#slos table").count()
        headers = page.locator("#sweep-levels thead").inner_text()
        browser.close()
    assert problems == []
    assert all(b is not None and b["y"] >= 0 and b["y"] + b["height"] <= VIEWPORT["height"] for b in boxes), boxes
    assert knee_text.startswith("Goodput knee: 4 users") and verdict.startswith("Goodput knee found")
    assert pooled_slo_tables == 0  # SLOs are judged per level: none pooled across them
    for label in ("TTFT ms", "ITL ms", "E2E ms", "p50", "p95", "p99", "Goodput req/s"):
        assert label in headers
    for level in sweep["levels"]:  # every figure as sweep.json measured it, in the page's ms format
        cells = shown[level["users"]]
        for m in ("ttft", "itl", "e2e"):
            for p in ("p50", "p95", "p99"):
                assert cells[f"{m}_{p}"] == ms(level["latency_ms"]["code"][m][p]), (level["users"], m, p)
        assert cells["requests_per_s"] == per_s(level["requests_per_s"])
        assert cells["slos"].startswith("held" if level["held"] else "BROKE"), cells["slos"]
        if not level["held"]:
            assert "code ttft_ms p95" in cells["slos"] and "ms vs <= 250 ms" in cells["slos"]
    assert screenshot.stat().st_size > 20_000
