"""The progress lines' figures and words (:mod:`tokenstorm.workloads.plugin.core.progress`): rates and TTFT percentiles
of the last 10 s as numpy computes them, errors with their share and commonest category, a clock that
cannot be trusted said in the line as it is judged live (the web UI's own judgement), its reason cut to
keep the line within 100 characters (the verdict words stay)."""

from __future__ import annotations

import numpy as np
import pytest

from tokenstorm.workloads.plugin.core.progress import (
    WINDOW_S,
    Outcomes,
    Progress,
    Timing,
    judge_timing,
    plain_line,
    window_figures,
)


def _row(end: float, ttft_s: float | None = 0.2, ok: bool = True, tokens: int = 50, **kw: object) -> dict:
    return {
        "start_epoch_s": end - 1.0,
        "e2e_s": 1.0,
        "ttft_s": ttft_s if ok else None,
        "ok": ok,
        "output_tokens": tokens,
        "error_category": None if ok else "http_5xx",
        **kw,
    }


def _progress(**kw: object) -> Progress:
    base: dict = {
        "elapsed_s": 75.0,
        "remaining_s": 225.0,
        "stage": None,
        "warmup": False,
        "users": 16,
        "requests_per_s": 13.24,
        "output_tokens_per_s": 1512.0,
        "ttft_p50_ms": 45.0,
        "ttft_p95_ms": 120.0,
        "requests": 1000,
        "errors": 0,
        "top_error": None,
        "top_error_count": 0,
        "recent_errors": 0,
        "timing": Timing("pass", "read on time"),
    }
    return Progress(**{**base, **kw})


def test_the_window_counts_the_last_10_s_as_numpy_does() -> None:
    rng = np.random.default_rng(3)
    now = 1000.0
    inside = [_row(now - rng.uniform(0.01, WINDOW_S), ttft_s=float(t)) for t in rng.uniform(0.05, 0.9, 40)]
    failed = [_row(now - 1.0, ok=False, tokens=3) for _ in range(5)]
    old = [_row(now - WINDOW_S - 2.0, ttft_s=9.0) for _ in range(30)]  # ended before the window: not counted
    figures = window_figures([*old, *inside, *failed], now, 0.0, started_epoch_s=900.0)
    ttfts = [r["ttft_s"] for r in inside]
    assert figures["requests_per_s"] == pytest.approx(45 / WINDOW_S)
    assert figures["output_tokens_per_s"] == pytest.approx((40 * 50 + 5 * 3) / WINDOW_S)
    assert figures["ttft_p50_ms"] == pytest.approx(np.percentile(ttfts, 50) * 1000)
    assert figures["ttft_p95_ms"] == pytest.approx(np.percentile(ttfts, 95) * 1000)
    assert figures["errors"] == 5


def test_a_master_waits_for_its_workers_records_and_a_young_run_has_a_shorter_window() -> None:
    now = 1000.0
    rows = [_row(now - 1.0) for _ in range(10)] + [_row(now - 6.0) for _ in range(20)]
    # 4 s behind now (workers ship every ~3 s): the newest second is not in yet, so it is not counted as empty
    assert window_figures(rows, now, 4.0, started_epoch_s=900.0)["requests_per_s"] == pytest.approx(20 / WINDOW_S)
    # 5 s into the run, a rate over 5 s, not 10
    assert window_figures(rows, now, 0.0, started_epoch_s=now - 5.0)["requests_per_s"] == pytest.approx(10 / 5.0)
    assert window_figures(rows, now, 0.0, started_epoch_s=now - 0.2)["requests_per_s"] is None


def test_errors_show_their_count_share_and_commonest_category() -> None:
    outcomes = Outcomes()
    for category in ["http_5xx"] * 7 + ["timeout"] * 2 + ["cancelled"] * 4:
        outcomes.add({"ok": False, "error_category": category})
    for _ in range(91):
        outcomes.add({"ok": True, "error_category": None})
    requests, errors, top, count = outcomes.snapshot()
    assert (requests, errors, top, count) == (100, 9, "http_5xx", 7)  # cancelled: no result, not counted
    line = plain_line(_progress(requests=requests, errors=errors, top_error=top, top_error_count=count))
    assert "9 errors (9.0% http_5xx ×7)" in line, line
    assert "no errors" in plain_line(_progress())


def test_every_figure_a_user_reads_is_in_the_line() -> None:
    line = plain_line(_progress(stage="step 2 of 3"))
    assert line.startswith("1:15 (3:45 left), step 2 of 3 · 16 users, 13.2 req/s, ")
    assert "TTFT p50/p95 45/120 ms" in line and line.endswith("timing ok")


def test_an_unreliable_clock_is_said_as_it_is_judged_and_the_line_still_fits() -> None:
    # 30 streamed requests, a third of their token events read late, while the load generator used a whole
    # core: the web UI's live judgement fails the timing and names the cause.
    now = 1000.0
    rows = [
        _row(
            now - 1.0 - i / 10,
            token_events=50,
            late_events=20 if i % 3 == 0 else 0,
            ttft_late=i % 3 == 0,
            read_lag_max_s=0.05 if i % 3 == 0 else 0.0003,
            stream=True,
            workload="chat",
        )
        for i in range(30)
    ]
    clock = {"local": {"cpu_pct": 100.0, "loop_lag_p99_ms": 80.0}}
    timing = judge_timing(rows, clock, now, now - 30.0, [])
    assert timing.status == "fail", timing
    line = plain_line(_progress(timing=timing, errors=12, requests=1000, top_error="http_5xx", top_error_count=12))
    assert "TIMING NOT TRUSTWORTHY" in line and "12 errors (1.2% http_5xx)" in line
    assert timing.note[:40] not in line, line  # no room: the reason is left to the live display and the end
    quiet = plain_line(_progress(timing=timing))
    assert "TIMING NOT TRUSTWORTHY" in quiet and len(quiet) <= 100, quiet
