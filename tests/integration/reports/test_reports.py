"""Reports as users meet them: in Chromium, under hostile text, in CI exit codes, in comparisons."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, compare_runs

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
XSS = '<script>document.body.dataset.pwned="1"</script><img src=x onerror="document.body.dataset.pwned=\'2\'">'
SECTIONS = ("verdict", "slos", "latency", "throughput", "errors", "timeseries", "distributions", "metadata", "quality")


def open_in_chromium(html_path: Path, screenshot: Path) -> dict:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: scripts/test.sh installs Debian's chromium package")
    problems: list[str] = []
    dialogs: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"],
        )  # fmt: skip
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
        page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        # Offline: any network request at all would mean the report is not self-contained.
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                   else (problems.append(f"network: {route.request.url}"), route.abort()))  # fmt: skip
        page.goto(html_path.as_uri())
        page.wait_for_function("document.body.dataset.ready === '1'")
        found = {s: page.locator(f"#{s}").count() == 1 for s in SECTIONS}
        images = page.evaluate("Array.from(document.images).map(i => i.naturalWidth)")
        charts = page.evaluate("Array.from(document.querySelectorAll('figure.chart canvas')).map(c => c.clientWidth)")
        legends = page.evaluate("Array.from(document.querySelectorAll('.u-legend .u-label')).map(e => e.textContent)")
        pwned = page.evaluate("document.body.dataset.pwned || null")
        verdict = page.locator("#verdict").inner_text()
        error_text = page.locator("#errors").text_content() or ""
        # The sortable table works: sort the SLO table by measured value.
        page.locator("#slos th", has_text="Measured").click()
        page.screenshot(path=str(screenshot), full_page=True)
        browser.close()
    return {"problems": problems, "dialogs": dialogs, "sections": found, "images": images, "charts": charts,
            "legends": legends, "pwned": pwned, "verdict": verdict, "errors": error_text}  # fmt: skip


def test_report_renders_in_headless_chromium_with_every_section(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    slo = tmp_path / "slo.yaml"
    slo.write_text("slos:\n  chat:\n    ttft_ms: {p95: 800}\n    e2e_ms: {p95: 5000}\n    error_rate: {max: 0.5}\n")
    run = locust_runner(
        "chat.py",
        "--chat-think-time",
        "0-0.2",
        "-u",
        "8",
        "-r",
        "8",
        "-t",
        "6s",
        "--slo",
        str(slo),
        "--max-tokens",
        "20",
        "--emulator-args",
        "--ttft-ms 50 --itl-ms 5 --fault 500=0.1 --seed 2",
    )
    assert run.returncode == 0, run.output[-2000:]
    for name in ("report.html", "junit.xml", "summary.json"):
        assert (run.run_dir / name).exists()
    seen = open_in_chromium(run.run_dir / "report.html", tmp_path / "report.png")
    assert seen["problems"] == [] and seen["dialogs"] == []
    assert all(seen["sections"].values()), seen["sections"]
    # The sessions' figure (chat sessions end on their last turn: steps, session latency) and where the time
    # went (the built-in emulator returns each request's own timing); the run's over-time and distribution
    # charts, the sessions' TTFT over time and the answers' pass rate over time (chat turns are checked), drawn.
    assert len(seen["images"]) == 2 and all(w > 300 for w in seen["images"])
    assert len(seen["charts"]) >= 11 and all(w > 300 for w in seen["charts"])
    assert "SLOs held" in seen["verdict"]
    assert "http_5xx" in seen["errors"]
    assert (tmp_path / "report.png").stat().st_size > 20_000


def test_hostile_text_in_records_stays_inert(tmp_path: Path) -> None:
    # A workload named like markup: its name goes into the charts' JSON and legends too.
    records = [request(i, ttft_ms=10, workload="chat" if i % 2 else XSS) for i in range(10)]
    records.append(request(11, 0, ok=False, error_detail=f"HTTP 500: {XSS}"))
    run_dir = make_run_dir(tmp_path / "run", records, meta={"model": XSS, "options": {"extra_body": XSS}})
    build_report(run_dir)
    html = (run_dir / "report.html").read_text()
    assert "<script>document.body" not in html and "&lt;script&gt;" in html
    seen = open_in_chromium(run_dir / "report.html", tmp_path / "xss.png")
    assert seen["pwned"] is None and seen["dialogs"] == []
    assert seen["problems"] == []
    assert "<img src=x" in seen["errors"]  # shown as text, as the server sent it
    assert XSS in seen["legends"]  # the workload's name in the charts' legends, as text


def test_headless_exit_codes_follow_the_slo_outcome(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    slo = tmp_path / "tight.yaml"
    slo.write_text("slos:\n  chat:\n    ttft_ms: {p95: 1}\n")  # the emulator's TTFT is 100 ms
    run = locust_runner(
        "chat.py",
        "--chat-think-time",
        "0-0.2",
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        "4s",
        "--slo",
        str(slo),
        "--emulator-args",
        "--ttft-ms 100 --itl-ms 2",
    )
    assert run.returncode == 1, run.output[-2000:]
    assert "FAILED" in run.output and "chat ttft_ms p95" in run.output
    suite = ET.parse(run.run_dir / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    summary = json.loads((run.run_dir / "summary.json").read_text())
    assert summary["verdict"] == "failed" and summary["completed"] > 0
    for key in ("duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput",
                "output_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "p99_itl_ms",
                "mean_tpot_ms", "mean_e2el_ms", "request_goodput"):  # fmt: skip
        assert key in summary, key


def test_invalid_slo_file_is_rejected_before_any_traffic(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    slo = tmp_path / "bad.yaml"
    slo.write_text("slos:\n  chat:\n    ttft_ms: {p95: 800}\n  chta:\n    e2e_ms: {p95: 900}\n")
    run = locust_runner("chat.py", "--chat-think-time", "0-0.2", "-u", "2", "-r", "2", "-t", "30s", "--slo", str(slo))
    assert run.returncode == 3
    assert (
        f"tokenstorm: invalid SLO file: {slo}:4: no workload of that name in this locustfile — did you mean chat?"
        in run.output
    )
    assert run.run_dir is None  # nothing ran
    assert "Traceback" not in run.output


def _run_with_ttft(path: Path, scale: float) -> Path:
    return make_run_dir(path, [request(i, ttft_ms=(100 + i % 40) * scale) for i in range(200)])


def test_compare_flags_an_injected_20_percent_regression(tmp_path: Path) -> None:
    base = _run_with_ttft(tmp_path / "fp8", 1.0)
    same = _run_with_ttft(tmp_path / "fp8-again", 1.0)
    slower = _run_with_ttft(tmp_path / "awq", 1.2)
    comparison = compare_runs([base, same, slower], baseline=0, threshold_pct=10)
    regressed = {(r["scope"], r["label"]) for r in comparison.regressions}
    assert ("all", "TTFT p95 ms") in regressed and ("chat", "TTFT p50 ms") in regressed
    p95 = next(r for r in comparison.rows if r["scope"] == "all" and r["key"] == "p95_ttft_ms")
    assert p95["deltas"][1] == pytest.approx(0) and p95["deltas"][2] == pytest.approx(20)
    assert p95["regressed"] == [False, False, True]
    assert "REGRESSION" in comparison.to_text()
    assert not compare_runs([base, same]).regressions


def test_compare_cli_exit_code(tmp_path: Path) -> None:
    import subprocess
    import sys

    base = _run_with_ttft(tmp_path / "a", 1.0)
    slower = _run_with_ttft(tmp_path / "b", 1.2)
    out = tmp_path / "cmp.html"
    proc = subprocess.run([sys.executable, "-m", "tokenstorm.reports", "compare", str(base), str(slower), "--html",
        str(out)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 1 and "REGRESSION" in proc.stdout
    assert "TTFT p95 ms" in out.read_text()


def test_rebuild_with_another_slo_file_changes_the_verdict(tmp_path: Path) -> None:
    import subprocess
    import sys

    run_dir = make_run_dir(tmp_path / "run", [request(i, ttft_ms=100) for i in range(20)])
    strict = tmp_path / "strict.yaml"
    strict.write_text("slos:\n  chat:\n    ttft_ms: {p95: 50}\n")

    def build(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tokenstorm.reports", "build", str(run_dir), *extra],
                              capture_output=True, text=True, timeout=120)  # fmt: skip

    assert build().returncode == 0  # the run's own (default) SLOs hold
    strict_run = build("--slo", str(strict))
    assert strict_run.returncode == 1 and "chat ttft_ms p95" in strict_run.stdout
    assert json.loads((run_dir / "summary.json").read_text())["verdict"] == "failed"


def test_records_breaking_the_timing_invariant_are_counted_and_bannered(tmp_path: Path) -> None:
    records = [request(i, 100) for i in range(5)]
    records[2]["timing_violation"] = "ttft_s 0.100000 > e2e_s 0.090000"
    run_dir = make_run_dir(tmp_path / "run", records)
    build_report(run_dir)
    assert json.loads((run_dir / "summary.json").read_text())["timing_violations"] == 1
    html = (run_dir / "report.html").read_text()
    assert 'id="timing-violations"' in html and "1 record(s) break the timing invariant" in html
    clean = make_run_dir(tmp_path / "clean", [request(i, 100) for i in range(5)])
    build_report(clean)
    assert json.loads((clean / "summary.json").read_text())["timing_violations"] == 0
    assert 'id="timing-violations"' not in (clean / "report.html").read_text()
