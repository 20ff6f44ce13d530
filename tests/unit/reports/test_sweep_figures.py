"""The sweep section as a reader sees it: latency, throughput and goodput plotted against the load
each level was offered (its users) as well as the throughput it achieved, and a low-sample warning —
in the table, the figures and summary.json — on exactly the levels whose p95 came from fewer than 20
requests or p99 from fewer than 100 (of one workload). Every figure checked here is recomputed from
the request records with numpy."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, load_slo_spec, measure_sweep_level
from tokenstorm.reports.sections.sweep.plots import sweep_figures
from tokenstorm.workloads.rundir import RequestRecord, SweepResult, read_sweep, sweep_knee, write_sweep

SPEC = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p95: 200}\n")
BOUNDS = {95: 20, 99: 100}  # README: a p95 needs 20 requests, a p99 100
LEVEL_S = 10.0
#: users -> (successful chat requests, successful code requests, chat TTFT ms) started in the judged half
PLAN = {1: (5, 150, 90.0), 2: (19, 10, 110.0), 4: (60, 120, 150.0), 8: (150, 30, 400.0)}


def _row(record: dict[str, Any]) -> dict[str, Any]:
    return RequestRecord(**{"endpoint": "/v1/chat/completions", "model": "m", "stream": True, **record}).as_row()


def _levels() -> tuple[list[dict[str, Any]], list[Any]]:
    """Each level's records (judged half from ``1000 + 20 k``) and the level measured from them: some
    requests that failed or were cancelled (not samples of latency) and one that started before it."""
    rows: list[dict[str, Any]] = []
    levels = []
    rng = np.random.default_rng(3)
    for k, (users, (chat, code, ttft_ms)) in enumerate(PLAN.items()):
        lo = 1000.0 + 20 * k
        level_rows = [_row(request(0, 100, workload="chat", start_epoch_s=lo - 0.4))]  # ended inside: throughput
        for workload, n, base in (("chat", chat, ttft_ms), ("code", code, 60.0)):
            for i in range(n):
                level_rows.append(_row(request(0, float(base + rng.exponential(15)), workload=workload,
                                               start_epoch_s=lo + (LEVEL_S - 1.5) * i / n)))  # fmt: skip
        level_rows += [_row(request(0, 0, workload="chat", ok=False, start_epoch_s=lo + 1)) for _ in range(3)]
        level_rows.append(_row(request(0, 100, workload="code", ok=False, start_epoch_s=lo + 2,
                                       error_category="cancelled")))  # fmt: skip
        levels.append(measure_sweep_level(level_rows, SPEC, users=users, kind="level", started_epoch_s=lo - LEVEL_S,
                                          judged_from_epoch_s=lo, judged_to_epoch_s=lo + LEVEL_S))  # fmt: skip
        rows += level_rows
    return rows, levels


def _judged(rows: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    lo = 1000.0 + 20 * k
    return [r for r in rows if lo <= r["start_epoch_s"] < lo + LEVEL_S and r["error_category"] != "cancelled"]


def _ended(rows: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    lo = 1000.0 + 20 * k
    return [r for r in rows if r["ok"] and lo <= r["start_epoch_s"] + r["e2e_s"] < lo + LEVEL_S]


def _expected_low_sample(rows: list[dict[str, Any]]) -> list[dict[str, list[int]]]:
    out = []
    for k in range(len(PLAN)):
        judged = _judged(rows, k)
        counts = {w: sum(1 for r in judged if r["ok"] and r["workload"] == w) for w in ("chat", "code")}
        out.append({w: [p for p, least in BOUNDS.items() if n < least] for w, n in counts.items()
                    if any(n < least for least in BOUNDS.values())})  # fmt: skip
    return out


def _line(fig: Figure, gid: str) -> Line2D:
    found = [line for ax in fig.axes for line in ax.get_lines() if line.get_gid() == gid]
    assert len(found) == 1, (gid, len(found))
    return found[0]


def test_latency_and_goodput_are_plotted_against_the_offered_load(tmp_path: Path) -> None:
    rows, levels = _levels()
    offered, achieved = sweep_figures(levels, sweep_knee(levels), SPEC)
    users = [float(u) for u in PLAN]
    rps = [len(_ended(rows, k)) / LEVEL_S for k in range(len(PLAN))]
    # Requests that met the latency target (chat TTFT <= 200 ms, each), of those that ended in the level.
    good = [sum(1 for r in _ended(rows, k) if r["workload"] != "chat" or r["ttft_s"] * 1000 <= 200) / LEVEL_S
            for k in range(len(PLAN))]  # fmt: skip
    line = _line(offered, "achieved_requests_per_s")
    assert list(line.get_xdata()) == users and list(line.get_ydata()) == pytest.approx(rps)
    line = _line(offered, "goodput_requests_per_s")
    assert list(line.get_xdata()) == users and list(line.get_ydata()) == pytest.approx(good)
    assert good[-1] < rps[-1]  # the level that broke the TTFT target: its goodput is below its throughput
    for k, (workload, metric, p) in enumerate((("chat", "ttft", 95), ("code", "e2e", 50), ("chat", "e2e", 99))):
        col = "ttft_s" if metric == "ttft" else "e2e_s"
        expected = [np.percentile([r[col] * 1000 for r in _judged(rows, i) if r["ok"] and r["workload"] == workload],
                                  p) for i in range(len(PLAN))]  # fmt: skip
        line = _line(offered, f"{workload} {metric} p{p}")
        assert list(line.get_xdata()) == users, k  # the offered load: saturated levels do not pile up
        assert list(line.get_ydata()) == pytest.approx(expected)
        assert list(_line(achieved, f"{workload} {metric} p{p}").get_xdata()) == pytest.approx(rps)
    for fig in (offered, achieved):
        for ax in fig.axes:
            assert ax.get_ylabel().strip() and ax.get_xlabel().strip() and ax.get_ylim()[0] == 0
    assert all("offered load" in ax.get_xlabel() for ax in offered.axes)
    assert all(ax.get_xlabel() == "achieved requests/s" for ax in achieved.axes)


def test_low_sample_levels_are_drawn_hollow_exactly_where_too_few_requests(tmp_path: Path) -> None:
    rows, levels = _levels()
    expected = _expected_low_sample(rows)
    assert [lv.low_sample() for lv in levels] == expected
    assert expected[0] == {"chat": [95, 99]} and expected[1] == {"chat": [95, 99], "code": [95, 99]}  # 19 < 20
    offered, _ = sweep_figures(levels, sweep_knee(levels), SPEC)
    for workload in ("chat", "code"):
        for p in (50, 95, 99):
            flagged = [float(u) for u, flags in zip(PLAN, expected, strict=True) if p in flags.get(workload, [])]
            hollow = [line for ax in offered.axes for line in ax.get_lines()
                      if line.get_gid() == f"{workload} ttft p{p} low sample"]  # fmt: skip
            assert [list(h.get_xdata()) for h in hollow] == ([flagged] if flagged else [])
            if hollow:
                assert hollow[0].get_markerfacecolor() == "white"
    legend = " ".join(t.get_text() for t in offered.legends[0].get_texts())
    assert "low sample" in legend and "p95 < 20" in legend and "p99 < 100" in legend


def test_the_report_table_and_summary_warn_of_low_samples(tmp_path: Path) -> None:
    rows, levels = _levels()
    expected = _expected_low_sample(rows)
    run_dir = make_run_dir(tmp_path / "run", [request(i, 100) for i in range(20)], {"status": "finished"})
    write_sweep(run_dir, SweepResult(LEVEL_S * 2, levels, complete=True))
    result = build_report(run_dir, SPEC)
    html = result.report.read_text()
    table = html[html.index('id="sweep-levels"') : html.index("</table>", html.index('id="sweep-levels"'))]
    cells = re.findall(r'<td class="l low-sample">(.*?)</td>', table, re.S)
    assert len(cells) == len(PLAN)
    for cell, flags, k in zip(cells, expected, range(len(PLAN)), strict=True):
        judged = _judged(rows, k)
        words = [
            f"{w}: {', '.join(f'p{p}' for p in ps)} "
            f"({sum(1 for r in judged if r['ok'] and r['workload'] == w)} requests)"
            for w, ps in flags.items()
        ]
        assert cell.strip() == (f"⚠ {'; '.join(words)}" if words else "")
    assert "p95 from fewer than 20 or p99 from fewer than 100" in html
    header = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", table)
    assert header[0] == "Offered load (users)" and "Goodput req/s" in header and "Low sample" in header
    sweep = json.loads(result.summary_json.read_text())["sweep"]
    assert [lv["low_sample"] for lv in sweep["levels"]] == [
        {w: [f"p{p}" for p in ps] for w, ps in flags.items()} for flags in expected
    ]
    assert [lv["goodput_requests_per_s"] for lv in sweep["levels"]] == pytest.approx(
        [lv.goodput_requests_per_s for lv in levels])  # fmt: skip


def test_a_sweep_json_from_before_the_counts_warns_on_the_levels_requests(tmp_path: Path) -> None:
    _, levels = _levels()
    write_sweep(tmp_path, SweepResult(LEVEL_S * 2, levels, complete=True))
    doc = json.loads((tmp_path / "sweep.json").read_text())
    for level in doc["levels"]:  # as written before the per-workload counts and goodput existed
        del level["latency_requests"], level["goodput_requests_per_s"]
    (tmp_path / "sweep.json").write_text(json.dumps(doc))
    result = read_sweep(tmp_path)
    assert result is not None
    old = result.levels
    # The level's judged requests (both workloads, failures included) stand in: an upper bound.
    assert [lv.goodput_requests_per_s for lv in old] == [None] * len(PLAN)
    assert [lv.low_sample() for lv in old] == [
        {w: [p for p, least in BOUNDS.items() if lv.requests < least] for w in lv.latency_ms
         if any(lv.requests < least for least in BOUNDS.values())} for lv in old]  # fmt: skip
    offered, _ = sweep_figures(old, sweep_knee(old), SPEC)  # still draws
    assert [line.get_gid() for ax in offered.axes for line in ax.get_lines()].count("goodput_requests_per_s") == 0
