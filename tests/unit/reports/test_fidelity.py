"""The timing-fidelity verdict: late reads make a run's timing untrustworthy, and the reports say so
(verdict, exit code 5, summary.json, JUnit, the report's first screen), naming what limited it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import markupsafe
import numpy as np
import pandas as pd

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, evaluate_fidelity
from tokenstorm.workloads.rundir import LoadSample

EVENTS = 100  # token events per streamed record below


def frame(n: int = 100, late: int = 0, ttft_late: int = 0, lag_s: float | None = 0.0001,
          unstamped: int = 0) -> pd.DataFrame:  # fmt: skip
    """``n`` streamed records of ``EVENTS`` token events; ``late`` late events spread over the first
    records, ``ttft_late`` of them with a late TTFT, the last ``unstamped`` read without kernel stamps."""
    late_per = np.zeros(n)
    for i in range(late):
        late_per[i % n] += 1
    lags = np.full(n, np.nan if lag_s is None else lag_s)
    lags[n - unstamped :] = np.nan
    return pd.DataFrame({
        "ttft_s": np.full(n, 0.05), "token_events": np.full(n, float(EVENTS)), "late_events": late_per,
        "ttft_late": np.arange(n) < ttft_late, "read_lag_max_s": lags,
    })  # fmt: skip


def clock_sample(t: float, **per_worker: dict[str, float | None]) -> LoadSample:
    figures = {"interval_s": 1.0, "cpu_pct": 30.0, "runq_wait_ms_per_s": 1.0, "throttled_ms_per_s": 0.0,
               "nr_throttled": 0.0, "loop_lag_p99_ms": 0.3, "loop_lag_max_ms": 0.5}  # fmt: skip
    return LoadSample(t, 8, {w: f.get("cpu_pct") or 30.0 for w, f in per_worker.items()},
                      clock={w: {**figures, **f} for w, f in per_worker.items()})  # fmt: skip


def test_a_half_percent_late_run_is_trustworthy_and_says_how_much_was_on_time() -> None:
    fid = evaluate_fidelity(frame(late=50), [clock_sample(1.0, local={})])
    assert fid.trustworthy and fid.measured
    assert (fid.events, fid.late_events, fid.ttft_records, fid.ttft_late) == (10_000, 50, 100, 0)
    assert fid.late_share == 0.005 and fid.read_lag_p99_ms is not None and abs(fid.read_lag_p99_ms - 0.1) < 1e-9
    assert fid.reason == ("timing trustworthy: 99.5% of 10,000 token events and 100% of TTFTs read on time, "
                          "read lag p99 0.10 ms")  # fmt: skip
    assert fid.limited_by == []


def test_a_short_run_is_not_condemned_by_one_late_ttft() -> None:
    # 3 of 40 TTFTs read late is 7.5%, over the 5% share, but three reads say little of the run's
    # clock; six of 100 do.
    assert evaluate_fidelity(frame(n=40, ttft_late=3), []).trustworthy
    assert not evaluate_fidelity(frame(n=100, ttft_late=6), []).trustworthy
    assert evaluate_fidelity(frame(n=100, ttft_late=5), []).trustworthy  # 5%: at the bound


def test_thirty_percent_late_is_not_trustworthy_and_names_the_run_queue() -> None:
    load = [clock_sample(float(t), local={"runq_wait_ms_per_s": 310.0}) for t in range(5)]
    fid = evaluate_fidelity(frame(late=3000, ttft_late=12), load)
    assert not fid.trustworthy and fid.late_share == 0.3 and fid.ttft_late_share == 0.12
    assert fid.reason.startswith("timing NOT trustworthy: 30% of 10,000 token events and 12% of TTFTs read late "
                                 "(bounds 5%)")  # fmt: skip
    assert fid.limited_by == ["load generator local waited 310 ms per second for a CPU (run queue): "
                              "other processes on its cores"]  # fmt: skip
    assert "limited by: load generator local waited 310 ms per second" in fid.reason


def test_late_ttfts_alone_break_it() -> None:
    fid = evaluate_fidelity(frame(n=200, late=100, ttft_late=12), [])  # 0.5% of events, 6% of TTFTs
    assert not fid.trustworthy and fid.ttft_late_share == 0.06
    assert "no cause seen in the load generators' samples" in fid.reason
    assert evaluate_fidelity(frame(n=240, late=100, ttft_late=12), []).trustworthy  # 5%: at the bound


def test_late_events_bunched_into_a_few_streams_break_it_though_their_share_is_small() -> None:
    # 2 streams of 100 with 60 of their 100 events late: 1.2% of the events (under 5%), but those two
    # streams' ITLs and TPOT are the reader's, and two records of a hundred are what its p99 is made of.
    records = frame(n=100)
    records.loc[:1, "late_events"] = 60.0
    fid = evaluate_fidelity(records, [])
    assert fid.late_share == 0.012 and (fid.read_at_once, fid.read_at_once_share) == (2, 0.02)
    assert not fid.trustworthy
    assert ("2 of 100 streams (2%) read at once, more than half of their gaps late (bound 1%): their ITL and "
            "TPOT are not the server's, read lag p99 0.10 ms") in fid.reason  # fmt: skip
    # One of a hundred is at the bound; the same 120 late events spread thinly cost a gap each.
    records.loc[1, "late_events"] = 0.0
    assert evaluate_fidelity(records, []).trustworthy
    assert evaluate_fidelity(frame(n=100, late=120), []).read_at_once == 0
    # Half of the gaps late is not more than half; a 40-stream run has no minimum count to hide behind.
    short = frame(n=40)
    short.loc[0, "late_events"] = 49.0
    assert evaluate_fidelity(short, []).trustworthy
    short.loc[0, "late_events"] = 50.0
    assert not evaluate_fidelity(short, []).trustworthy


def test_a_one_or_two_token_answer_read_late_is_not_a_stream_read_at_once() -> None:
    # Classification-style answers: one or two token events have no ITL to make up; a late first token
    # is the TTFT bound's (five at least), so one of them does not condemn a 40-request run.
    for events, late in ((1, 1), (2, 1)):
        short = frame(n=40)
        short.loc[:, "token_events"] = float(events)
        short.loc[0, "late_events"] = float(late)
        fid = evaluate_fidelity(short, [])
        assert fid.read_at_once == 0 and fid.trustworthy, (events, fid.reason)
    # Three events, two gaps both after a late read: its TPOT is the reader's.
    short = frame(n=40)
    short.loc[:, "token_events"] = 3.0
    short.loc[0, "late_events"] = 2.0
    assert evaluate_fidelity(short, []).read_at_once == 1


def test_records_without_kernel_stamps_are_judged_by_the_event_loop_lag() -> None:
    records = frame(unstamped=40)
    lagging = [clock_sample(float(t), local={"loop_lag_p99_ms": 12.0 if t == 3 else 6.0}) for t in range(4)]
    fid = evaluate_fidelity(records, lagging)
    assert not fid.trustworthy and fid.unstamped_records == 40
    assert "40 records read without kernel stamps" in fid.reason and "7.50 ms (bound 5 ms)" in fid.reason
    assert "event loop of local lagged 7.50 ms (p99)" in fid.reason
    # One bad second (a segment rotated) in a quiet run is not a lagging loop: the run's mean counts.
    hiccup = [clock_sample(float(t), local={"loop_lag_p99_ms": 12.0 if t == 3 else 0.3}) for t in range(10)]
    assert evaluate_fidelity(records, hiccup).trustworthy
    quiet = evaluate_fidelity(records, [clock_sample(1.0, local={"loop_lag_p99_ms": 2.0})])
    assert quiet.trustworthy and "event-loop lag p99 2.00 ms" in quiet.reason
    # The same loop lag does not matter when every record was kernel-stamped: lateness is seen per event.
    assert evaluate_fidelity(frame(), lagging).trustworthy


def test_runs_from_before_the_measurement_are_not_measured_and_not_failed() -> None:
    old = frame().drop(columns=["late_events", "ttft_late", "read_lag_max_s"])
    fid = evaluate_fidelity(old, [LoadSample(1.0, 8, {"local": 40.0})])
    assert fid.trustworthy and not fid.measured and fid.reason.startswith("timing not measured")
    segments = frame().assign(late_events=np.nan)  # old segments: the column read back as nulls
    assert not evaluate_fidelity(segments, []).measured
    # Old JSON records: defaults (0 late, no stamps) and no event-loop lag samples in load.jsonl.
    unstamped = evaluate_fidelity(frame(lag_s=None), [LoadSample(1.0, 8, {"local": 40.0})])
    assert unstamped.trustworthy and not unstamped.measured and "no event-loop lag samples" in unstamped.reason
    assert not evaluate_fidelity(frame(0), []).measured  # nothing streamed: nothing to judge


def test_the_mask_selects_the_records_judged_and_non_streamed_ones_do_not_count() -> None:
    records = pd.concat([frame(50, late=5000), frame(50)], ignore_index=True)
    mask = np.arange(100) >= 50
    assert evaluate_fidelity(records, [], mask).trustworthy
    assert not evaluate_fidelity(records, []).trustworthy
    whole = frame(10).assign(ttft_s=np.nan, token_events=1.0, read_lag_max_s=np.nan)  # non-streamed responses
    assert evaluate_fidelity(pd.concat([frame(10), whole], ignore_index=True), []).events == 10 * EVENTS


def test_per_worker_figures_from_clock_samples_weigh_each_interval() -> None:
    load = [clock_sample(1.0, w1={"runq_wait_ms_per_s": 10.0, "interval_s": 1.0, "throttled_ms_per_s": None},
                         w2={"cpu_pct": 95.0, "throttled_ms_per_s": 120.0}),
            clock_sample(4.0, w1={"runq_wait_ms_per_s": 50.0, "interval_s": 3.0, "throttled_ms_per_s": None},
                         w2={"cpu_pct": 97.0, "throttled_ms_per_s": 120.0})]  # fmt: skip
    fid = evaluate_fidelity(frame(), load)
    w1, w2 = fid.per_worker["w1"], fid.per_worker["w2"]
    assert w1["mean_runq_wait_ms_per_s"] == 40.0 and w1["max_runq_wait_ms_per_s"] == 50.0
    assert w1["mean_throttled_ms_per_s"] is None  # no cgroup figures there: unknown, not zero
    assert (w2["mean_cpu_pct"], w2["max_cpu_pct"]) == (96.0, 97.0)
    assert fid.trustworthy and fid.limited_by == [
        "cgroup CPU limit throttled load generator w2 for 120 ms per second: raise the container's CPU limit",
        "load generator w2 used 96% of a core: add load-generator processes (--processes N)",
    ]


def test_old_load_samples_without_a_clock_give_cpu_without_the_idle_first_sample() -> None:
    # The first sample of old files spanned the idle time before the start (704% seen on a healthy run).
    load = [
        LoadSample(1.0, 8, {"local": 704.6}),
        LoadSample(2.0, 8, {"local": 5.0}),
        LoadSample(3.0, 8, {"local": 7.0}),
    ]
    fid = evaluate_fidelity(frame(), load)
    assert fid.per_worker["local"]["mean_cpu_pct"] == 6.0 and fid.per_worker["local"]["max_cpu_pct"] == 7.0
    assert fid.per_worker["local"]["max_runq_wait_ms_per_s"] is None and fid.limited_by == []


def _run(tmp_path: Path, late: int, worker: str = "local") -> Path:
    """A run whose SLOs hold, 100 streamed records of 51 token events, ``late`` of them late in all."""
    records = [request(i, 100, token_events=51, late_events=late // 100 + (i < late % 100), read_lag_max_s=0.0002,
                       ttft_late=False) for i in range(100)]  # fmt: skip
    run_dir = make_run_dir(tmp_path / f"run{late}", records, {"status": "finished"})
    clock = {"interval_s": 1.0, "cpu_pct": 40.0, "runq_wait_ms_per_s": 300.0, "throttled_ms_per_s": None,
             "nr_throttled": None, "loop_lag_p99_ms": 0.4, "loop_lag_max_ms": 0.9}  # fmt: skip
    lines = [{"epoch_s": 1000.0 + t, "users": 8, "cpu": {worker: 40.0}, "clock": {worker: clock}} for t in range(10)]
    (run_dir / "load.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run_dir


def test_a_passing_run_read_late_is_unreliable_with_exit_code_5(tmp_path: Path) -> None:
    result = build_report(_run(tmp_path, late=1530))  # 30% of 5,100 token events
    assert (result.summary.verdict, result.exit_code) == ("unreliable", 5)
    assert result.summary.reason.startswith("timing not trustworthy — 30% of 5,100 token events")
    # no --slo: the verdict names the default check, not "SLOs held"
    assert result.summary.reason.endswith(
        "(default check held: error rate 0.00% ≤ 1% (no latency SLOs given; --slo FILE))"
    )
    summary = json.loads(result.summary_json.read_text())
    assert summary["verdict"] == "unreliable" and "client_bound" not in summary
    fid = summary["timing_fidelity"]
    assert fid["trustworthy"] is False and fid["late_events"] == 1530 and fid["events"] == 5100
    assert fid["per_worker"]["local"]["mean_runq_wait_ms_per_s"] == 300.0
    case = next(c for c in ET.parse(result.junit).getroot().iter("testcase") if c.get("name") == "timing_fidelity")
    failure = case.find("failure")
    assert case.get("classname") == "tokenstorm" and failure is not None
    assert "30% of 5,100 token events" in (failure.get("message") or "")
    page = result.report.read_text()
    assert "Timing not trustworthy" in page and 'id="fidelity"' in page and "Timing NOT trustworthy" in page


def test_a_run_read_half_a_percent_late_passes_and_shows_its_fidelity(tmp_path: Path) -> None:
    result = build_report(_run(tmp_path, late=26))  # 0.5% of 5,100
    assert (result.summary.verdict, result.exit_code) == ("passed", 0)
    fid = json.loads(result.summary_json.read_text())["timing_fidelity"]
    assert fid["trustworthy"] is True and fid["measured"] is True and fid["late_share"] == 26 / 5100
    case = next(c for c in ET.parse(result.junit).getroot().iter("testcase") if c.get("name") == "timing_fidelity")
    assert case.find("failure") is None and case.find("skipped") is None
    page = result.report.read_text()
    assert "Timing trustworthy" in page and "99.5% of 5,100 token events" in page
    assert 'id="fidelity-workers"' in page and "300 (max 300)" in page  # run-queue wait per load generator
    assert "Load generator pressure (timing still held)" in page  # the 300 ms/s run queue, named though it held


def test_an_old_run_is_not_measured_and_passes(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path / "old", [request(i, 100, token_events=51) for i in range(20)],
                           {"status": "finished", "client_bound": ["local"]})  # fmt: skip
    result = build_report(run_dir)
    assert result.exit_code == 0 and result.summary.fidelity is not None and not result.summary.fidelity.measured
    case = next(c for c in ET.parse(result.junit).getroot().iter("testcase") if c.get("name") == "timing_fidelity")
    assert case.find("skipped") is not None
    assert "Timing not measured" in result.report.read_text()


def test_a_hostile_worker_id_stays_text_on_the_first_screen(tmp_path: Path) -> None:
    evil = '<script>alert("w")</script>'
    result = build_report(_run(tmp_path, late=1530, worker=evil))
    page = result.report.read_text()
    shown = str(markupsafe.escape(evil))
    assert evil not in page and page.count(shown) >= 2  # in the reason's "limited by" and the per-generator table


def test_each_ab_target_has_its_own_fidelity(tmp_path: Path) -> None:
    def recs(target: str, late: int) -> list[dict]:
        return [{**request(i, 100, token_events=51, late_events=late, read_lag_max_s=0.0001), "target": target}
                for i in range(20)]  # fmt: skip

    targets = [{"label": "a", "url": "http://a:1"}, {"label": "b", "url": "http://b:1"}]
    run_dir = make_run_dir(tmp_path / "ab", recs("a", 0) + recs("b", 20), {"status": "finished", "targets": targets})
    result = build_report(run_dir)
    ab = json.loads(result.summary_json.read_text())["targets"]["targets"]
    assert ab["a"]["timing_fidelity"]["trustworthy"] is True and ab["a"]["timing_fidelity"]["late_events"] == 0
    assert ab["b"]["timing_fidelity"]["trustworthy"] is False and ab["b"]["timing_fidelity"]["events"] == 20 * 51
    assert result.summary.verdict == "unreliable"  # a fifth of the run's events were read late
    # One lane late by 8%, the other on time: pooled that is 4% (within the bound), but the comparison
    # rests on the late lane's numbers — the run is unreliable and says which target.
    run_dir = make_run_dir(tmp_path / "ab2", recs("a", 0) + recs("b", 4), {"status": "finished", "targets": targets})
    result = build_report(run_dir)
    assert result.summary.verdict == "unreliable" and result.exit_code == 5
    assert "target b: 8% of 1,020 token events" in result.summary.reason, result.summary.reason


def test_an_incomplete_run_stays_incomplete_and_says_its_timing_was_late_too(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, late=1530)
    meta = json.loads((run_dir / "run.json").read_text())
    meta.update(workers_seen=["local", "w2"], workers_lost={"w2": {"detected_epoch_s": 1005.0}})
    (run_dir / "run.json").write_text(json.dumps(meta))
    result = build_report(run_dir)
    assert (result.summary.verdict, result.exit_code) == ("incomplete", 4)
    assert "timing not trustworthy either — 30% of 5,100 token events" in result.summary.reason


def test_timing_verdict_warn_says_it_but_the_slos_set_the_verdict(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, late=1530)
    meta = json.loads((run_dir / "run.json").read_text())
    meta["options"] = {**meta.get("options", {}), "timing_verdict": "warn"}
    (run_dir / "run.json").write_text(json.dumps(meta))
    result = build_report(run_dir)
    assert (result.summary.verdict, result.exit_code) == ("passed", 0)
    assert "timing not trustworthy (--timing-verdict warn): 30% of 5,100 token events" in result.summary.reason
    case = ET.parse(result.junit).getroot().find(".//testcase[@name='timing_fidelity']")
    assert case is not None and case.find("failure") is None
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("message", "").startswith("--timing-verdict warn: timing NOT")
