"""Prefix-cache accounting on constructed runs written with the project's own writers: the hit rate from the
records (cached ÷ prompt tokens of those reporting) and from /metrics counter increases (a server restart
included), per run, per A/B target and over time, in summary.json, the report's table and the console —
checked against numpy on the raw records and samples."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from tests.unit.reports.test_agent_report import _write_run
from tests.unit.reports.test_headline import figures
from tokenstorm.reports import build_report, console_block, load_run, load_slo_spec, summarize
from tokenstorm.reports.data.cache import counter_increase
from tokenstorm.reports.render.plots import CACHE_PANEL_TITLE, time_bins
from tokenstorm.reports.render.timeseries import timeseries_charts
from tokenstorm.workloads.rundir import ServerSample, to_line


def _rows(n: int = 80, seed: int = 5, target: str = "") -> list[dict]:
    """Requests over 40 s whose cache warms up: cached tokens grow with time; every 7th does not report them."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        prompt = int(rng.integers(200, 3000))
        row = {"workload": "chat" if i % 2 else "agent", "start_epoch_s": 1000.0 + i / 2, "ok": True,
               "ttft_s": 0.1, "e2e_s": 0.6, "output_tokens": 30, "prompt_tokens": prompt, "target": target,
               "cached_tokens": int(prompt * min(0.95, i / n) * rng.uniform(0.8, 1.0))}  # fmt: skip
        if i % 7 == 3:
            row["cached_tokens"] = None  # a response without prompt_tokens_details
        rows.append(row)
    # a failed request's usage is not counted
    rows.append({"workload": "chat", "start_epoch_s": 1001.0, "ok": False, "error_category": "http_5xx",
                 "status_code": 500, "prompt_tokens": 999, "cached_tokens": 999, "target": target})  # fmt: skip
    return rows


def _server(path: Path, target: str = "", restart_at: int = 25) -> list[dict]:
    """One sample a second, counters cumulative; the server restarts (counters back near 0) at ``restart_at``."""
    rng = np.random.default_rng(len(target) + 1)
    hits = queries = preempt = 0.0
    rows = []
    for i in range(41):
        if i == restart_at:
            hits, queries, preempt = 0.0, 0.0, 0.0
        q = float(rng.integers(1000, 5000))
        queries += q
        hits += float(int(q * rng.uniform(0.2, 0.9)))
        preempt += float(rng.integers(0, 3))
        kv = float(rng.uniform(0.1, 0.9))
        rows.append({"epoch_s": 1000.0 + i, "prefix_cache_hits": hits, "prefix_cache_queries": queries,
                     "preemptions": preempt, "kv_cache_usage": kv, "target": target})  # fmt: skip
    with path.open("a") as fh:
        for r in rows:
            fh.write(to_line(ServerSample(running=1.0, waiting=0.0, **r)) + "\n")
    return rows


def _increase(values: list[float]) -> float:
    """Prometheus increase() without extrapolation, the plain way."""
    total = 0.0
    for before, now in itertools.pairwise(values):
        total += now - before if now >= before else now
    return total


def test_hit_rates_from_records_and_metrics_match_numpy_in_every_output(tmp_path: Path) -> None:
    rows = _rows()
    run_dir = _write_run(tmp_path / "run", rows)
    samples = _server(run_dir / "server.jsonl")
    build_report(run_dir, load_slo_spec())
    summary = json.loads((run_dir / "summary.json").read_text())
    reporting = [r for r in rows if r["ok"] and r.get("cached_tokens") is not None]
    cached = np.sum([r["cached_tokens"] for r in reporting])
    prompt = np.sum([r["prompt_tokens"] for r in reporting])
    hits = _increase([s["prefix_cache_hits"] for s in samples])
    queries = _increase([s["prefix_cache_queries"] for s in samples])
    kv = np.array([s["kv_cache_usage"] for s in samples])
    want = {
        "cached_tokens": cached, "cached_prompt_tokens": prompt, "cache_reporting_requests": len(reporting),
        "prefix_cache_hit_rate_records": cached / prompt, "prefix_cache_hit_rate": cached / prompt,
        "prefix_cache_hits": hits, "prefix_cache_queries": queries, "prefix_cache_hit_rate_server": hits / queries,
        "preemptions": _increase([s["preemptions"] for s in samples]),
        "max_kv_cache_usage": kv.max(), "mean_kv_cache_usage": kv.mean(),
    }  # fmt: skip
    assert hits < samples[-1]["prefix_cache_hits"] + samples[24]["prefix_cache_hits"]  # the restart is in the data
    html = (run_dir / "report.html").read_text()
    shown = figures(html, "prefix-cache-table").rows
    for key, value in want.items():
        assert summary[key] == pytest.approx(value, rel=1e-12), key
        assert float(shown["all"][key]) == pytest.approx(value, rel=1e-12), key
    assert summary["prefix_cache_hit_rate_source"] == "records"
    # Per workload: the records' rate of its own requests (the server cannot tell workloads apart).
    for w in ("chat", "agent"):
        mine = [r for r in reporting if r["workload"] == w]
        rate = sum(r["cached_tokens"] for r in mine) / sum(r["prompt_tokens"] for r in mine)
        assert summary["workloads"][w]["prefix_cache_hit_rate"] == pytest.approx(rate)
        assert float(shown[f"workload:{w}"]["prefix_cache_hit_rate"]) == pytest.approx(rate)
    # Written as a user reads it, on the page and the console.
    assert f"{cached / prompt:.2%}" in html and f"{hits / queries:.2%}" in html
    lines = console_block(summarize(load_run(run_dir), load_slo_spec()))
    assert f"prefix-cache hit rate {cached / prompt:.1%} (records' cached ÷ prompt tokens)" in lines


