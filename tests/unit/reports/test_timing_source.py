"""The second clock and ``--timing-source``: the server's per-request timing checks the client's late-read
flags (residuals beside them, and whether the two agree), and a run whose client read late can be judged on
the server's figures instead — every output saying so, never as what users saw."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, evaluate_fidelity
from tokenstorm.reports.judging.second_clock import second_clock

SLO = "slos:\n  chat:\n    ttft_ms: {p95: 200}\n    tpot_ms: {p50: 9}\n    itl_ms: {p50: 9}\n    e2e_ms: {p95: 480}\n"
QUEUE_S, PREFILL_S, DECODE_S, SERVER_ITL_S = 0.020, 0.030, 0.400, 0.008


def _record(i: int, late: bool, timed: bool = True, workload: str = "chat") -> dict:
    """A chat record of 51 tokens: the server queued it 20 ms, prefilled 30 ms and decoded 400 ms (8 ms a gap);
    read on time the client saw TTFT 60 ms (10 ms overhead), read late 400 ms (350 ms overhead)."""
    ttft_ms = 400.0 if late else 60.0
    server = {}
    if timed:
        server = {
            "server_queue_s": QUEUE_S,
            "server_ttft_s": PREFILL_S,
            "server_decode_s": DECODE_S,
            "server_itl_s": SERVER_ITL_S,
            "overhead_s": ttft_ms / 1000 - QUEUE_S - PREFILL_S,
        }
    return request(
        i,
        ttft_ms,
        workload,
        token_events=51,
        late_events=40 if late else 0,
        ttft_late=late,
        read_lag_max_s=0.0002,
        **server,
    )


def _run(tmp_path: Path, source: str | None, late: int = 30, n: int = 100, timed: int | None = None) -> Path:
    """``n`` chat records, the first ``late`` read late, the first ``timed`` (all) with the server's timing."""
    timed = n if timed is None else timed
    records = [_record(i, i < late, i < timed) for i in range(n)]
    options = {"timing_source": source} if source else {}
    meta = {"status": "finished", "options": options, "slo_spec_text": SLO}
    return make_run_dir(tmp_path / f"run-{source}-{late}-{timed}", records, meta)


def _slo(result: object, metric: str) -> float:
    found = [r for r in result.summary.slo_results if r.metric == metric]  # type: ignore[attr-defined]
    assert len(found) == 1 and found[0].measured is not None
    return float(found[0].measured)


def _fidelity_case(result: object) -> ET.Element:
    case = ET.parse(result.junit).getroot().find(".//testcase[@name='timing_fidelity']")  # type: ignore[attr-defined]
    assert case is not None
    return case


# -- the second clock ------------------------------------------------------------------------------
def test_the_residuals_agree_with_the_late_read_flags_and_the_verdict_says_so() -> None:
    df = pd.DataFrame([_record(i, i < 30) for i in range(100)])
    df["stream"] = True
    fid = evaluate_fidelity(df, [])
    clock = fid.second_clock
    assert clock is not None and not fid.trustworthy
    assert clock["records"] == 100 and clock["late_records"] == 30 and clock["compared"] == "ttft"
    assert abs(clock["late_overhead_p50_ms"] - 350) < 1e-6 and abs(clock["on_time_overhead_p50_ms"] - 10) < 1e-6
    assert clock["agrees"] is True
    assert abs(clock["overhead_ms"]["p50"] - 10) < 1e-6 and abs(clock["overhead_ms"]["p99"] - 350) < 1e-6
    assert abs(clock["itl_residual_ms"]["p50"] - 2.0) < 1e-6  # client TPOT 10 ms vs the server's 8 ms
    assert clock["workloads"]["chat"]["records"] == 100
    assert "server's clock (100 records): overhead p50/p99 10.0/350 ms" in fid.reason
    assert "TTFTs read late had overhead p50 350 ms vs 10.0 ms on time — agrees with the late-read flags" in fid.reason


