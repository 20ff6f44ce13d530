"""One verdict everywhere in the web UI: the live timing-fidelity row waits for enough late reads
before it fails (the final verdict's minimum, ``FIDELITY_MIN_LATE``) and, when the load generators'
samples show no cause, says so without failing; after the run only its own verdict (summary.json)
speaks — the LLM table's Total row and the SLO table's timing row say what the verdict box says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenstorm.reports import load_slo_spec
from tokenstorm.workloads.plugin.web.final import UNTRUSTED, final_slo_rows, final_timing_status, total_label
from tokenstorm.workloads.plugin.web.live_slo import judge_recent
from tokenstorm.workloads.plugin.web.server_history import LoadHistory
from tokenstorm.workloads.rundir import FIDELITY_MIN_LATE

T0 = 1_700_000_000.0
SPEC = load_slo_spec(text="slos:\n  run:\n    error_rate: {max: 0.01}\n")
#: one load generator's clock figures with nothing holding it back
QUIET = {"local": {"interval_s": 1.0, "cpu_pct": 20.0, "runq_wait_ms_per_s": 1.0, "throttled_ms_per_s": 0.0,
                   "loop_lag_p99_ms": 0.3, "loop_lag_max_ms": 0.5}}  # fmt: skip
#: other processes held its CPU
BUSY = {"local": {**QUIET["local"], "runq_wait_ms_per_s": 300.0}}


def streams(n: int, read_at_once: int) -> list[dict[str, Any]]:
    """``n`` streams of 10 token events (9 gaps), kernel-stamped, of which ``read_at_once`` had 6 of
    their 9 gaps after a late read (more than half: read at once); the rest read on time."""
    rows = []
    for i in range(n):
        late = 6 if i < read_at_once else 0
        end = T0 + 5 + i * 0.2
        rows.append({"workload": "chat", "ok": True, "error_category": None, "start_epoch_s": end - 0.3,
                     "e2e_s": 0.3, "done_s": 0.3, "ttft_s": 0.1, "tpot_s": 0.02, "itl_gaps_s": [0.02] * 9,
                     "output_tokens": 10, "warmup": False, "token_events": 10, "late_events": late,
                     "ttft_late": False, "read_lag_max_s": 0.0002})  # fmt: skip
    return rows


def timing(rows: list[dict[str, Any]], clock: dict[str, dict[str, float | None]]) -> dict[str, Any]:
    first = judge_recent(SPEC, rows, T0, now=T0 + 30, clock=clock)[0]
    assert first["label"] == "Timing fidelity"
    return first


def test_one_stream_of_96_read_at_once_is_too_few_to_fail_the_live_timing() -> None:
    """What a user saw: FAIL after "1 of 96 streams read at once", "limited by: no cause seen"."""
    row = timing(streams(96, 1), QUIET)
    assert row["status"] == "wait", row
    assert row["note"] == (f"too few to judge yet: 1 of 96 streams read at once (a share is judged from "
                           f"{FIDELITY_MIN_LATE} late reads)")  # fmt: skip
    # Under pressure too: one stream is no evidence yet, whatever held the load generator back.
    assert timing(streams(96, 1), BUSY)["status"] == "wait"


def test_enough_streams_read_at_once_fail_with_their_cause_or_are_said_without_one() -> None:
    enough = streams(96, FIDELITY_MIN_LATE)
    failed = timing(enough, BUSY)
    assert failed["status"] == "fail" and "timing NOT trustworthy" in failed["note"]
    assert any("waited 300 ms per second for a CPU" in cause for cause in failed["limited_by"])
    # The same reads with nothing in the load generators' samples: said, not failed.
    said = timing(enough, QUIET)
    assert said["status"] == "warn" and said["limited_by"] == []
    assert said["note"].startswith("no cause seen, so not failed live (the verdict judges the whole run): ")
    assert (
        f"{FIDELITY_MIN_LATE} of 96 streams" in said["note"] and "no cause seen in the load generators'" in said["note"]
    )


def test_streams_read_on_time_pass_and_an_empty_window_has_no_data() -> None:
    assert timing(streams(40, 0), QUIET)["status"] == "pass"
    assert timing([], QUIET)["status"] == "no data"


def summary(verdict: str, trustworthy: bool, measured: bool = True) -> dict[str, Any]:
    reason = "timing trustworthy: 99.8% of TTFTs read on time" if trustworthy else "timing NOT trustworthy: x"
    return {"verdict": verdict, "timing_fidelity": {"trustworthy": trustworthy, "measured": measured,
                                                    "late_share": 0.002, "reason": reason, "limited_by": []},
            "slos": [{"scope": "run", "metric": "error_rate", "stat": "max", "op": "<=", "threshold": 0.01,
                      "measured": 0.0, "passed": True}]}  # fmt: skip


def test_the_final_timing_row_says_what_the_verdict_made_of_the_timing() -> None:
    assert final_timing_status(summary("passed", True)) == "pass"
    assert final_timing_status(summary("unreliable", False)) == "fail"  # the timing made the verdict
    assert final_timing_status(summary("passed", False)) == "warn"  # --timing-verdict warn: passed, said
    assert final_timing_status(summary("passed", True, measured=False)) == "no data"
    first, slo = final_slo_rows(summary("unreliable", False))
    assert (first["label"], first["status"]) == ("Timing fidelity", "fail") and slo["status"] == "pass"


def test_after_stop_the_total_row_carries_no_live_judgement_only_the_runs_verdict() -> None:
    # While the run goes on: the live status's timing marks the Total row when it fails, and only then.
    assert total_label(False, "fail", None) == f"Total — {UNTRUSTED}"
    assert total_label(False, "warn", None) == total_label(False, "wait", None) == "Total"
    # Stopped with the last live judgement failing: not carried past Stop (the bug: "PASSED ... timing
    # trustworthy: 99.8%" above a Total row saying TIMING NOT TRUSTWORTHY).
    ended = total_label(True, "fail", None)
    assert "NOT TRUSTWORTHY" not in ended and "verdict" in ended
    passed = {"verdict": "passed", "trustworthy": True}
    assert "NOT TRUSTWORTHY" not in total_label(True, "fail", passed)
    assert "TIMING NOT TRUSTWORTHY" in total_label(True, "pass", {"verdict": "unreliable", "trustworthy": False})


def test_the_cause_is_looked_for_over_the_window_so_the_status_does_not_flip_with_each_second(tmp_path: Path) -> None:
    """What a user saw: FAIL, WARN, FAIL every 2 s as the newest second showed the CPU wait or not."""
    path = tmp_path / "load.jsonl"
    lines = [{"epoch_s": T0 + t, "users": 10, "cpu": {}, "clock": BUSY if t % 2 else QUIET} for t in range(-40, 31)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    history = LoadHistory()
    window = history.read(path, T0 + 30)
    assert [s.epoch_s for s in window] == [T0 + t for t in range(0, 31)]  # the last 30 s, no older
    enough = streams(96, FIDELITY_MIN_LATE)
    for newest in (QUIET, BUSY):  # whichever second came last, the window's CPU wait is the cause
        row = judge_recent(SPEC, enough, T0, now=T0 + 30, clock=newest, load=window)[0]
        assert row["status"] == "fail" and any("for a CPU" in cause for cause in row["limited_by"]), row
    # Lines appended later are read on the next poll; the window moves on.
    with path.open("a") as fh:
        fh.write(json.dumps({"epoch_s": T0 + 31, "users": 10, "cpu": {}, "clock": QUIET}) + "\n")
    assert [s.epoch_s for s in history.read(path, T0 + 31)][-1] == T0 + 31


def test_the_consoles_progress_line_says_the_live_timing_states_as_the_web_ui_does() -> None:
    from tokenstorm.workloads.plugin.core.progress import Progress, Timing, timing_text

    def said(row: dict[str, Any]) -> str:
        return timing_text(Progress(elapsed_s=30.0, remaining_s=None, stage=None, warmup=False, users=10,
                                    requests_per_s=5.0, output_tokens_per_s=400.0, ttft_p50_ms=300.0,
                                    ttft_p95_ms=500.0, requests=96, errors=0, top_error=None, top_error_count=0,
                                    recent_errors=0, timing=Timing(row["status"], row["note"])))  # fmt: skip

    assert said(timing(streams(96, 1), QUIET)) == "timing: too few late reads to judge yet"  # not "no data yet"
    assert said(timing(streams(96, FIDELITY_MIN_LATE), QUIET)) == "timing: late reads, no cause seen"
    assert said(timing(streams(96, FIDELITY_MIN_LATE), BUSY)).startswith("TIMING NOT TRUSTWORTHY: ")