def test_without_cached_tokens_in_the_records_the_rate_is_the_servers(tmp_path: Path) -> None:
    rows = [{**r, "cached_tokens": None} for r in _rows()]
    run_dir = _write_run(tmp_path / "run", rows)
    samples = _server(run_dir / "server.jsonl", restart_at=99)
    summary = summarize(load_run(run_dir), load_slo_spec()).overall
    rate = (samples[-1]["prefix_cache_hits"] - samples[0]["prefix_cache_hits"]) / (
        samples[-1]["prefix_cache_queries"] - samples[0]["prefix_cache_queries"]
    )
    assert summary["prefix_cache_hit_rate_records"] is None and summary["cache_reporting_requests"] == 0
    assert summary["prefix_cache_hit_rate"] == pytest.approx(rate) and summary["prefix_cache_hit_rate_source"] == (
        "server_metrics"
    )


def test_a_run_with_neither_source_has_no_rate_and_no_section(tmp_path: Path) -> None:
    run_dir = _write_run(tmp_path / "run", [{**r, "cached_tokens": None} for r in _rows()])
    build_report(run_dir, load_slo_spec())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["prefix_cache_hit_rate"] is None and summary["prefix_cache_hit_rate_source"] is None
    assert 'id="prefix-cache"' not in (run_dir / "report.html").read_text()


def test_ab_targets_each_get_their_own_servers_rate(tmp_path: Path) -> None:
    rows = _rows(target="a") + _rows(seed=6, target="b")
    run_dir = _write_run(tmp_path / "run", rows, {"targets": [{"label": "a"}, {"label": "b"}]})
    a, b = _server(run_dir / "server.jsonl", "a"), _server(run_dir / "server.jsonl", "b", restart_at=10)
    summary = summarize(load_run(run_dir), load_slo_spec())
    assert summary.targets is not None
    for label, samples in (("a", a), ("b", b)):
        block = summary.targets["targets"][label]
        hits = _increase([s["prefix_cache_hits"] for s in samples])
        queries = _increase([s["prefix_cache_queries"] for s in samples])
        assert block["prefix_cache_hit_rate_server"] == pytest.approx(hits / queries)
        mine = [r for r in rows if r["target"] == label and r["ok"] and r.get("cached_tokens") is not None]
        assert block["prefix_cache_hit_rate"] == pytest.approx(
            sum(r["cached_tokens"] for r in mine) / sum(r["prompt_tokens"] for r in mine)
        )