def test_flags_the_server_clock_does_not_see_are_said_not_to_agree() -> None:
    # Flagged late, yet by the server's clock earlier than most others: the events left the server together.
    records = [_record(i, False) for i in range(100)]
    for r in records[:30]:
        r.update(ttft_late=True, late_events=40, ttft_s=0.052, overhead_s=0.002)
    df = pd.DataFrame(records).assign(stream=True)
    fid = evaluate_fidelity(df, [])
    assert fid.second_clock is not None and fid.second_clock["agrees"] is False
    assert "does NOT agree with the late-read flags" in fid.reason


def test_with_few_late_ttfts_streams_read_at_once_are_compared_by_their_itl_residual() -> None:
    records = [_record(i, False) for i in range(100)]
    for r in records[:10]:  # 40 of 50 gaps late: read at once, the client's TPOT 2 ms against the server's 8
        r.update(late_events=40, tpot_s=0.002)
    fid = evaluate_fidelity(pd.DataFrame(records).assign(stream=True), [])
    assert fid.second_clock is not None and fid.second_clock["compared"] == "itl"
    assert fid.second_clock["agrees"] is True and "streams read at once vs the others" in fid.reason
    for r in records[:10]:  # read at once, yet their ITL as far off the server's as the others': cannot tell
        r.update(tpot_s=0.010)
    fid = evaluate_fidelity(pd.DataFrame(records).assign(stream=True), [])
    assert fid.second_clock is not None and fid.second_clock["agrees"] is None
    assert "the server's clock cannot tell them apart" in fid.reason
    for r in records[:10]:  # read at once, yet their ITL the server's exactly (the others' 2 ms off): no
        r.update(tpot_s=SERVER_ITL_S)
    fid = evaluate_fidelity(pd.DataFrame(records).assign(stream=True), [])
    assert fid.second_clock is not None and fid.second_clock["agrees"] is False


def test_without_server_timing_nothing_new_is_said() -> None:
    df = pd.DataFrame([_record(i, i < 30, timed=False) for i in range(100)]).assign(stream=True)
    fid = evaluate_fidelity(df, [])
    assert fid.second_clock is None and "server's clock" not in fid.reason
    assert second_clock(df, np.ones(len(df), dtype=bool)) is None


# -- --timing-source -------------------------------------------------------------------------------
def test_the_default_stays_unreliable_on_late_reads_and_shows_the_residuals(tmp_path: Path) -> None:
    result = build_report(_run(tmp_path, None))
    assert (result.summary.verdict, result.exit_code) == ("unreliable", 5)
    summary = json.loads(result.summary_json.read_text())
    assert summary["timing_source_used"] == "client" and summary["timing_source"] == "client"
    assert summary["timing_fidelity"]["second_clock"]["agrees"] is True
    assert _slo(result, "ttft_ms") == 400.0  # the client's p95
    page = result.report.read_text()
    assert 'id="second-clock"' in page and "agrees with the late-read flags" in page


def test_auto_judges_a_late_read_run_on_the_servers_figures_and_every_output_says_so(tmp_path: Path) -> None:
    result = build_report(_run(tmp_path, "auto"))
    assert (result.summary.verdict, result.exit_code) == ("passed", 0)
    # TTFT = queue 20 + prefill 30 + the on-time records' median overhead 10; E2E adds decode 400;
    # TPOT and ITL are the server's 8 ms mean ITL (the client's read 10).
    assert abs(_slo(result, "ttft_ms") - 60.0) < 1e-6
    assert abs(_slo(result, "e2e_ms") - 460.0) < 1e-6
    assert abs(_slo(result, "tpot_ms") - 8.0) < 1e-6 and abs(_slo(result, "itl_ms") - 8.0) < 1e-3
    reason = result.summary.reason
    assert "latency judged on the server's timing, not what users saw" in reason
    assert "the client's timing was not trustworthy" in reason and "chat 10.0 ms" in reason
    summary = json.loads(result.summary_json.read_text())
    assert summary["timing_source_used"] == "server" and summary["server_timed_records"] == 100
    assert summary["timing_source_why"].startswith("--timing-source auto: the client's timing was not trustworthy")
    assert abs(summary["server_overhead_added_ms"]["chat"] - 10.0) < 1e-9
    case = _fidelity_case(result)
    skipped = case.find("skipped")
    assert case.find("failure") is None and skipped is not None
    assert skipped.get("message", "").startswith("latency judged on the server's timing")
    ttft_case = ET.parse(result.junit).getroot().find(".//testcase[@name='chat ttft_ms p95 <= 200']")
    assert ttft_case is not None and "judged on the server's timing" in (ttft_case.findtext("system-out") or "")
    page = result.report.read_text()
    assert 'id="timing-source"' in page and "Latency judged on the server's timing" in page


