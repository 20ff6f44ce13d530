"""The web UI after a run, in a real Chromium against a real run on the emulator, started from the
form as a user would: after Stop the LLM tab shows the verdict, its timing fidelity line and a
working report link (the report's verdict is summary.json's), the SLO status is the whole run's
(not "NO DATA"), and the vLLM tab keeps its charts of the server's samples (KV cache in %, as the
report); the start form's fields are grouped by topic, and mixed.py offers no load-shape field.
A second run from the same page ends by itself (its --run-time): it gets its own verdict."""

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
from tests.integration.plugin.test_webui_live import _wait_up
from tests.integration.reports.test_reports import CHROMIUM
from tokenstorm.workloads.plugin.core.flags import TOPICS

#: the topics with a field in the form (Locust's own options, which tokenstorm only re-defaults, have none)
GROUPS = [t.title for t in TOPICS if any(f.web_ui and not f.locust for f in t.flags)]
SHAPE_FIELDS = ("steps", "arrival", "arrivalRate", "capacityStart", "capacityStep", "capacityStepTime", "capacityMax",
                "sweepLevels", "sweepLevelTime", "sweepCount", "sweepMaxUsers")  # fmt: skip
NO_SERVER = "no /metrics samples"


def _live(base: str) -> dict[str, Any]:
    return dict(json.load(urllib.request.urlopen(base + "/tokenstorm/live.json", timeout=30)))


def _form(page: Any) -> dict[str, Any]:
    """The start form as rendered: topic headings, field names, the max-tokens field's label and help."""
    return dict(page.evaluate("""() => {
        const names = [...document.querySelectorAll('form [name]')].map(e => e.getAttribute('name'));
        const label = document.querySelector('form [data-tokenstorm-field="max_tokens"] label');
        const help = document.querySelector('form [data-tokenstorm-help="max_tokens"]');
        const box = help && help.getBoundingClientRect();
        return {groups: [...document.querySelectorAll('form [data-tokenstorm-group]')].map(h => h.textContent),
                names, label: label && label.textContent, help: help && help.textContent,
                helpCut: help ? help.scrollWidth > help.clientWidth + 1 : null, helpHeight: box ? box.height : 0,
                orderOk: (() => {  // on screen, each topic's heading is above its fields, topics in order
                    const heads = [...document.querySelectorAll('form [data-tokenstorm-group]')];
                    const ys = heads.map(h => h.getBoundingClientRect().top);
                    return ys.every((y, i) => i === 0 || y > ys[i - 1]);
                })()};
    }"""))  # fmt: skip


def _charts(page: Any, panel: str) -> dict[str, dict[str, Any]]:
    """Each drawn line of a tab's charts: chart, points, last value; and each chart's width and time ticks."""
    return dict(page.evaluate("""(panel) => {
        const out = {};
        for (const fig of document.querySelectorAll('#' + panel + ' figure[data-chart]')) {
            const svg = fig.querySelector('svg');
            out[fig.dataset.chart] = {width: svg.getBoundingClientRect().width,
                ticks: [...svg.querySelectorAll('text.tokenstorm-tick')].map(t => t.textContent),
                lines: [...svg.querySelectorAll('path[data-key]')].map(p => ({key: p.dataset.key,
                    series: p.dataset.series, points: Number(p.dataset.points), last: p.dataset.last}))};
        }
        return out;
    }""", panel))  # fmt: skip