def test_hit_rate_over_time_beside_kv_cache_and_preemptions(tmp_path: Path) -> None:
    rows = _rows()
    run_dir = _write_run(tmp_path / "run", rows)
    samples = _server(run_dir / "server.jsonl")
    run = load_run(run_dir)
    mask = np.ones(len(run.requests), dtype=bool)
    charts = timeseries_charts(run, 1000.0, mask)
    titles = [c.title for c in charts]
    kv, cache, pre = (
        titles.index(t) for t in ("vLLM KV-cache usage", CACHE_PANEL_TITLE, "vLLM preemptions per second")
    )
    assert kv + 1 == cache and cache + 1 == pre  # side by side, in that order
    records, server = charts[cache].series[:2]
    assert (records.label, server.label, server.dash) == ("records", "vLLM /metrics", True)
    edges = time_bins(run, 1000.0, run.requests["ok"].to_numpy(dtype=bool))  # the chart's own bins
    x, y = records.x, np.array(records.y, dtype=float)  # None (no figure) reads as NaN
    sx, sy = server.x, np.array(server.y, dtype=float)
    assert len(x) == len(sx) == len(edges) - 1
    # The records' line: per bin, cached ÷ prompt tokens of the requests that started in it.
    ok = [r for r in rows if r["ok"] and r.get("cached_tokens") is not None]
    t = np.array([s["epoch_s"] - 1000.0 for s in samples])
    checked = 0
    for i in range(len(x)):
        last = i == len(x) - 1  # numpy's histogram: the last bin is closed
        sel = [
            r
            for r in ok
            if edges[i] <= r["start_epoch_s"] - 1000.0
            and (r["start_epoch_s"] - 1000.0 < edges[i + 1] or (last and r["start_epoch_s"] - 1000.0 <= edges[i + 1]))
        ]
        if sel:
            want = 100 * sum(r["cached_tokens"] for r in sel) / sum(r["prompt_tokens"] for r in sel)
            assert y[i] == pytest.approx(want)
            checked += 1
        # The /metrics line: the bin's increase of hits over that of queries, a restart counting from 0.
        inside = [j for j in range(1, len(samples)) if edges[i] <= t[j] and (t[j] < edges[i + 1] or (
            last and t[j] <= edges[i + 1]))]  # fmt: skip
        if inside:
            h = sum(_increase([samples[j - 1]["prefix_cache_hits"], samples[j]["prefix_cache_hits"]]) for j in inside)
            q = sum(_increase([samples[j - 1]["prefix_cache_queries"], samples[j]["prefix_cache_queries"]])
                    for j in inside)  # fmt: skip
            assert sy[i] == pytest.approx(100 * h / q)
    assert checked >= 10
    # Preemptions per second: each bin's increase over its width; no figure where no sample fell.
    py = np.array(charts[pre].series[0].y, dtype=float)
    for i in range(len(x)):
        inside = [j for j in range(1, len(samples)) if edges[i] <= t[j] < edges[i + 1]]
        if inside:
            n = sum(_increase([samples[j - 1]["preemptions"], samples[j]["preemptions"]]) for j in inside)
            assert py[i] == pytest.approx(n / (edges[i + 1] - edges[i]))
        elif edges[i] > t[-1]:
            assert np.isnan(py[i])
    assert np.nanmax(py) > 0


def test_counter_increase_counts_a_restart_from_zero_and_skips_missing_samples() -> None:
    assert counter_increase(np.array([10.0, 15.0, np.nan, 20.0, 3.0, 8.0])) == pytest.approx(5 + 5 + 3 + 5)
    assert counter_increase(np.array([np.nan, 4.0])) is None


def test_live_export_splits_prompt_tokens_by_cache_as_the_report_counts_them() -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from tokenstorm.workloads.plugin.export.prometheus import ClientMetrics

    rows = _rows()
    metrics = ClientMetrics()
    for r in rows:
        metrics.observe(r)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}  # fmt: skip
    for w in ("chat", "agent"):
        ok = [r for r in rows if r["ok"] and r["workload"] == w]
        hit = got[("tokenstorm_prompt_tokens_total", (("cache", "hit"), ("workload", w)))]
        miss = got[("tokenstorm_prompt_tokens_total", (("cache", "miss"), ("workload", w)))]
        unreported = got[("tokenstorm_prompt_tokens_total", (("cache", "unreported"), ("workload", w)))]
        reporting = [r for r in ok if r.get("cached_tokens") is not None]
        assert hit == sum(r["cached_tokens"] for r in reporting)
        assert hit + miss == sum(r["prompt_tokens"] for r in reporting)
        assert unreported == sum(r["prompt_tokens"] for r in ok if r.get("cached_tokens") is None)


def test_compare_shows_the_hit_rate_and_its_change_in_percentage_points(tmp_path: Path) -> None:
    from tokenstorm.reports.compare.html import render_comparison
    from tokenstorm.reports.compare.runs import compare_runs

    cold = [{**r, "cached_tokens": 0} for r in _rows()]
    dirs = [_write_run(tmp_path / "cold", cold), _write_run(tmp_path / "warm", _rows())]
    for d in dirs:
        build_report(d, load_slo_spec())
    rates = [json.loads((d / "summary.json").read_text())["prefix_cache_hit_rate"] for d in dirs]
    assert rates[0] == 0.0 and rates[1] > 0.3
    comparison = compare_runs(dirs)
    row = next(r for r in comparison.rows if r["key"] == "prefix_cache_hit_rate" and r["scope"] == "all")
    assert row["values"] == pytest.approx(rates) and row["deltas"][1] == pytest.approx((rates[1] - rates[0]) * 100)
    assert f"+{(rates[1] - rates[0]) * 100:.1f}pp" in render_comparison(comparison)