def test_auto_keeps_the_clients_records_when_they_are_trustworthy(tmp_path: Path) -> None:
    result = build_report(_run(tmp_path, "auto", late=0))  # the client's TPOT 10 ms breaks p50 <= 9
    assert result.exit_code == 1 and _slo(result, "ttft_ms") == 60.0 and _slo(result, "tpot_ms") == 10.0
    summary = json.loads(result.summary_json.read_text())
    assert summary["timing_source_used"] == "client"
    assert "server's timing" not in result.summary.reason


def test_server_judges_a_breaking_slo_and_fails_on_the_servers_figures(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "server", late=0)
    meta = json.loads((run_dir / "run.json").read_text())
    meta["slo_spec_text"] = (
        "slos:\n  chat:\n    tpot_ms: {p50: 9}\n    ttft_ms: {p50: 55}\n"  # client: TTFT 60, TPOT 10
    )
    (run_dir / "run.json").write_text(json.dumps(meta))
    result = build_report(run_dir)
    assert (result.summary.verdict, result.exit_code) == ("failed", 1)
    assert _slo(result, "tpot_ms") == 8.0  # held on the server's ITL
    assert abs(_slo(result, "ttft_ms") - 60.0) < 1e-6  # 20 + 30 + 10: broke
    assert "1 of 2 SLOs failed" in result.summary.reason and "server's timing" in result.summary.reason


def test_records_without_server_timing_are_counted_and_left_out(tmp_path: Path) -> None:
    result = build_report(_run(tmp_path, "auto", timed=80))
    assert result.exit_code == 0
    summary = json.loads(result.summary_json.read_text())
    assert (summary["server_timed_records"], summary["server_untimed_records"]) == (80, 20)
    assert "20 of 100 successful records without the server's timing not judged" in result.summary.reason


def test_no_server_timing_at_all_leaves_auto_unreliable_and_server_names_the_flag(tmp_path: Path) -> None:
    result = build_report(_run(tmp_path, "auto", timed=0))
    assert (result.summary.verdict, result.exit_code) == ("unreliable", 5)
    assert "--timing-source auto found no server timing" in result.summary.reason
    assert "--enable-per-request-metrics" in result.summary.reason
    result = build_report(_run(tmp_path, "server", late=0, timed=0))
    assert (result.summary.verdict, result.exit_code) == ("unreliable", 5)
    assert result.summary.reason.startswith("--timing-source server: none of the 100 successful judged records")
    assert "--enable-per-request-metrics" in result.summary.reason


def test_an_interrupted_run_judged_on_the_servers_timing_says_so(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "auto")
    meta = json.loads((run_dir / "run.json").read_text())
    meta["status"] = "interrupted"
    (run_dir / "run.json").write_text(json.dumps(meta))
    result = build_report(run_dir)
    assert result.summary.verdict == "incomplete"
    assert json.loads(result.summary_json.read_text())["timing_source_used"] == "server"
    assert abs(_slo(result, "ttft_ms") - 60.0) < 1e-6  # the SLOs were judged on the server's figures: it says so
    assert "latency judged on the server's timing, not what users saw" in result.summary.reason


