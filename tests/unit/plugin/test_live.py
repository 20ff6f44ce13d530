"""The web UI's live view: chart points from a rolling window, the live SLO status, GPU samples
read as they are appended — what a user watching a run sees, checked against numpy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tokenstorm.reports import load_slo_spec
from tokenstorm.workloads.plugin.web.live import (
    KEEP_S,
    MAX_POINTS,
    POINT_EVERY_S,
    POINT_WINDOW_S,
    SETTLE_S,
    LiveWindow,
)
from tokenstorm.workloads.plugin.web.live_slo import judge_recent
from tokenstorm.workloads.plugin.web.server_history import GpuHistory

T0 = 1_700_000_000.0  # a multiple of POINT_EVERY_S: points fall at T0 + 2k


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def row(end: float, workload: str = "chat", ok: bool = True, ttft_s: float = 0.1, gaps: tuple[float, ...] = (0.01,),
        tokens: int = 10, category: str | None = None, warmup: bool = False) -> dict[str, Any]:  # fmt: skip
    e2e = ttft_s + sum(gaps)
    return {"workload": workload, "ok": ok, "error_category": category, "start_epoch_s": end - e2e, "e2e_s": e2e,
            "done_s": e2e, "ttft_s": ttft_s if ok else None, "tpot_s": None, "itl_gaps_s": list(gaps),
            "output_tokens": tokens, "warmup": warmup}  # fmt: skip


def window_at(now: float) -> tuple[LiveWindow, Clock]:
    clock = Clock(now)
    live = LiveWindow(clock)
    live.start(T0)
    return live, clock


def test_a_point_sums_up_the_ten_seconds_before_it_per_workload() -> None:
    live, clock = window_at(T0)
    rng = np.random.default_rng(7)
    ttfts = rng.uniform(0.05, 0.5, 40)
    gaps = [tuple(rng.uniform(0.005, 0.05, 5)) for _ in range(40)]
    t = T0 + 20  # the point judged below
    for i in range(40):  # spread over (t - 10, t]
        live.observe(row(t - 9.9 + i * 0.24, ttft_s=float(ttfts[i]), gaps=gaps[i]))
    live.observe(row(t - 10.5, ttft_s=99.0))  # just before the window: not in this point
    live.observe(row(t - 1, ok=False, category="http_5xx", tokens=0))
    live.observe(row(t - 1, category="cancelled", ttft_s=99.0))  # stopped by the load test: no result
    live.observe(row(t - 2, workload="code", ttft_s=0.3, tokens=7))
    clock.now = t + SETTLE_S
    live.advance()
    snap = live.snapshot()
    i = snap["t"].index(t)
    chat, code = snap["workloads"]["chat"], snap["workloads"]["code"]
    all_gaps = np.concatenate([np.array(g) for g in gaps])
    assert chat["ttft_p50_ms"][i] == pytest.approx(np.percentile(ttfts, 50) * 1000, abs=0.01)
    assert chat["ttft_p95_ms"][i] == pytest.approx(np.percentile(ttfts, 95) * 1000, abs=0.01)
    assert chat["itl_p50_ms"][i] == pytest.approx(np.percentile(all_gaps, 50) * 1000, abs=0.01)
    assert chat["itl_p99_ms"][i] == pytest.approx(np.percentile(all_gaps, 99) * 1000, abs=0.01)
    assert chat["requests_per_s"][i] == pytest.approx(41 / POINT_WINDOW_S)  # the failure is a request too
    assert chat["errors_per_s"][i] == pytest.approx(1 / POINT_WINDOW_S)
    assert chat["tokens_per_s"][i] == pytest.approx(400 / POINT_WINDOW_S)
    assert code["ttft_p50_ms"][i] == pytest.approx(300) and code["tokens_per_s"][i] == pytest.approx(0.7)
    # Before the code workload's first request, its points say "no data", not zero latency.
    assert code["ttft_p50_ms"][0] is None and code["requests_per_s"][0] == 0


def test_a_point_waits_for_late_records_and_comes_even_when_no_request_ends() -> None:
    live, clock = window_at(T0)
    clock.now = T0 + 10 + SETTLE_S - 0.01
    live.observe(row(T0 + 9.5))
    assert live.snapshot()["t"][-1] == T0 + 8  # T0 + 10 is not settled yet
    clock.now = T0 + 30
    live.advance()  # a stalled server: no records, the points still come, with nothing in them
    snap = live.snapshot()
    assert snap["t"] == [T0 + k * POINT_EVERY_S for k in range(int((30 - SETTLE_S) // POINT_EVERY_S) + 1)]
    assert snap["workloads"]["chat"]["requests_per_s"][-1] == 0
    assert snap["workloads"]["chat"]["ttft_p50_ms"][-1] is None


def test_memory_stays_bounded_however_long_the_run() -> None:
    live, clock = window_at(T0)
    for k in range(int(MAX_POINTS * POINT_EVERY_S * 2.5)):
        clock.now = T0 + k
        live.observe(row(T0 + k))
    snap = live.snapshot()
    assert len(snap["t"]) <= MAX_POINTS and snap["every_s"] >= 4 * POINT_EVERY_S
    assert snap["t"][0] == T0  # decimated, not cut: the run's start is still on the chart
    assert len(live.recent_rows(window_s=1e9)) <= KEEP_S + 1
    new = LiveWindow(clock)
    new.start(clock.now)
    assert new.snapshot()["t"] == []  # a new run starts a new chart


def test_slo_status_is_the_reports_judgement_of_the_recent_requests() -> None:
    spec = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p95: 250}\n    itl_ms: {p99: 20}\n"
                              "    error_rate: {max: 0.1}\n  code:\n    ttft_ms: {p50: 100}\n")  # fmt: skip
    live, clock = window_at(T0)
    ttfts = [0.1 + 0.01 * i for i in range(20)]  # p95 = 0.2905 s: above 250 ms
    for i, ttft in enumerate(ttfts):
        live.observe(row(T0 + 5 + i, ttft_s=ttft, gaps=(0.01, 0.012)))
    live.observe(row(T0 + 1, warmup=True, ttft_s=9.0))  # warm-up: not judged
    clock.now = T0 + 26
    status = {s["label"]: s for s in judge_recent(spec, live.recent_rows(), T0)}
    ttft = status["chat ttft_ms p95 <= 250"]
    assert ttft["status"] == "fail" and ttft["measured"] == pytest.approx(np.percentile(ttfts, 95) * 1000, abs=1e-3)
    assert status["chat itl_ms p99 <= 20"]["status"] == "pass"
    assert status["chat error_rate max <= 0.1"]["status"] == "pass"
    assert status["code ttft_ms p50 <= 100"]["status"] == "no data"
    clock.now = T0 + 60  # the window moved past every request
    assert {s["status"] for s in judge_recent(spec, live.recent_rows(), T0)} == {"no data"}


def test_the_slo_status_judges_the_newest_requests_only_under_heavy_load() -> None:
    live, clock = window_at(T0)
    for k in range(100):
        live.observe(row(T0 + 1 + k * 0.1, ttft_s=0.001 * k, gaps=(0.01,) * 10))
    clock.now = T0 + 10.95  # the last ended at T0 + 10.9
    newest = live.recent_rows(max_requests=30)
    assert [r["ttft_s"] for r in newest] == pytest.approx([0.001 * k for k in range(70, 100)])  # oldest first
    assert len(live.recent_rows(max_gaps=95)) == 9  # the request that would pass the cap is left out
    assert len(live.recent_rows(window_s=5)) == 50


def test_gpu_samples_are_read_as_they_are_appended(tmp_path: Path) -> None:
    path = tmp_path / "gpu.jsonl"
    sample = {"epoch_s": T0, "gpu": 0, "uuid": "u", "name": "H100", "source": "nvml", "util_gpu_pct": 50,
              "mem_used_mib": 1000.0, "power_w": 300.5}  # fmt: skip
    second = json.dumps({**sample, "epoch_s": T0 + 1, "util_gpu_pct": 75})
    path.write_text(json.dumps(sample) + "\n" + json.dumps({"epoch_s": T0, "source": "gpu", "reason": "x", "gap": True})
                    + "\n" + second[:20])  # fmt: skip
    history = GpuHistory()
    assert history.read(path) == {"GPU 0": {"t": [T0], "util_gpu_pct": [50], "mem_used_mib": [1000.0],
                                            "power_w": [300.5]}}  # fmt: skip
    with path.open("a") as fh:  # the rest of the line being written
        fh.write(second[20:] + "\n" + json.dumps({**sample, "gpu": 1, "host": "node2", "power_w": None}) + "\n")
    gpus = history.read(path)
    assert gpus["GPU 0"]["util_gpu_pct"] == [50, 75] and gpus["node2 GPU 1"]["power_w"] == [None]
    assert history.read(None) == {}  # no run: nothing


def test_gpu_memory_slo_is_judged_on_recent_samples() -> None:
    spec = load_slo_spec(text="slos:\n  run:\n    gpu_memory_gb: {max: 1}\n")
    gpu: dict[str, dict[str, list[float | None]]] = {"GPU 0": {"t": [T0, T0 + 100], "mem_used_mib": [5000.0, 500.0],
                                                              "util_gpu_pct": [1, 1], "power_w": [1, 1]}}  # fmt: skip
    (status,) = judge_recent(spec, [], T0, gpu)
    assert status["status"] == "pass" and status["measured"] == pytest.approx(500 * 2**20 / 1e9, abs=1e-4)
    (status,) = judge_recent(spec, [], T0, None)
    assert status["status"] == "no data" and "--gpu-monitor" in status["note"]


def test_ab_runs_get_a_line_and_an_slo_status_per_target() -> None:
    spec = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p50: 200}\n")
    live, clock = window_at(T0)
    for i in range(10):
        live.observe({**row(T0 + 5 + i, ttft_s=0.1), "target": "fast"})
        live.observe({**row(T0 + 5 + i, ttft_s=0.3), "target": "slow"})
    clock.now = T0 + 26
    live.advance()
    assert set(live.snapshot()["workloads"]) == {"chat @ fast", "chat @ slow"}
    status = {s["label"]: s for s in judge_recent(spec, live.recent_rows(), T0)}
    assert status["fast: chat ttft_ms p50 <= 200"]["status"] == "pass"
    assert status["slow: chat ttft_ms p50 <= 200"]["status"] == "fail"
    assert status["slow: chat ttft_ms p50 <= 200"]["measured"] == pytest.approx(300.0)


def test_live_rate_slos_are_per_second_of_the_window_not_of_first_start_to_last_end() -> None:
    # 20 requests of 10 s each ended one a second over the last 20 s: 1 request/s. The reports' window
    # (first start -> last end) would read 20 / 29 s.
    spec = load_slo_spec(text="slos:\n  run:\n    requests_per_s: {min: 0.9}\n")
    live, clock = window_at(T0)
    for i in range(20):
        live.observe(row(T0 + 40 + i, ttft_s=1.0, gaps=(9.0,)))
    clock.now = T0 + 60
    status = judge_recent(spec, live.recent_rows(), T0, now=clock.now)
    assert status[0]["status"] == "pass" and status[0]["measured"] == pytest.approx(1.0, rel=0.06)


def test_an_ab_target_with_nothing_in_the_window_fails_instead_of_vanishing() -> None:
    spec = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p50: 200}\n")
    live, clock = window_at(T0)
    live.observe({**row(T0 + 5, ttft_s=0.1), "target": "fast"})
    clock.now = T0 + 10
    status = {s["label"]: s["status"] for s in judge_recent(spec, live.recent_rows(), T0, labels=["fast", "hung"])}
    assert status == {"fast: chat ttft_ms p50 <= 200": "pass", "hung: run requests judged >= 1": "fail"}


def test_the_live_status_first_says_whether_the_windows_timing_is_trustworthy_and_what_limited_it() -> None:
    spec = load_slo_spec(text="slos:\n  chat:\n    ttft_ms: {p95: 250}\n")
    live, clock = window_at(T0)
    for i in range(20):  # 10 token events each, read on time (kernel stamps 0.2 ms before the reads)
        live.observe({**row(T0 + 5 + i, gaps=(0.01,) * 9), "token_events": 10, "late_events": 0, "ttft_late": False,
                      "read_lag_max_s": 0.0002})  # fmt: skip
    clock.now = T0 + 26
    quiet = {"local": {"interval_s": 1.0, "cpu_pct": 20.0, "runq_wait_ms_per_s": 1.0, "throttled_ms_per_s": 0.0,
                       "loop_lag_p99_ms": 0.3, "loop_lag_max_ms": 0.5}}  # fmt: skip
    first, *slos = judge_recent(spec, live.recent_rows(), T0, now=clock.now, clock=quiet)
    assert (first["label"], first["status"], first["measured"]) == ("Timing fidelity", "pass", 0.0)
    assert first["note"].startswith("timing trustworthy: 100% of 200 token events") and first["limited_by"] == []
    assert [s["label"] for s in slos] == ["chat ttft_ms p95 <= 250"]  # the SLO rows follow, as before
    # Now half the requests had their TTFT and 3 more events read late, while other processes held the CPU.
    for i in range(20):
        live.observe({**row(T0 + 26 + i * 0.1, gaps=(0.01,) * 9), "token_events": 10, "late_events": 4 * (i % 2),
                      "ttft_late": bool(i % 2), "read_lag_max_s": 0.03})  # fmt: skip
    clock.now = T0 + 30
    busy = {"local": {**quiet["local"], "runq_wait_ms_per_s": 300.0, "loop_lag_p99_ms": 25.0}}
    first = judge_recent(spec, live.recent_rows(), T0, now=clock.now, clock=busy)[0]
    assert first["status"] == "fail" and first["measured"] == pytest.approx(40 / 400)
    assert "timing NOT trustworthy" in first["note"]
    assert any("waited 300 ms per second for a CPU" in cause for cause in first["limited_by"])
    # Nothing in the window: nothing to judge. Without clock figures the SLO rows come alone (as before).
    clock.now = T0 + 120
    assert judge_recent(spec, live.recent_rows(), T0, now=clock.now, clock={})[0]["status"] == "no data"
    assert judge_recent(spec, live.recent_rows(), T0, now=clock.now)[0]["label"] != "Timing fidelity"


def test_a_quality_slo_is_judged_live_on_the_recent_answers() -> None:
    spec = load_slo_spec(text="slos:\n  contract:\n    quality_needle: {min: 90%}\n  chat:\n    quality: {min: 90%}\n")
    live, clock = window_at(T0)
    for i in range(20):  # contract: every 4th answer missed its needle (75%); chat: all pass
        missed = i % 4 == 0
        live.observe({**row(T0 + 5 + i, workload="contract"), "check": "needle" if missed else "pass",
                      "check_results": f"needle:{'fail' if missed else 'pass'}"})  # fmt: skip
        live.observe({**row(T0 + 5 + i), "check": "pass", "check_results": "script:pass,complete:pass"})
    clock.now = T0 + 26
    status = {s["label"]: s for s in judge_recent(spec, live.recent_rows(), T0)}
    needle = status["contract quality_needle min >= 0.9"]
    assert needle["status"] == "fail" and needle["measured"] == pytest.approx(0.75)
    assert status["chat quality min >= 0.9"]["status"] == "pass"
