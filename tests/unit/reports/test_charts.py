"""The report's interactive charts as data: every line what the records say, point for point (a hover
reads these values back), every axis named with its unit, the warm-up a named band with its requests
drawn, long series thinned to a small page, and the JSON safe inside the page's <script> block."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import load_run, load_slo_spec
from tokenstorm.reports.judging.slo import judged_mask
from tokenstorm.reports.render.charts import (
    ASSETS,
    MAX_POINTS,
    UPLOT_VERSION,
    Chart,
    page_json,
    script_assets,
    series,
    thinned,
)
from tokenstorm.reports.render.distributions import PERCENTILE_GRID, distribution_charts
from tokenstorm.reports.render.plots import WARMUP_LABEL, time_bins
from tokenstorm.reports.render.timeseries import timeseries_charts
from tokenstorm.workloads.rundir import GpuSample, ServerSample, to_line

T0 = 1000.0
WARMUP_S = 10.0


def _run_dir(tmp_path: Path, warmup_option: float = WARMUP_S) -> Path:
    """300 requests over 30 s (two workloads), the first 10 s flagged warm-up as ``--warmup 10`` flags
    them; six failures; users ramping 1..8; GPU and vLLM samples every second."""
    rng = np.random.default_rng(7)
    records = []
    for i in range(300):
        ttft_ms = float(80 + rng.exponential(40))
        e2e_s = ttft_ms / 1000 + 0.4 + (i % 7) / 20
        workload = "chat" if i % 3 else "code"
        records.append(
            request(
                i,
                ttft_ms,
                workload=workload,
                warmup=i / 10 < warmup_option,
                output_tokens=int(20 + i % 40),
                e2e_s=e2e_s,
            )
        )
    records += [request(i, 0, ok=False) for i in (120, 121, 122, 200, 260, 261)]  # http_5xx
    records.append(request(150, 100, ok=False, error_category="cancelled"))
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished", "options": {"warmup": warmup_option}})
    with (run_dir / "load.jsonl").open("w") as fh:
        for s in range(33):
            sample = {"epoch_s": T0 + s, "users": min(8, s + 1), "cpu": {"local": 30.0}, "clock": {}}
            fh.write(json.dumps(sample) + "\n")
    gpu = [
        GpuSample(T0 + s, 0, "GPU-0", "H100", "nvml", util_gpu_pct=90.0, mem_used_mib=60_000.0, power_w=400.0)
        for s in range(33)
    ]
    (run_dir / "gpu.jsonl").write_text("".join(to_line(g) + "\n" for g in gpu))
    server = [ServerSample(T0 + s, running=5.0, waiting=1.0, kv_cache_usage=0.3) for s in range(33)]
    (run_dir / "server.jsonl").write_text("".join(to_line(s) + "\n" for s in server))
    return run_dir


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(s) for s in (run_dir / "requests.jsonl").read_text().splitlines()]


def _charts(run_dir: Path, warmup_s: float | None = None) -> dict[str, Chart]:
    run = load_run(run_dir)
    return {c.id: c for c in timeseries_charts(run, T0, judged_mask(run, load_slo_spec()), warmup_s)}


def _line(chart: Chart, label: str) -> tuple[np.ndarray, np.ndarray]:
    s = next(s for s in chart.series if s.label == label)
    return np.asarray(s.x, dtype=float), np.asarray([np.nan if v is None else v for v in s.y], dtype=float)


def test_every_over_time_chart_names_its_quantity_and_unit(tmp_path: Path) -> None:
    charts = _charts(_run_dir(tmp_path))
    expected = {
        "users",
        "cpu",
        "latency",
        "throughput",
        "errors",
        "gpu-util",
        "gpu-memory",
        "gpu-power",
        "vllm-requests",
        "vllm-kv-cache",
    }
    assert expected <= set(charts)
    for c in charts.values():
        assert c.kind == "time" and "(s)" in c.x_label and c.y_label.strip() and c.series, c.id
    assert "(ms)" in charts["latency"].y_label and "tokens/s" in charts["throughput"].y_label
    # the legend writes each value as the page writes its unit (tokenstorm/reports/judging/formats.py)
    units = {c.id: c.unit for c in charts.values()}
    assert (units["latency"], units["throughput"], units["errors"], units["users"]) == ("ms", "tok_s", "per_s", "count")
    assert units["vllm-kv-cache"] == units["gpu-util"] == "percent" and units["vllm-requests"] == "count"
    x, users = _line(charts["users"], "users")
    # load.jsonl, from 0; a step line keeps the samples where the level changed, and the last
    assert list(users) == [min(8, s + 1) for s in range(8)] + [8] and list(x) == [*range(8), 32]
    assert charts["users"].series[0].step
    _, gib = _line(charts["gpu-memory"], "GPU 0")
    assert gib == pytest.approx(np.full(33, 60_000 / 1024))  # MiB sampled, GiB drawn


def test_a_percentile_over_time_line_is_numpys_percentile_of_each_bins_requests(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    charts = _charts(run_dir)
    ok = [r for r in _records(run_dir) if r["ok"]]
    start = np.array([r["start_epoch_s"] - T0 for r in ok])
    ttft_ms = np.array([r["ttft_s"] * 1000 for r in ok])
    run = load_run(run_dir)
    edges = time_bins(run, T0, run.requests["ok"].to_numpy(dtype=bool))
    for label, q in (("TTFT p50", 50), ("TTFT p95", 95)):
        x, y = _line(charts["latency"], label)
        assert x == pytest.approx((edges[:-1] + edges[1:]) / 2)
        for b, value in enumerate(y):
            inside = (start >= edges[b]) & ((start < edges[b + 1]) | (b == len(y) - 1))
            if inside.any():
                assert value == pytest.approx(np.percentile(ttft_ms[inside], q)), (label, b)
            else:  # a bin after the last start (the bins run to the last request's end): nothing to draw
                assert np.isnan(value), (label, b)
        assert np.isfinite(y).sum() >= 25
    assert next(s for s in charts["latency"].series if s.label == "TTFT p95").dash  # p95 dashed, p50 solid


def test_the_warm_up_is_a_named_band_and_its_requests_are_drawn(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    charts = _charts(run_dir)
    for c in charts.values():  # every chart shows where the warm-up was, and says what it is
        assert [(b.start, b.label) for b in c.bands] == [(0.0, WARMUP_LABEL)], c.id
        assert c.bands[0].end == pytest.approx(WARMUP_S)
    # Throughput per bin: the output tokens of the requests that ended in it (warm-up ones included, the
    # cancelled one left out), from the records themselves.
    mids, y = _line(charts["throughput"], "output tok/s")
    kept = [r for r in _records(run_dir) if r["ok"]]
    ends = np.array([r["start_epoch_s"] + r["e2e_s"] - T0 for r in kept])
    tokens = np.array([r["output_tokens"] for r in kept], dtype=float)
    half = np.diff(mids)[0] / 2
    for mid, value in zip(mids[:-1], y[:-1], strict=True):
        inside = (ends >= mid - half) & (ends < mid + half)
        assert value == pytest.approx(tokens[inside].sum() / (2 * half))
    in_warmup = (mids > 2) & (mids < WARMUP_S)
    assert in_warmup.sum() >= 5 and (y[in_warmup] > 0).all()  # measured, not a hole
    lx, ly = _line(charts["latency"], "TTFT p50")
    assert not np.isnan(ly[(lx > 1) & (lx < WARMUP_S)]).any()


def test_failures_are_drawn_per_second_by_category_and_start(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    mids, y = _line(_charts(run_dir)["errors"], "http_5xx")
    width = np.diff(mids)[0]
    assert y.sum() * width == pytest.approx(6)  # the six failures; the cancelled request is no failure
    at = np.array([r["start_epoch_s"] - T0 for r in _records(run_dir) if r.get("error_category") == "http_5xx"])
    edges = np.append(mids - width / 2, mids[-1] + width / 2)
    assert y[np.digitize(at[0], edges) - 1] > 0  # drawn where it started


def test_the_warm_up_band_follows_the_slo_files_warmup_and_is_absent_without_one(tmp_path: Path) -> None:
    run = load_run(_run_dir(tmp_path, warmup_option=0))
    spec = load_slo_spec(text="warmup_s: 5\nslos:\n  run:\n    error_rate: {max: 0.01}\n")
    for warmup_s, width in ((5.0, 5.0), (None, 4.9)):  # given, or found from the requests left out (last at 4.9 s)
        charts = timeseries_charts(run, T0, judged_mask(run, spec), warmup_s)
        assert charts[0].bands[0].end == pytest.approx(width)
    assert not [b for c in timeseries_charts(run, T0, judged_mask(run, load_slo_spec())) for b in c.bands]


def test_distributions_are_numpys_percentiles_of_each_workloads_judged_requests(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    run = load_run(run_dir)
    charts = {c.id: c for c in distribution_charts(run, judged_mask(run, load_slo_spec()))}
    assert set(charts) == {"dist-ttft", "dist-itl", "dist-e2e"}
    rows = [r for r in _records(run_dir) if r["ok"] and not r["warmup"]]
    for key, col in (("dist-ttft", "ttft_s"), ("dist-e2e", "e2e_s")):
        chart = charts[key]
        assert chart.kind == "percentile" and "(ms)" in chart.y_label and "percentile" in chart.x_label
        assert [s.label for s in chart.series] == ["chat", "code"]
        for w in ("chat", "code"):
            x, y = _line(chart, w)
            ref = np.array([r[col] * 1000 for r in rows if r["workload"] == w])
            assert list(x) == list(PERCENTILE_GRID) and x[-1] == 100
            assert y == pytest.approx(np.percentile(ref, PERCENTILE_GRID))
    _, itl = _line(charts["dist-itl"], "chat")
    assert itl == pytest.approx(np.full(PERCENTILE_GRID.size, 10.0))  # every gap of every chat reply: 10 ms


def test_long_series_are_thinned_and_keep_their_spikes() -> None:
    x = np.arange(30 * 60 * 10, dtype=float)  # 30 minutes sampled ten times a second
    y = np.ones_like(x)
    y[12_345] = 99.0  # one sample's spike
    y[15_000] = np.nan
    xs, ys = thinned(x, y)
    assert len(xs) <= MAX_POINTS and xs == sorted(xs)
    assert 99.0 in ys and (12_345.0, 99.0) in zip(xs, ys, strict=True)
    assert thinned([0, 1, 2], [1.0, float("nan"), 3.0]) == ([0.0, 1.0, 2.0], [1.0, None, 3.0])  # short: as is
    assert len(series("s", x, y).x) <= MAX_POINTS


def test_the_embedded_json_cannot_close_its_script_block_and_reads_back_whole() -> None:
    hostile = "</script><script>alert(1)</script><!-- & \u2028 \u2029 >"
    text = str(page_json([Chart("c", hostile, "x", "y", [series(hostile, [0, 1], [1.0, float("nan")])])]))
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    back = json.loads(text)["charts"][0]
    assert back["title"] == hostile and back["series"][0]["label"] == hostile and back["series"][0]["y"] == [1.0, None]


def test_the_page_carries_each_x_array_once_and_values_to_six_digits() -> None:
    shared = [0.1234567, 1.0, 2.0]
    chart = Chart(
        "c",
        "t",
        "x",
        "y",
        [
            series("a", shared, [1 / 3, 2.0, 3.0]),
            series("b", shared, [4.0, 5.0, 6.0]),
            series("c", [0.0, 1.0], [7.0, 8.0]),
        ],
    )
    back = json.loads(str(page_json([chart])))["charts"][0]
    assert back["xs"] == [[0.123, 1.0, 2.0], [0.0, 1.0]]
    assert [s["xi"] for s in back["series"]] == [0, 0, 1]
    assert back["series"][0]["y"] == [0.333333, 2.0, 3.0]


def test_a_run_of_failures_draws_its_errors_and_no_empty_latency_chart(tmp_path: Path) -> None:
    run = load_run(make_run_dir(tmp_path / "run", [request(i, 0, ok=False) for i in range(5)]))
    mask = judged_mask(run, load_slo_spec())
    charts = {c.id: c for c in timeseries_charts(run, T0, mask)}
    assert "latency" not in charts and [s.label for s in charts["errors"].series] == ["http_5xx"]
    assert distribution_charts(run, mask) == []


def test_the_inlined_assets_are_the_vendored_uplot_with_its_licence_and_cannot_end_their_block() -> None:
    assets = script_assets()
    assert f"uPlot (v{UPLOT_VERSION})" in str(assets["uplot_js"])[:200]  # the banner names the version
    assert "MIT" in (ASSETS / "uPlot.LICENSE.txt").read_text() and UPLOT_VERSION in (ASSETS / "README.md").read_text()
    for text in assets.values():
        assert "</script" not in text.lower() and "</style" not in text.lower()
