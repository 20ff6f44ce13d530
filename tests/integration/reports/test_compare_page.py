"""The comparison page as a user opens it: in Chromium at 1400×900, offline, the answer and the
baseline on the first screen, then the run context, the deployment differences and the figures."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import make_run_dir, request
from tests.integration.reports.test_reports import CHROMIUM
from tokenstorm.reports import compare_runs

FOREIGN = Path(__file__).resolve().parents[2] / "fixtures" / "foreign"


def _run(path: Path, users: int, ttft_ms: float, block_size: str) -> Path:
    deployment = {"": {"url": "http://gpu:8000", "server_version": "0.32.0",
                       "engine": {"cache_config": {"block_size": block_size}},
                       "model": {"id": "tiny", "max_model_len": 4096}, "problems": []}}  # fmt: skip
    run_dir = make_run_dir(path, [request(i, ttft_ms) for i in range(40)],
                           {"status": "finished", "model": "tiny", "deployment": deployment,
                            "options": {"num_users": users, "max_tokens": 32}})  # fmt: skip
    (run_dir / "load.jsonl").write_text(json.dumps({"epoch_s": 1000.0, "users": users}) + "\n")
    return run_dir


def test_compare_page_shows_the_answer_and_context_first_in_chromium(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    a = _run(tmp_path / "bs16", 4, 100.0, "16")
    b = _run(tmp_path / "bs32", 8, 140.0, "32")
    page_path = tmp_path / "compare.html"
    page_path.write_text(compare_runs([a, b, FOREIGN / "vllm-bench-serve-0.32.0.json",
                                       FOREIGN / "guidellm-0.8.1-concurrent4.json"]).to_html())  # fmt: skip
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                   else (problems.append(route.request.url), route.abort()))  # fmt: skip
        page.goto(page_path.as_uri())
        first_screen = {
            s: page.locator(f"#{s}").bounding_box()
            for s in ("baseline", "verdict", "load-differs", "legend", "sentences")
        }
        sentence = page.locator("#sentences li").first.inner_text()
        n_row = page.locator("#headline tr.n").first.inner_text()
        wide = page.evaluate("document.documentElement.scrollWidth")
        verdict = page.locator("#verdict").inner_text()
        header = page.locator("#context thead").inner_text()
        font = page.evaluate("getComputedStyle(document.body).fontFamily")
        block_size = page.locator("#deployment tr", has_text="cache_config block_size").inner_text()
        sections = [page.locator(f"#{s}").count() for s in ("context", "deployment", "latency", "throughput",
                                                             "errors")]  # fmt: skip
        page.screenshot(path=str(tmp_path / "compare.png"))
        browser.close()
    assert problems == []
    for name, box in first_screen.items():
        assert box is not None and box["y"] + box["height"] <= 900, name  # above the fold
    assert verdict.startswith("REGRESSION") and "LOAD DIFFERED" in verdict
    assert sentence.startswith("B vs A: worse: TTFT p50 +40.0%")  # the summary first, as on the console
    assert n_row.split() == ["n", "requests", "n=40", "n=40", "n=40", "n=40"], n_row  # each file's own count
    assert wide <= 1400
    assert "A · bs16 (baseline)" in header and "D · guidellm-0.8.1-concurrent4.json" in header
    assert "system-ui" in font  # styled like the report, not the default serif
    assert block_size.split() == ["cache_config", "block_size", "16", "32", "—", "—"]
    assert sections == [1, 1, 1, 1, 1]
