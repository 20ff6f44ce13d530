"""The report's figures as a reader sees them: full width with text that stays readable, every axis
labelled with its unit and starting at zero, legends beside the data, and the warm-up drawn as a
labelled span with its throughput plotted — not as a 0 tok/s hole that reads like an outage."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from reports import load_run, load_slo_spec
from reports.judging.slo import judged_mask
from reports.render.plots import distribution_figure, figure_png, timeseries_figure
from tests.conftest import make_run_dir, request
from workloads.rundir import GpuSample, ServerSample, to_line

T0 = 1000.0
WARMUP_S = 10.0
SHOWN_AT_PX = 1300  # the report's image width on a laptop screen (the page is ~1,180 px wide)


def _run_dir(tmp_path: Path, warmup_option: float = WARMUP_S) -> Path:
    """300 requests over 30 s (two workloads), the first 10 s flagged warm-up as ``--warmup 10``
    flags them; users ramping 1..8; GPU and vLLM samples every second."""
    rng = np.random.default_rng(7)
    records = []
    for i in range(300):
        ttft_ms = float(80 + rng.exponential(40))
        records.append(request(i, ttft_ms, workload="chat" if i % 3 else "code", warmup=i / 10 < warmup_option,
                               output_tokens=int(20 + i % 40), e2e_s=ttft_ms / 1000 + 0.4 + (i % 7) / 20))  # fmt: skip
    records.append(request(150, 100, ok=False, error_category="cancelled"))
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished", "options": {"warmup": warmup_option}})
    with (run_dir / "load.jsonl").open("w") as fh:
        for s in range(33):
            sample = {"epoch_s": T0 + s, "users": min(8, s + 1), "cpu": {"local": 30.0}, "clock": {}}
            fh.write(json.dumps(sample) + "\n")
    (run_dir / "gpu.jsonl").write_text("".join(
        to_line(GpuSample(T0 + s, 0, "GPU-0", "H100", "nvml", util_gpu_pct=90.0, mem_used_mib=60_000.0,
                          power_w=400.0)) + "\n" for s in range(33)))  # fmt: skip
    (run_dir / "server.jsonl").write_text(
        "".join(to_line(ServerSample(T0 + s, running=5.0, waiting=1.0, kv_cache_usage=0.3)) + "\n" for s in range(33))
    )
    return run_dir


def _timeseries(run_dir: Path, warmup_s: float | None = None) -> tuple[Figure, list[str]]:
    run = load_run(run_dir)
    return timeseries_figure(run, T0, judged_mask(run, load_slo_spec()), warmup_s)


def _title(ax: Axes) -> str:
    return ax.get_title(loc="left") or ax.get_title()


def _png_width_px(fig: Figure) -> int:
    png = base64.b64decode(figure_png(fig))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return int(struct.unpack(">I", png[16:20])[0])  # IHDR width


def _smallest_text_px(fig: Figure, png_width_px: int) -> float:
    """The smallest text of ``fig`` in screen pixels when its PNG is shown ``SHOWN_AT_PX`` wide."""
    texts = [t for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
    return min(t.get_fontsize() * fig.dpi / 72 for t in texts) * SHOWN_AT_PX / png_width_px


def _legends_beside_the_data(fig: Figure, axes: list[Axes]) -> None:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    right = max(ax.get_window_extent(renderer).x1 for ax in axes)
    legends = [ax.get_legend() for ax in axes if ax.get_legend() is not None] + list(fig.legends)
    assert legends, "no legend at all"
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert box.x0 >= right - 1, "a legend sits on a panel's data"
        assert box.x1 <= fig.bbox.width + 1, "a legend is cut off at the figure's edge"


def test_the_over_time_figure_is_full_width_labelled_and_from_zero(tmp_path: Path) -> None:
    fig, titles = _timeseries(_run_dir(tmp_path))
    axes = fig.axes
    assert len(axes) == len(titles) >= 8  # users, CPU, latency, throughput, 3 GPU, 2 vLLM
    png_width = _png_width_px(fig)
    assert png_width >= 1300  # drawn for the page's full width, not scaled up from ~55% of it
    first = figure_png(_timeseries(_run_dir(tmp_path))[0])
    assert figure_png(_timeseries(_run_dir(tmp_path))[0]) == first  # the same run draws the same bytes
    fig, _ = _timeseries(_run_dir(tmp_path))  # figure_png closed the others
    assert _smallest_text_px(fig, png_width) >= 11
    for ax in fig.axes:
        assert ax.get_ylabel().strip(), f"{_title(ax)!r} has no y label"
        assert ax.get_ylim()[0] == 0, f"{_title(ax)!r}'s y axis does not start at 0"
        top = max((float(np.nanmax(line.get_ydata())) for line in ax.get_lines() if len(line.get_ydata())), default=0)
        assert top <= ax.get_ylim()[1], f"{_title(ax)!r} cuts off its data"
    by_title = {_title(ax): ax for ax in fig.axes}
    latency = next(ax for t, ax in by_title.items() if t.startswith("Latency"))
    throughput = next(ax for t, ax in by_title.items() if t.startswith("Output tokens/s"))
    assert "(ms)" in latency.get_ylabel() and "tokens/s" in throughput.get_ylabel()
    assert "(s)" in fig.axes[-1].get_xlabel()
    users = by_title["Users"].get_lines()[0]
    assert list(users.get_ydata()) == [min(8, s + 1) for s in range(33)]  # load.jsonl, from 0 up
    _legends_beside_the_data(fig, fig.axes)


def test_the_warm_up_is_a_labelled_span_and_its_throughput_is_drawn(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    fig, _ = _timeseries(run_dir)
    for ax in fig.axes:  # every panel shows where the warm-up was, and says what it is
        spans = [p for p in ax.patches if isinstance(p, Rectangle) and "warm-up" in str(p.get_label())]
        assert len(spans) == 1, _title(ax)
        assert spans[0].get_x() == 0 and spans[0].get_width() == pytest.approx(WARMUP_S)
        assert any("warm-up" in t.get_text() for t in ax.get_legend().get_texts())
    # The throughput line covers the warm-up too: per bin, the output tokens of the requests that
    # ended in it (warm-up ones included, the cancelled one left out), from the records themselves.
    line = next(ax for ax in fig.axes if _title(ax).startswith("Output tokens/s")).get_lines()[0]
    mids, y = np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)
    rows = [json.loads(s) for s in (run_dir / "requests.jsonl").read_text().splitlines()]
    kept = [r for r in rows if r["ok"]]
    ends = np.array([r["start_epoch_s"] + r["e2e_s"] - T0 for r in kept])
    tokens = np.array([r["output_tokens"] for r in kept], dtype=float)
    half = np.diff(mids)[0] / 2
    for mid, value in zip(mids[:-1], y[:-1], strict=True):
        inside = (ends >= mid - half) & (ends < mid + half)
        assert value == pytest.approx(tokens[inside].sum() / (2 * half))
    in_warmup = (mids > 2) & (mids < WARMUP_S)
    assert in_warmup.sum() >= 5 and (y[in_warmup] > 0).all()  # measured, not a hole
    # Latency lines cover the warm-up too (they were blank there).
    latency = next(ax for ax in fig.axes if _title(ax).startswith("Latency")).get_lines()[0]
    lx, ly = np.asarray(latency.get_xdata()), np.asarray(latency.get_ydata(), dtype=float)
    assert not np.isnan(ly[(lx > 1) & (lx < WARMUP_S)]).any()


def test_the_warm_up_span_follows_the_slo_files_warmup_and_is_absent_without_one(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, warmup_option=0)
    run = load_run(run_dir)
    spec = load_slo_spec(text="warmup_s: 5\nslos:\n  run:\n    error_rate: {max: 0.01}\n")
    for warmup_s, width in ((5.0, 5.0), (None, 4.9)):  # given, or found from the requests left out (the last at 4.9 s)
        fig, _ = timeseries_figure(run, T0, judged_mask(run, spec), warmup_s)
        span = next(p for p in fig.axes[0].patches if "warm-up" in str(p.get_label()))
        assert isinstance(span, Rectangle) and span.get_width() == pytest.approx(width)
    fig, _ = timeseries_figure(run, T0, judged_mask(run, load_slo_spec()))
    assert not [p for ax in fig.axes for p in ax.patches if "warm-up" in str(p.get_label())]


def test_the_distributions_are_full_width_labelled_and_from_zero(tmp_path: Path) -> None:
    run = load_run(_run_dir(tmp_path))
    mask = judged_mask(run, load_slo_spec())
    png_width = _png_width_px(distribution_figure(run, mask))
    assert png_width >= 1300
    fig = distribution_figure(run, mask)
    assert _smallest_text_px(fig, png_width) >= 11
    ttft, e2e, itl = fig.axes
    assert (ttft.get_xlabel(), e2e.get_xlabel()) == ("TTFT (ms)", "E2E (ms)")
    assert "(ms)" in itl.get_xlabel() and itl.get_ylabel().strip()  # the histogram's counts are named
    for ax in fig.axes:
        assert ax.get_ylabel().strip() and ax.get_ylim()[0] == 0 and ax.get_xlim()[0] == 0
    # The CDF of each workload ends at 1 over the judged requests (warm-up excluded): numpy's own.
    rows = [json.loads(s) for s in (run.path / "requests.jsonl").read_text().splitlines()]
    chat = np.sort([r["ttft_s"] * 1000 for r in rows if r["ok"] and not r["warmup"] and r["workload"] == "chat"])
    line = next(line for line in ttft.get_lines() if line.get_label() == "chat")
    assert np.asarray(line.get_xdata())[-1] == pytest.approx(chat[-1]) and np.asarray(line.get_ydata())[-1] == 1
    assert len(line.get_xdata()) == chat.size
    _legends_beside_the_data(fig, fig.axes)