def test_after_stop_the_web_ui_shows_verdict_report_slo_status_and_server_charts(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: scripts/test.sh installs Debian's chromium package")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "mixed.py"), "--web-port", str(port),
         "--run-dir", str(tmp_path / "runs"), "--timing-verdict", "warn", "--max-tokens", "16",
         "--monitor-interval", "0.5", "--emulator-args", "--ttft-ms 30 --itl-ms 3"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    shot = tmp_path / "webui_after_stop.png"
    try:
        _wait_up(base + "/tokenstorm/live.json")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            problems: list[str] = []
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(base + "/")
            # The start form: tokenstorm's fields under their topics; mixed.py has no load shape.
            page.click("text=Custom parameters")
            page.wait_for_selector(f"form [data-tokenstorm-group='{GROUPS[-1]}']", state="attached", timeout=15000)
            form = _form(page)
            assert form["groups"] == GROUPS and form["orderOk"], form
            assert "maxTokens" in form["names"] and "warmup" in form["names"]
            assert not set(SHAPE_FIELDS) & set(form["names"]), form["names"]
            (max_tokens,) = [f.help for t in TOPICS for f in t.flags if f.flag == "--max-tokens"]  # the option's own
            assert form["label"] == "Max Tokens" and "…" not in form["label"]  # the name alone, never cut
            assert form["help"] == "--max-tokens: " + max_tokens and not form["helpCut"] and form["helpHeight"] > 0
            # A run from the form, then Stop.
            page.fill("input[name=userCount]", "4")
            page.fill("input[name=spawnRate]", "4")
            page.click("form button[type=submit]")
            page.wait_for_selector("button:has-text('Stop')", timeout=15000)
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:  # requests recorded and the server sampled a few times
                live = _live(base)
                points = [v for w in live["llm"]["workloads"].values() for v in w["ttft_p50_ms"] if v is not None]
                if live["running"] and len(points) >= 4 and len(live["server"].get("", {}).get("t", [])) >= 6:
                    break
                time.sleep(1)
            figures = {k: live[k] for k in ("running", "users", "requests_per_s", "elapsed_s")}
            assert figures["running"] and figures["users"] == 4 and figures["requests_per_s"] > 0, figures
            for _ in range(3):  # (a click while React re-renders the header may land on nothing)
                page.click("button:has-text('Stop')")
                page.wait_for_timeout(3000)
                if not _live(base)["running"]:
                    break
            page.click("button[role=tab]:has-text('LLM')")
            try:
                page.wait_for_selector("#tokenstorm-verdict", timeout=60000)
            except Exception:
                page.screenshot(path=str(tmp_path / "debug.png"))
                print(json.dumps({k: v for k, v in _live(base).items() if k not in ("llm", "server", "gpu")})[:3000])
                raise
            page.wait_for_timeout(1200)  # the charts below are drawn from the same poll
            page.screenshot(path=str(shot), full_page=False)
            (run_dir,) = (tmp_path / "runs").iterdir()
            summary = json.loads((run_dir / "summary.json").read_text())
            verdict = page.inner_text("#tokenstorm-verdict")
            assert verdict == summary["verdict"].upper().replace("_", " "), (verdict, summary["verdict"])
            assert page.get_attribute("#tokenstorm-verdict", "data-verdict") == summary["verdict"]
            assert page.inner_text("#tokenstorm-fidelity").startswith("Timing fidelity: timing ")
            # The verdict is above the LLM table, on the first screen.
            top = page.evaluate("document.querySelector('#tokenstorm-final').getBoundingClientRect().top")
            table = page.evaluate("document.querySelector('main table').getBoundingClientRect().top")
            assert top < table and top < 900, (top, table)
            href = page.evaluate("document.querySelector('#tokenstorm-report-link').href")
            assert href == base + "/tokenstorm/report"
            with urllib.request.urlopen(href, timeout=60) as resp:
                assert resp.status == 200
                report = resp.read().decode()
            report_page = browser.new_page(viewport={"width": 1400, "height": 900})
            report_page.set_content(report)
            classes = report_page.get_attribute("#verdict", "class") or ""
            assert summary["verdict"] in classes.split(), classes  # the report says what summary.json says
            # The banner gives the verdict's title, then its reason without the title's words repeated.
            reason = summary["verdict_reason"]
            title = report_page.inner_text("#verdict strong").lower()
            assert reason.removeprefix(title + ": ")[:60] in report_page.inner_text("#verdict"), (title, reason)
            report_page.close()
            # The SLO status: the whole run's, as the report judged it.
            slo = page.inner_text("#tokenstorm-slo")
            assert "NO DATA" not in slo and "no judged requests" not in slo, slo
            assert page.get_attribute("#tokenstorm-slo", "data-final") == "true"
            expected = {s["metric"]: _status(s) for s in summary["slos"]}
            shown = page.evaluate("""[...document.querySelectorAll('#tokenstorm-slo tr[data-slo]')]
                .filter(r => !r.dataset.slo.startsWith('Timing')).map(r => [r.dataset.slo, r.dataset.status])""")
            assert {label.split(" ")[1]: st for label, st in shown} == expected, (shown, expected)
            llm = _charts(page, "tokenstorm-llm-charts")
            assert {"ttft", "itl", "e2e", "tpot", "tokens", "errors"} <= set(llm)
            # E2E and TPOT: a point wherever TTFT has one (the same successful requests), the run's last too.
            ttft_points = {line["series"].replace(" p50", ""): line["points"] for line in llm["ttft"]["lines"]
                           if line["key"] == "ttft_p50_ms"}  # fmt: skip
            for chart in ("e2e", "tpot"):
                drawn = {line["series"].replace(" p50", ""): line["points"] for line in llm[chart]["lines"]
                         if line["key"].endswith("_p50_ms")}  # fmt: skip
                assert drawn == ttft_points and sum(drawn.values()) >= 4, (chart, drawn, ttft_points)
            assert min(c["width"] for c in llm.values()) > 500 and all(len(c["ticks"]) >= 3 for c in llm.values())
            # The vLLM tab after Stop: the run's samples, charted; no "no samples" line.
            page.click("button[role=tab]:has-text('vLLM')")
            page.wait_for_selector("#tokenstorm-server-charts figure[data-chart='kv'] path[data-key]", timeout=10000)
            assert NO_SERVER not in page.inner_text("main"), page.inner_text("main")[:500]
            server = _charts(page, "tokenstorm-server-charts")
            assert set(server) == {"sched", "kv", "prefix", "preemptions"}
            samples = [json.loads(line) for line in (run_dir / "server.jsonl").read_text().splitlines()]
            samples = [s for s in samples if not s.get("gap")]
            (kv,) = server["kv"]["lines"]
            assert kv["points"] == len(samples) >= 6  # every sample of the run, kept after the monitor stopped
            assert float(kv["last"]) == pytest.approx(100 * samples[-1]["kv_cache_usage"], abs=0.01)  # in %
            running = next(line for line in server["sched"]["lines"] if line["key"] == "running")
            assert running["points"] == len(samples) and float(running["last"]) == samples[-1]["running"]
            assert min(c["width"] for c in server.values()) > 500 and len(server["kv"]["ticks"]) >= 3
            header = page.inner_text("main table")
            assert "KV cache usage %" in header, header
            # A second run from the same page ends by itself (--run-time from the form): its own verdict.
            page.click("button:has-text('New')")
            page.click("text=Advanced options")
            page.fill("input[name=runTime]", "5s")
            page.click("form button[type=submit]")
            page.click("button[role=tab]:has-text('LLM')")
            page.wait_for_function("""(first) => {
                const a = document.querySelector('#tokenstorm-report-link');
                return a && a.parentNode.textContent.indexOf(first) < 0;
            }""", arg=str(run_dir), timeout=60000)  # fmt: skip
            second = _live(base)
            assert second["final"] is not None and second["final"]["run_dir"] != str(run_dir)
            second_summary = json.loads((Path(second["final"]["run_dir"]) / "summary.json").read_text())
            assert page.get_attribute("#tokenstorm-verdict", "data-verdict") == second_summary["verdict"]
            assert second["elapsed_s"] == pytest.approx(5, abs=2.5) and not second["running"]
            # The page of its own links the same report.
            page.goto(base + "/tokenstorm/live")
            page.wait_for_selector("#tokenstorm-report-link", timeout=10000)
            standalone = page.evaluate("document.querySelector('#tokenstorm-report-link').href")
            assert standalone == base + "/tokenstorm/report"
            assert problems == []
            browser.close()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert "Traceback" not in out, out[-3000:]
    print(f"screenshot: {shot}")


def _status(slo: dict) -> str:  # type: ignore[type-arg]
    """An SLO row's status after Stop, as summary.json judged it: pass, fail, or inconclusive (its interval)."""
    return "pass" if slo["passed"] else "inconclusive" if slo.get("result") == "inconclusive" else "fail"
