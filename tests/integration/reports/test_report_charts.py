"""The report's charts as a user meets them, in Chromium, offline: a real emulator run's report, hovered
(the value shown is the page's own data point, written as the page writes its unit), zoomed (the over-time
charts follow one another) and reset, a line hidden and shown again from its legend, and no horizontal scroll
in a 1,400 px window."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tokenstorm.reports.judging import formats

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
VIEWPORT = {"width": 1400, "height": 900}


def _embedded(html_path: Path) -> dict[str, dict[str, Any]]:
    """The charts' data as the page carries it (JSON with ``<``, ``>`` and ``&`` as escapes, which JSON
    reads back as the characters), read the way its script reads it."""
    text = html_path.read_text()
    block = re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', text, re.S)
    assert block is not None, "no chart data in the page"
    charts = {c["id"]: c for c in json.loads(block.group(1))["charts"]}
    for c in charts.values():
        for s in c["series"]:
            s["x"] = c["xs"][s["xi"]]  # each distinct x array is there once
    return charts


def _written(text: str, value: float, unit: Callable[[float], str]) -> bool:
    """``text`` is ``value`` as the page writes its unit (tokenstorm/reports/judging/formats.py) — or, for a value on a
    rounding tie, as a nudge of it writes it (JavaScript rounds ties up, Python to even)."""
    return text in {unit(value), unit(value * (1 + 1e-9)), unit(value * (1 - 1e-9))}


def _shown(text: str) -> float:
    """A legend's value as written ("1,234.5", "12.3", "0.456")."""
    assert re.fullmatch(r"-?[\d,]+(\.\d+)?", text.strip()), text
    return float(text.replace(",", ""))


def _hover(page: Any, chart: str, x: float) -> None:
    """Move the mouse over ``chart`` where its x axis reads ``x``, half-way up."""
    page.locator(f'figure[data-chart="{chart}"]').scroll_into_view_if_needed()
    at = page.evaluate(
        "([id, x]) => { const u = window.tokenstormCharts[id], r = u.over.getBoundingClientRect();"
        " return [r.left + u.valToPos(x, 'x'), r.top + r.height / 2]; }",
        [chart, x],
    )
    page.mouse.move(at[0], at[1])


def _legend_value(page: Any, chart: str, label: str) -> str:
    entry = page.locator(f'figure[data-chart="{chart}"] .u-legend .u-series', has_text=label).first
    return str(entry.locator(".u-value").inner_text())


def _x_range(page: Any, chart: str) -> tuple[float, float]:
    lo, hi = page.evaluate(
        f"[window.tokenstormCharts['{chart}'].scales.x.min, window.tokenstormCharts['{chart}'].scales.x.max]"
    )
    return float(lo), float(hi)


def test_a_real_runs_charts_answer_hover_zoom_and_legend_clicks_offline(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is not installed: scripts/test.sh installs Debian's chromium package")
    run = locust_runner(
        "mixed.py",
        "-u",
        "6",
        "-r",
        "6",
        "-t",
        "8s",
        "--max-tokens",
        "24",
        "--emulator-args",
        "--ttft-ms 40 --itl-ms 4 --fault 500=0.05 --seed 5",
    )
    report = run.run_dir / "report.html" if run.run_dir else None
    assert report is not None and report.exists(), run.output[-2000:]
    data = _embedded(report)
    assert {"users", "latency", "throughput", "dist-ttft", "dist-itl", "dist-e2e"} <= set(data)
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport=VIEWPORT)
        page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
        page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
        # Offline: any request but the file itself means the page is not self-contained.
        page.route(
            "**/*",
            lambda route: (
                route.continue_()
                if route.request.url.startswith("file:")
                else (problems.append(f"network: {route.request.url}"), route.abort())
            ),
        )
        page.goto(report.as_uri())
        page.wait_for_function("document.body.dataset.ready === '1'")
        assert int(page.evaluate("document.body.dataset.charts")) == len(data)
        # No horizontal scroll at 1,400 px, charts and legends included.
        assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]

        # Hover: the legend shows the page's own data point under the cursor, and the time it is at.
        line = next(s for s in data["latency"]["series"] if s["label"] == "TTFT p50")
        i = next(k for k in range(len(line["x"]) // 2, len(line["x"])) if line["y"][k] is not None)
        _hover(page, "latency", line["x"][i])
        assert _written(_legend_value(page, "latency", "TTFT p50"), line["y"][i], formats.ms)
        at = _legend_value(page, "latency", "time")
        assert at.endswith(" s") and _shown(at.removesuffix(" s")) == pytest.approx(line["x"][i], rel=5e-3)
        # ... and the other over-time charts follow the same cursor.
        out = next(s for s in data["throughput"]["series"] if s["label"] == "output tok/s")
        assert _written(_legend_value(page, "throughput", "output tok/s"), out["y"][i], formats.tok_s)
        # A distribution: each workload's p95 at once.
        dist = data["dist-ttft"]
        k95 = dist["series"][0]["x"].index(95.0)
        _hover(page, "dist-ttft", 95.0)
        assert _legend_value(page, "dist-ttft", "percentile") == "p95"
        for s in dist["series"]:
            assert _written(_legend_value(page, "dist-ttft", s["label"]), s["y"][k95], formats.ms)

        # The legend toggles a line off and on again.
        p95 = page.locator('figure[data-chart="latency"] .u-legend .u-series', has_text="TTFT p95").first
        index = [s["label"] for s in data["latency"]["series"]].index("TTFT p95") + 1
        shown = f"window.tokenstormCharts.latency.series[{index}].show"
        p95.click()
        assert "u-off" in (p95.get_attribute("class") or "") and page.evaluate(shown) is False
        p95.click()
        assert "u-off" not in (p95.get_attribute("class") or "") and page.evaluate(shown) is True

        # Drag to zoom: the over-time charts zoom together; double-click resets; Ctrl + wheel zooms.
        full = _x_range(page, "latency")
        box = page.locator('figure[data-chart="latency"] .u-over').bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + box["width"] * 0.25, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] / 2, steps=5)
        page.mouse.up()
        zoomed = _x_range(page, "latency")
        assert zoomed[1] - zoomed[0] < 0.35 * (full[1] - full[0])
        assert _x_range(page, "throughput") == pytest.approx(zoomed) and _x_range(page, "users") == pytest.approx(
            zoomed
        )
        page.mouse.dblclick(box["x"] + box["width"] * 0.4, box["y"] + box["height"] / 2)
        assert _x_range(page, "latency") == pytest.approx(full) and _x_range(page, "users") == pytest.approx(full)
        page.keyboard.down("Control")
        page.mouse.wheel(0, -200)
        page.keyboard.up("Control")
        page.wait_for_function(
            "window.tokenstormCharts.latency.scales.x.max - window.tokenstormCharts.latency"
            f".scales.x.min < {0.9 * (full[1] - full[0])}"
        )
        page.locator('figure[data-chart="latency"] button.reset-zoom').click()
        assert _x_range(page, "latency") == pytest.approx(full)

        shot = tmp_path / "report_charts.png"
        page.locator("#timeseries").scroll_into_view_if_needed()
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
        browser.close()
    assert problems == []
