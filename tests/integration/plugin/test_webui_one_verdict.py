"""One verdict everywhere in the web UI, in a real Chromium against a real run of mixed.py on the
built-in emulator (the run a new user starts): while it runs the live timing row never says FAIL
without enough late reads and a cause; after Stop every verdict on the page — the verdict box, its
timing line, the SLO table's rows, the LLM table's Total row — says what the run's summary.json
says, the rates of the last seconds are cleared and the run's own are marked final; the page has
no horizontal scroll in a 1,400 px window, running or stopped, on every tokenstorm tab."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, free_port
from tests.integration.plugin.test_webui_live import _header, _wait_up
from tests.integration.reports.test_reports import CHROMIUM
from tokenstorm.workloads.plugin.web.final import ENDED_RATE

WIDTH = 1400
TABS = ("LLM", "GPU", "vLLM")


def _live(base: str) -> dict[str, Any]:
    return dict(json.load(urllib.request.urlopen(base + "/tokenstorm/live.json", timeout=30)))


def _verdicts(page: Any) -> dict[str, Any]:
    """Every verdict on the LLM tab, read from the DOM as shown."""
    return dict(page.evaluate("""() => {
        const q = s => document.querySelector(s);
        const rows = [...document.querySelectorAll('main table tbody tr')].map(
            tr => [...tr.querySelectorAll('td')].map(td => td.textContent));
        const figures = q('#tokenstorm-run-figures');
        return {
            verdict: q('#tokenstorm-verdict') && q('#tokenstorm-verdict').dataset.verdict,
            reason: q('#tokenstorm-verdict-reason') && q('#tokenstorm-verdict-reason').textContent,
            trustworthy: q('#tokenstorm-fidelity') && q('#tokenstorm-fidelity').dataset.trustworthy,
            fidelity: q('#tokenstorm-fidelity') && q('#tokenstorm-fidelity').textContent,
            slo: Object.fromEntries([...document.querySelectorAll('#tokenstorm-slo tr[data-slo]')]
                .map(r => [r.dataset.slo, r.dataset.status])),
            sloFinal: q('#tokenstorm-slo') && q('#tokenstorm-slo').dataset.final,
            table: rows,
            figures: figures && figures.textContent, figuresFinal: figures && figures.dataset.final,
        };
    }"""))  # fmt: skip


def _timing_row(page: Any) -> tuple[str, str] | None:
    """The live SLO table's timing row as shown: (status, note)."""
    row = page.query_selector("#tokenstorm-slo tr[data-slo='Timing fidelity']")
    if row is None:
        return None
    cells = [td.inner_text() for td in row.query_selector_all("td")]
    return str(row.get_attribute("data-status")), cells[3]