def test_each_ab_target_gets_its_own_overhead_added_back_not_the_pooled_one(tmp_path: Path) -> None:
    """Target a's front end and network take 10 ms, b's 100 ms: each target's TTFT on the server's timing adds
    its own on-time records' overhead, so a (60 ms for its users) holds TTFT p50 <= 100 and b (150 ms) breaks it."""
    records = []
    for i in range(100):
        for label, overhead_s in (("a", 0.010), ("b", 0.100)):
            rec = _record(i, i < 30)
            rec.update(target=label, ttft_s=QUEUE_S + PREFILL_S + overhead_s + (0.3 if i < 30 else 0.0))
            rec["overhead_s"] = rec["ttft_s"] - QUEUE_S - PREFILL_S
            records.append(rec)
    targets = [{"label": "a", "url": "http://a:8000"}, {"label": "b", "url": "http://b:8000"}]
    meta = {"status": "finished", "options": {"timing_source": "auto"}, "targets": targets,
            "slo_spec_text": "slos:\n  chat:\n    ttft_ms: {p50: 100}\n"}  # fmt: skip
    result = build_report(make_run_dir(tmp_path / "ab", records, meta))
    measured = {r.target: r.measured for r in result.summary.slo_results if r.metric == "ttft_ms"}
    assert measured["a"] is not None and abs(measured["a"] - 60.0) < 1e-6
    assert measured["b"] is not None and abs(measured["b"] - 150.0) < 1e-6
    added = json.loads(result.summary_json.read_text())["server_overhead_added_ms"]
    assert added.keys() == {"a/chat", "b/chat"} and abs(added["a/chat"] - 10.0) < 1e-6
    assert (result.summary.verdict, result.exit_code) == ("failed", 1)


def test_the_servers_itl_counts_each_records_gaps_however_it_is_chunked(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each record's server ITL counts once per gap (its output tokens − 1), in chunks of bounded memory: the
    histogram holds every gap of every record, exactly, whatever the chunk size (a 20-million-record run)."""
    from tokenstorm.reports.data.rundir import load_run
    from tokenstorm.reports.judging import timing_source

    records = [_record(i, False) | {"server_itl_s": 0.001 * (1 + i % 7), "output_tokens": 2 + i % 5} for i in range(60)]
    run = load_run(make_run_dir(tmp_path / "run", records, {"status": "finished", "options": {}}))
    mask = np.ones(len(run.requests), dtype=bool)
    whole = timing_source.server_timed(run, mask).itl_values(mask)
    monkeypatch.setattr(timing_source, "_GAPS_PER_CHUNK", 7)  # many chunks, records split across none
    chunked = timing_source.server_timed(run, mask).itl_values(mask)
    gaps = [r["output_tokens"] - 1 for r in records]
    weighted_us = sum(g * round(r["server_itl_s"] * 1e6) for g, r in zip(gaps, records, strict=True)) / sum(gaps)
    for hist in (whole, chunked):
        assert hist.size == sum(gaps)
        assert abs(hist.sum_us / hist.size - weighted_us) < 1e-9


def test_a_whole_answer_gets_no_ttft_on_the_servers_timing_as_it_has_none_on_the_clients(tmp_path: Path) -> None:
    """A non-streamed answer's body carries the server's parts too; its client record has no TTFT, so judged on
    the server's timing it must not get one either (the TTFT SLO would judge other requests than the client's)."""
    from tokenstorm.reports.data.rundir import load_run
    from tokenstorm.reports.judging import timing_source

    records = [_record(i, False) for i in range(10)]
    records[0] = records[0] | {"ttft_s": None, "tpot_s": None, "itl_gaps_s": []}  # a whole answer
    run = load_run(make_run_dir(tmp_path / "run", records, {"status": "finished", "options": {}}))
    mask = np.ones(len(run.requests), dtype=bool)
    frame = timing_source.server_timed(run, mask).requests
    ttft = frame["server_timed_ttft_s"].to_numpy(dtype=float)
    assert np.isnan(ttft[0]) and not np.isnan(ttft[1:]).any()
    assert not np.isnan(frame["server_timed_e2e_s"].to_numpy(dtype=float)).any()  # its E2E the server's too
