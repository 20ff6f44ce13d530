"""The web UI's JSON after a run and for the vLLM tab: ``/tokenstorm/live.json`` carries users, RPS
and elapsed time; once the run has ended, its final verdict, report and the SLO status of the whole
run (the report's, not an empty 30 s window); the vLLM tab's series and table from ``server.jsonl``
(KV cache in %, prefix-cache hit rate, preemptions), kept after the monitor process has gone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, make_run_dir, request
from tokenstorm.reports import build_report, load_slo_spec
from tokenstorm.workloads.plugin.web.live import POINT_WINDOW_S
from tokenstorm.workloads.plugin.web.server_history import ServerHistory, WindowedRatio, latest_gpus
from tokenstorm.workloads.rundir import read_summary

# In a process of its own: importing the web UI imports Locust, which patches the standard library.
_PAYLOAD = """
import json, sys
from pathlib import Path
from types import SimpleNamespace
from tokenstorm.workloads.plugin.core.context import context
from tokenstorm.workloads.plugin.web.webui_live import LiveState, live_payload

class Environment:  # what live_payload reads of Locust's (hashable and weak-referenceable, as it is)
    def __init__(self, state, users, rps):
        total = SimpleNamespace(current_rps=rps)
        self.runner = SimpleNamespace(state=state, user_count=users, stats=SimpleNamespace(total=total))
        self.host, self.parsed_options = "http://gpu:8000", None

