"""Where the time went, from real runs against the built-in emulator started as vLLM is with
``--enable-per-request-metrics``: summary.json's parts are numpy's on the run's own records and their means add up
to the client's TTFT; the console's closing block says so in one line; the report's section, looked at in Chromium
at 1,400 px, shows the same figures without widening the page; and in a sweep whose top level waits for a
``--max-num-seqs`` slot, the report names the queue as what grew past the knee. Screenshots stay in the tests'
tmp dirs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.integration.reports.test_reports import CHROMIUM
from tokenstorm.reports.judging.formats import ms

VIEWPORT = {"width": 1400, "height": 900}
EMULATOR = (
    "--ttft-ms 30 --itl-ms 4 --prefill-us-per-token 0 --max-num-seqs 2 --frontend-ms 3 --enable-per-request-metrics"
)
#: record field -> summary.json key stem
PARTS = {
    "server_queue_s": "server_queue",
    "server_ttft_s": "server_ttft",
    "overhead_s": "overhead",
    "server_decode_s": "server_decode",
    "server_itl_s": "server_itl",
}


def _look(report: Path, screenshot: Path) -> dict[str, object]:
    """The section in Chromium: its screenshot, the page's width, the run row's figures, the page's errors."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: scripts/test.sh installs Debian's chromium package")
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport=VIEWPORT)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(report.as_uri())
        page.wait_for_function("document.body.dataset.ready === '1'")
        section = page.locator("#time-split")
        section.screenshot(path=str(screenshot))
        print(f"where the time went: {screenshot}")
        row = page.locator('#time-split-table tbody tr[data-scope="all"]')
        shown = {key: row.locator(f'[data-figure="{key}"]').inner_text() for key in ("queue_ms", "ttft_ms")}
        out = {
            "width": page.evaluate("document.documentElement.scrollWidth"),
            "shown": shown,
            "figure": page.locator("#time-split-figure").is_visible(),
            "charts": page.locator('#time-split figure.chart[data-chart="split-over-time"] canvas').count(),
            "growth": page.locator("#time-split-growth").all_inner_texts(),
            "level_queue_p50": {
                users: page.locator(
                    f'#time-split-level-percentiles tr[data-users="{users}"] [data-figure="p50_server_queue_ms"]'
                ).get_attribute("data-value")
                for users in page.locator("#time-split-level-percentiles tbody tr").evaluate_all(
                    "rows => rows.map(r => r.dataset.users)"
                )
            },
            "problems": problems,
        }
        browser.close()
    return out


def test_a_run_the_server_timed_says_where_its_ttft_went_everywhere(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Six users on two slots: most requests wait in the emulator's queue, so queue, prefill (30 ms) and the front
    # end (3 ms, in the overhead) are three different figures, and one read as another fails.
    run = locust_runner(
        "chat.py",
        "--chat-turns",
        "1",
        "--chat-think-time",
        "0-0",
        "--wait-time",
        "0",
        "--max-tokens",
        "12",
        "--ignore-eos",
        "-u",
        "6",
        "-r",
        "6",
        "-t",
        "6s",
        "--emulator-args",
        EMULATOR,
    )
    assert run.returncode == 0 and run.run_dir is not None, run.output[-3000:]
    summary = json.loads((run.run_dir / "summary.json").read_text())
    done = [r for r in run.records() if r["ok"] and not r["warmup"]]
    assert summary["server_timed_requests"] == len(done) >= 40 and summary["server_timing_share"] == 1.0
    for field, stem in PARTS.items():
        values = np.array([r[field] for r in done]) * 1000
        assert summary[f"mean_{stem}_ms"] == pytest.approx(values.mean(), rel=1e-9), stem
        assert summary[f"p99_{stem}_ms"] == pytest.approx(np.percentile(values, 99), rel=1e-9), stem
    assert summary["mean_server_queue_ms"] > 30 and 25 < summary["median_server_ttft_ms"] < 60
    parts = summary["mean_overhead_ms"] + summary["mean_server_queue_ms"] + summary["mean_server_ttft_ms"]
    assert parts == pytest.approx(summary["mean_ttft_server_timed_ms"]) == np.mean([r["ttft_s"] for r in done]) * 1000
    line = next(x for x in run.output.splitlines() if x.startswith("where TTFT went"))
    assert len(line) <= 100 and f"queue {summary['mean_server_queue_ms']:,.1f}" in line, line
    seen = _look(run.run_dir / "report.html", tmp_path / "time_split.png")
    assert seen["problems"] == [] and seen["width"] <= 1400 and seen["figure"] and seen["charts"] == 1, seen
    assert seen["shown"] == {"queue_ms": ms(summary["mean_server_queue_ms"]), "ttft_ms": ms(parts)}


def test_a_sweep_names_the_queue_as_what_grew_past_its_knee(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    slo = tmp_path / "slo.yaml"
    slo.write_text("slos:\n  code:\n    ttft_ms: {p95: 250}\n    error_rate: {max: 0.01}\n")
    # 4 sequences at once: 1 and 4 users hold TTFT p95 250 ms; 8 wait a whole request for a slot — in the queue.
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
        "--max-num-seqs 4 --ttft-ms 100 --itl-ms 10 --prefill-us-per-token 0 --enable-per-request-metrics",
    )
    assert run.run_dir is not None and (run.run_dir / "report.html").exists(), run.output[-2000:]
    knee = json.loads((run.run_dir / "sweep.json").read_text())["knee_users"]
    assert knee in (1, 4), knee  # 4 on a quiet machine; a busy one may read late at 4 users and stop the knee at 1
    seen = _look(run.run_dir / "report.html", tmp_path / "time_split_sweep.png")
    assert seen["problems"] == [] and seen["width"] <= 1400, seen
    (growth,) = seen["growth"]  # type: ignore[misc]
    queue = {int(u): float(v) for u, v in seen["level_queue_p50"].items()}  # type: ignore[attr-defined]
    assert sorted(queue) == [1, 4, 8] and queue[8] > 10 * max(queue[4], 1.0), queue  # its own percentiles
    assert growth.startswith(f"Past the knee ({knee} → 8 users)") and growth.endswith("the queue grew most."), growth