def _scroll_width(page: Any) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def test_after_stop_every_verdict_on_the_page_agrees_and_the_page_fits_1400_px(tmp_path: Path) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: scripts/test.sh installs Debian's chromium package")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "mixed.py"), "--web-port", str(port),
         "--run-dir", str(tmp_path / "runs"), "--max-tokens", "64"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        _wait_up(base + "/tokenstorm/live.json")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            problems: list[str] = []
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(base + "/")
            page.wait_for_selector("header #tokenstorm-simulated", timeout=15000)
            page.wait_for_load_state("networkidle")
            widths = {"start form": _scroll_width(page)}
            page.fill("input[name=userCount]", "10")
            page.fill("input[name=spawnRate]", "10")
            for attempt in range(3):  # (as with Stop below: a click while React re-renders may land on nothing)
                page.click("form button[type=submit]")
                try:
                    page.wait_for_selector("button:has-text('Stop')", timeout=20000)
                    break
                except PlaywrightTimeout:
                    if attempt < 2 and not _live(base)["running"]:
                        continue
                    # Twice (a CI run and a full local run, both on a busy machine) the run started and the header
                    # showed no Stop for 20-40 s (cause not found: the page is saved here). A reload reads the
                    # running state from the server; the run's verdicts after Stop are what this test is about.
                    page.screenshot(path=str(tmp_path / "no_stop.png"), full_page=True)
                    print(f"no Stop button after Start at {page.url}, page errors {problems}: {tmp_path}/no_stop.png")
                    page.reload()
                    page.wait_for_selector("button:has-text('Stop')", timeout=20000)
                    break
            page.click("button[role=tab]:has-text('LLM')")
            # While it runs: the live timing row, every second, as the user sees it.
            seen: list[tuple[str, str]] = []
            deadline = time.monotonic() + 24
            while time.monotonic() < deadline:
                page.wait_for_timeout(1000)
                row = _timing_row(page)
                if row is not None:
                    seen.append(row)
            assert seen and seen[-1][0] != "no data", seen  # judged once streams came in
            for status, note in seen:  # FAIL only on enough late reads, with what held the load generator back
                assert status != "fail" or ("too few" not in note and "no cause seen" not in note), (status, note)
                if status == "wait":
                    assert note.startswith("too few to judge yet"), note
            page.screenshot(path=str(tmp_path / "running_llm.png"), full_page=True)
            for tab in TABS:
                page.click(f"button[role=tab]:has-text('{tab}')")
                page.wait_for_timeout(1500)  # Locust's table and our charts redrawn
                widths[f"running, {tab} tab"] = _scroll_width(page)
            page.screenshot(path=str(tmp_path / "running_vllm.png"), full_page=True)
            assert _header(page)["Status"].lower() == "running"
            page.click("button[role=tab]:has-text('LLM')")
            for _ in range(3):  # (a click while React re-renders the header may land on nothing)
                page.click("button:has-text('Stop')")
                page.wait_for_timeout(3000)
                if not _live(base)["running"]:
                    break
            page.wait_for_selector("#tokenstorm-verdict", timeout=90000)
            page.wait_for_selector("#tokenstorm-slo[data-final='true']", timeout=10000)
            page.wait_for_timeout(2500)  # Locust's last table answer, our last poll
            page.screenshot(path=str(tmp_path / "stopped_llm.png"), full_page=True)
            (run_dir,) = (tmp_path / "runs").iterdir()
            summary = json.loads((run_dir / "summary.json").read_text())
            fidelity = summary["timing_fidelity"]
            trusted = bool(fidelity["trustworthy"])
            shown = _verdicts(page)
            # The verdict box: summary.json's verdict, reason and timing line.
            assert shown["verdict"] == summary["verdict"], (shown, summary["verdict"])
            # (the timing's own words, said in full on the line below it, not twice)
            said = summary["verdict_reason"].replace(
                " — " + fidelity["reason"].removeprefix("timing NOT trustworthy: "), ""
            )
            assert said.startswith(shown["reason"]), (shown["reason"], summary["verdict_reason"])
            assert shown["trustworthy"] == str(trusted).lower() and fidelity["reason"] in shown["fidelity"]
            # The SLO table: the whole run's, as the verdict judged it, the timing row included.
            assert shown["sloFinal"] == "true"
            timing = shown["slo"].pop("Timing fidelity")
            took = (
                "pass" if trusted else "warn" if summary["verdict"] in ("passed", "failed", "inconclusive") else "fail"
            )
            assert timing == took, (timing, fidelity)
            expected = {s["metric"]: _status(s) for s in summary["slos"]}
            assert {label.split(" ")[1]: st for label, st in shown["slo"].items()} == expected, shown["slo"]
            # The LLM table's Total row: no live judgement carried past Stop; only the verdict's.
            total = next(r for r in shown["table"] if r[0].startswith("Total"))
            assert "live status" not in total[0], total
            assert ("NOT TRUSTWORTHY" in total[0]) == (not trusted) or "the verdict is above" in total[0], total
            # The rates of the last seconds cleared, the run's own marked final (the report's).
            assert {r[2] for r in shown["table"]} == {ENDED_RATE}, shown["table"]
            assert shown["figuresFinal"] == "true" and f"{summary['completed']} requests completed" in shown["figures"]
            assert float(_header(page)["RPS"]) == 0.0  # Locust's header: nothing is sent any more
            widths["stopped, LLM tab"] = _scroll_width(page)
            # Opened again after the run: Locust asks for its table once, and the Total row says the verdict's.
            page.reload()
            page.click("button[role=tab]:has-text('LLM')")
            page.wait_for_selector("#tokenstorm-verdict", timeout=15000)
            page.wait_for_timeout(1500)
            total = next(r for r in _verdicts(page)["table"] if r[0].startswith("Total"))
            assert ("NOT TRUSTWORTHY" in total[0]) == (not trusted) and "verdict" in total[0], total
            for tab in TABS:
                page.click(f"button[role=tab]:has-text('{tab}')")
                page.wait_for_timeout(1000)
                widths[f"stopped, {tab} tab"] = _scroll_width(page)
            assert all(w <= WIDTH for w in widths.values()), widths  # no horizontal scroll at 1,400 px
            assert problems == []
            browser.close()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert "Traceback" not in out, out[-3000:]
    print(f"screenshots: {tmp_path}/running_llm.png, running_vllm.png, stopped_llm.png")


def _status(slo: dict) -> str:  # type: ignore[type-arg]
    """An SLO row's status after Stop, as summary.json judged it: pass, fail, or inconclusive (its interval)."""
    return "pass" if slo["passed"] else "inconclusive" if slo.get("result") == "inconclusive" else "fail"