args = json.loads(sys.argv[1])
env = Environment(args["state"], args["users"], args["rps"])
ctx = context(env)
ctx.run_dir, ctx.started_epoch_s, ctx.report_built = Path(args["run_dir"]), args["started"], args["built"]
print(json.dumps(live_payload(env, LiveState(), now=args["now"])))
"""


def _payload(run_dir: Path, *, state: str, users: int = 0, rps: float = 0.0, started: float, now: float,
             built: bool = False) -> dict[str, Any]:  # fmt: skip
    """/tokenstorm/live.json's object for a run in ``run_dir`` (Locust's runner ``state``)."""
    args = {"run_dir": str(run_dir), "state": state, "users": users, "rps": rps, "started": started, "now": now,
            "built": built}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", _PAYLOAD, json.dumps(args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_live_json_says_users_rps_and_elapsed_time_of_the_running_run(tmp_path: Path) -> None:
    payload = _payload(tmp_path, state="running", users=7, rps=3.456, started=1_700_000_000.0, now=1_700_000_012.5)
    assert payload["users"] == 7 and payload["requests_per_s"] == pytest.approx(3.46) and payload["elapsed_s"] == 12.5
    assert payload["running"] and not payload["ended"] and payload["final"] is None
    assert payload["server"] == {} and payload["server_empty"].startswith("no /metrics samples of the target yet")


def _ended_run(tmp_path: Path) -> Path:
    """A run directory whose report was built: 40 requests, 4 of them failed (an error rate of 10%)."""
    records = [request(i, 100 + i) for i in range(36)] + [request(36 + i, 0, ok=False) for i in range(4)]
    run_dir = make_run_dir(tmp_path / "run", records, {"started_epoch_s": 1000.0, "stopped_epoch_s": 1010.0,
                                                       "status": "finished"})  # fmt: skip
    spec = load_slo_spec(text="slos:\n  run:\n    error_rate: {max: 0.2}\n  chat:\n    ttft_ms: {p50: 50}\n")
    build_report(run_dir, spec)
    return run_dir


def test_after_the_run_live_json_gives_the_reports_verdict_report_link_and_slo_status(tmp_path: Path) -> None:
    run_dir = _ended_run(tmp_path)
    summary = read_summary(run_dir)
    assert summary is not None
    payload = _payload(run_dir, state="stopped", started=1000.0, now=5000.0, built=True)
    final = payload["final"]
    assert final["verdict"] == summary["verdict"] == "failed"  # the TTFT p50 of ~118 ms broke its 50 ms
    assert final["reason"] == summary["verdict_reason"]
    assert final["report_url"] == "./tokenstorm/report" and final["report_path"] == str(run_dir / "report.html")
    assert payload["elapsed_s"] == 10.0  # start to stop, not to now
    # The SLO status is the whole run's, as the report judged it — never "no data" for lack of a window.
    assert payload["slo_final"] and payload["slo_requests"] == summary["completed"] == 36
    judged = {r["metric"]: r for r in payload["slo"] if r["metric"] != "timing_fidelity"}
    expected = {s["metric"]: ("pass" if s["passed"] else "fail", s["measured"]) for s in summary["slos"]}
    assert {m: (r["status"], r["measured"]) for m, r in judged.items()} == {
        m: (st, pytest.approx(v, abs=1e-4)) for m, (st, v) in expected.items()
    }
    assert judged["error_rate"]["measured"] == pytest.approx(4 / 40)  # 4 of 40 failed, from the records
    assert judged["ttft_ms"]["status"] == "fail" and judged["error_rate"]["status"] == "pass"
    assert payload["slo"][0]["label"] == "Timing fidelity"


def test_before_the_report_is_built_the_ended_run_says_so_and_no_verdict(tmp_path: Path) -> None:
    run_dir = _ended_run(tmp_path)
    payload = _payload(run_dir, state="stopped", started=1000.0, now=1011.0, built=False)  # being built
    assert payload["ended"] and payload["final"] is None and not payload["slo_final"]


def _server_line(t: float, *, running: float, waiting: float, kv: float, queries: float, hits: float,
                 preemptions: float, target: str = "") -> str:  # fmt: skip
    return json.dumps({"epoch_s": t, "running": running, "waiting": waiting, "kv_cache_usage": kv,
                       "prefix_cache_queries": queries, "prefix_cache_hits": hits, "preemptions": preemptions,
                       "generation_tokens": 100 * t, "target": target, "ttft_hist": {"+Inf": 1.0}})  # fmt: skip


def test_the_vllm_tab_charts_kv_cache_in_percent_hit_rate_over_the_window_and_preemptions_since_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "server.jsonl"
    counters = [(1000.0, 0.0, 5.0), (1400.0, 300.0, 5.0), (1400.0, 300.0, 7.0), (2000.0, 450.0, 9.0)]  # q, h, pre
    kv = [0.013, 0.25, 0.5, 0.875]
    with path.open("w") as fh:
        for i, ((q, h, pre), usage) in enumerate(zip(counters, kv, strict=True)):
            fh.write(_server_line(100.0 + i, running=i, waiting=3 - i, kv=usage, queries=q, hits=h,
                                  preemptions=pre) + "\n")  # fmt: skip
            if i == 1:
                fh.write(json.dumps({"epoch_s": 101.5, "source": "server", "reason": "down", "gap": True}) + "\n")
    history = ServerHistory()
    series = history.read(path)[""]
    assert series["t"] == [100.0, 101.0, 102.0, 103.0]  # the gap line is no sample
    assert series["kv_cache_pct"] == pytest.approx([u * 100 for u in kv])  # the report's unit: %
    # Hits over queries since the first sample (all within the 10 s window): 75%, 75% (a second with
    # no queries changes nothing), then 450 of 1,000 — not the mean of 75% and 25%.
    assert series["prefix_hit_pct"] == pytest.approx([None, 75.0, 75.0, 45.0])
    assert series["preemptions"] == [0.0, 0.0, 2.0, 4.0]  # since the run's first sample
    assert series["running"] == [0, 1, 2, 3] and series["waiting"] == [3, 2, 1, 0]
    # The table: the newest sample; the hit rate over the run (hits / queries since its first sample).
    (row,) = history.latest_rows(path)
    assert row["kv_cache_pct"] == pytest.approx(87.5) and row["preemptions"] == 4.0
    assert row["prefix_hit_pct"] == pytest.approx(100 * 450 / 1000)
    # Appended lines are read on the next poll, and nothing is read twice.
    with path.open("a") as fh:
        fh.write(_server_line(104.0, running=1, waiting=0, kv=0.5, queries=2000, hits=450, preemptions=9) + "\n")
        fh.write('{"epoch_s": 105.0, "running"')  # being written: not yet a sample
    assert history.read(path)[""]["t"] == [100.0, 101.0, 102.0, 103.0, 104.0]


def test_ab_runs_get_a_server_line_and_a_table_row_per_target(tmp_path: Path) -> None:
    path = tmp_path / "server.jsonl"
    lines = [_server_line(100.0 + i, running=n, waiting=0, kv=0.1 * n, queries=0, hits=0, preemptions=0, target=t)
             for i in range(3) for t, n in (("fp8", 2), ("awq", 5))]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    history = ServerHistory()
    series = history.read(path)
    assert sorted(series) == ["awq", "fp8"] and series["awq"]["running"] == [5, 5, 5]
    rows: list[dict[str, Any]] = history.latest_rows(path)
    assert [(r["target"], r["kv_cache_pct"]) for r in rows] == [
        ("awq", pytest.approx(50.0)),
        ("fp8", pytest.approx(20.0)),
    ]


def test_after_the_run_the_charts_get_their_last_points_up_to_its_end() -> None:
    from tokenstorm.workloads.plugin.web.live import POINT_EVERY_S, SETTLE_S, LiveWindow

    t0 = 1_700_000_000.0
    live = LiveWindow(lambda: t0 + 21.0)  # 21 s in: points up to t0 + 14 are due (they wait SETTLE_S)
    live.start(t0)
    for i in range(20):
        live.observe({"workload": "chat", "ok": True, "start_epoch_s": t0 + i, "e2e_s": 0.5, "done_s": 0.5,
                      "ttft_s": 0.1, "tpot_s": 0.02, "itl_gaps_s": [0.02] * 20, "output_tokens": 21})  # fmt: skip
    before = live.snapshot()["t"]
    assert before[-1] == t0 + 21.0 - SETTLE_S
    live.finish(t0 + 20.5)  # stopped: every record is in, the last points need not wait
    after = live.snapshot()
    assert after["t"] == [t0 + POINT_EVERY_S * k for k in range(len(after["t"]))] and after["t"][-1] == t0 + 20.0
    assert (
        after["workloads"]["chat"]["e2e_p50_ms"][-1] == 500.0 and after["workloads"]["chat"]["tpot_p95_ms"][-1] == 20.0
    )


def test_the_gpu_table_shows_each_gpus_newest_sample_from_the_file_during_and_after_the_run(tmp_path: Path) -> None:
    path = tmp_path / "gpu.jsonl"
    rows = [{"epoch_s": 100.0 + t, "gpu": g, "name": "H200", "util_gpu_pct": 10.0 * t + g} for t in range(60)
            for g in range(12)]  # fmt: skip
    lines = [json.dumps(r) for r in rows]
    lines.insert(200, json.dumps({"epoch_s": 116.5, "source": "gpu", "reason": "sidecar down", "gap": True}))
    path.write_text("\n".join(lines) + "\n")
    newest = latest_gpus(path)
    assert [r["gpu"] for r in newest] == list(range(12))  # 0..11 in order (not "10" before "2")
    assert [r["util_gpu_pct"] for r in newest] == [590.0 + g for g in range(12)]  # the last second's samples
    assert latest_gpus(tmp_path / "none.jsonl") == []


def test_the_hit_rate_is_a_ratio_of_sums_over_the_charts_window_not_a_mean_of_ratios() -> None:
    ratio = WindowedRatio()
    assert ratio.window_s == POINT_WINDOW_S  # the LLM charts' window: each point sums up the 10 s before it
    # One second: 1 query, a hit (100%); the next: 99 queries, no hit. Per second that is 100% then 0%.
    assert ratio.add(1.0, 1, 1) == 100.0
    assert ratio.add(2.0, 0, 99) == pytest.approx(1.0)  # 1 hit of 100 queries, not (100% + 0%) / 2
    assert ratio.add(3.0, None, None) == pytest.approx(1.0)  # a missing interval (no counter) counts nothing
    # Ten seconds after the first interval it has left the window; after the second, nothing is left.
    assert ratio.add(11.0, 0, 0) == pytest.approx(0.0)  # 0 hits of the 99 queries of t = 2
    assert ratio.add(12.5, 0, 0) is None  # no query in the window: no rate (not 0%)


def test_a_noisy_hit_rate_swinging_0_to_95_percent_each_second_charts_steady(tmp_path: Path) -> None:
    """The emulator's prefix cache: 95% of a second's few queries hit, then none — the chart swung so."""
    path = tmp_path / "server.jsonl"
    queries, hits, lines = 0.0, 0.0, []
    for i in range(40):
        queries, hits = queries + 20, hits + (19 if i % 2 else 0)
        lines.append(_server_line(100.0 + i, running=1, waiting=0, kv=0.1, queries=queries, hits=hits,
                                  preemptions=0))  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    charted = [v for v in ServerHistory().read(path)[""]["prefix_hit_pct"] if v is not None]
    steady = charted[int(POINT_WINDOW_S) :]  # once the window is full: 10 intervals, 5 of each
    assert min(steady) == pytest.approx(47.5) and max(steady) == pytest.approx(47.5)  # 95 of 200 queries
