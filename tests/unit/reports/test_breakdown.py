"""Where the time went, from runs written by hand with known parts: every figure (summary.json's keys per run,
workload and A/B target, the report's table, the console's line, the SLO keys, ``reports compare``) is checked
against numpy on the raw records — each part drawn from its own range, so a part read into another's place, or a
record outside the TTFT figures' selection counted, fails. Runs the server timed nothing of carry none of it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import build_report, compare_runs, console_block, load_slo_spec
from tokenstorm.reports.compare.text import comparison_text
from tokenstorm.reports.data.rundir import load_run
from tokenstorm.reports.judging.breakdown import split_means
from tokenstorm.reports.judging.slo import judged_mask
from tokenstorm.reports.judging.slo_spec import NO_SERVER_TIMING, SloSpecError

#: (record field, summary key stem, the range its values are drawn from, ms) — the ranges do not overlap
PARTS = (
    ("overhead_s", "overhead", (1.0, 4.0)),
    ("server_queue_s", "server_queue", (40.0, 160.0)),
    ("server_ttft_s", "server_ttft", (8.0, 20.0)),
    ("server_decode_s", "server_decode", (200.0, 400.0)),
    ("server_itl_s", "server_itl", (4.5, 7.5)),
)


#: the keys of where the time went in summary.json
MINE = re.compile(
    r"_(overhead|server_queue|server_ttft|server_decode|server_itl|server_frontend)_ms$|"
    r"^server_timed_requests$|^server_timing_share$|^mean_ttft_server_timed_ms$"
)


def _timed(i: int, rng: np.random.Generator, workload: str = "chat", scale: float = 1.0, **kw: Any) -> dict:
    """A successful request whose TTFT and E2E are exactly the sum of its parts (plus a tail of 0–2 ms)."""
    parts = {field: float(rng.uniform(*bounds)) * scale / 1000 for field, _, bounds in PARTS}
    ttft = parts["overhead_s"] + parts["server_queue_s"] + parts["server_ttft_s"]
    e2e = ttft + parts["server_decode_s"] + float(rng.uniform(0.0, 2.0)) / 1000
    return {**request(i, ttft * 1000, workload=workload), **parts, "ttft_s": ttft, "e2e_s": e2e, **kw}


def _mixed_run(path: Path, targets: bool = False) -> Path:
    """Two workloads the server timed most of, with what the figures must leave out: failed requests, warm-up
    requests and cancelled ones (timed, with huge parts), and successful requests the server did not time."""
    rng = np.random.default_rng(29)
    records = [_timed(i, rng) for i in range(120)]
    records += [_timed(200 + i, rng, workload="code", scale=2.0) for i in range(60)]
    records += [request(300 + i, 90.0) for i in range(20)]  # successful, never timed: counted in the share only
    big = {field: 9.0 for field, _, _ in PARTS}
    records += [{**request(400 + i, 50.0, ok=False), **big} for i in range(5)]  # failed: not in TTFT's figures
    records += [{**request(500 + i, 50.0), **big, "warmup": True} for i in range(5)]
    records += [{**request(600 + i, 50.0, ok=False, error_category="cancelled"), **big} for i in range(5)]
    meta: dict[str, Any] = {"status": "finished"}
    if targets:
        for k, r in enumerate(records):
            r["target"] = "a" if k % 2 else "b"
        meta["targets"] = [{"label": "a", "url": "http://a:1"}, {"label": "b", "url": "http://b:1"}]
    return make_run_dir(path, records, meta)


def _expected(run_dir: Path, rows: np.ndarray | None = None) -> dict[str, float]:
    """numpy on the raw records: the judged successful timed requests' parts (``rows``: within those)."""
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    picked = [r for r in records if r["ok"] and not r["warmup"] and r["error_category"] != "cancelled"]
    if rows is not None:
        picked = [r for r, keep in zip(picked, rows, strict=True) if keep]
    timed = [r for r in picked if r["server_queue_s"] is not None]
    out = {"server_timed_requests": len(timed), "server_timing_share": len(timed) / len(picked)}
    for field, stem, _ in PARTS:
        values = np.array([r[field] for r in timed]) * 1000
        out[f"mean_{stem}_ms"] = float(values.mean())
        for p in (50, 95, 99):
            out[f"p{p}_{stem}_ms"] = float(np.percentile(values, p))
    out["mean_ttft_server_timed_ms"] = float(np.mean([r["ttft_s"] for r in timed]) * 1000)
    return out


def _judged_ok(run_dir: Path) -> list[dict]:
    records = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    return [r for r in records if r["ok"] and not r["warmup"] and r["error_category"] != "cancelled"]


def test_each_parts_figures_are_numpys_on_the_raw_records_overall_and_per_workload(tmp_path: Path) -> None:
    run_dir = _mixed_run(tmp_path / "run")
    build_report(run_dir, load_slo_spec())
    summary = json.loads((run_dir / "summary.json").read_text())
    want = _expected(run_dir)
    assert summary["server_timed_requests"] == 180 and summary["server_timing_share"] == pytest.approx(180 / 200)
    for key, value in want.items():
        assert summary[key] == pytest.approx(value, rel=1e-9), key
    # The three parts' means add up to the client's mean TTFT over the same requests (percentiles do not add).
    total = sum(summary[f"mean_{s}_ms"] for s in ("overhead", "server_queue", "server_ttft"))
    assert total == pytest.approx(summary["mean_ttft_server_timed_ms"], rel=1e-9)
    ok = _judged_ok(run_dir)
    for workload in ("chat", "code"):
        block = summary["workloads"][workload]
        expected = _expected(run_dir, np.array([r["workload"] == workload for r in ok]))
        for key, value in expected.items():
            assert block[key] == pytest.approx(value, rel=1e-9), (workload, key)
    queue = {w: summary["workloads"][w]["mean_server_queue_ms"] for w in ("chat", "code")}
    assert queue["code"] > 1.5 * queue["chat"]  # each workload its own


def test_each_ab_target_has_its_own_figures_and_its_own_console_line(tmp_path: Path) -> None:
    run_dir = _mixed_run(tmp_path / "run", targets=True)
    result = build_report(run_dir, load_slo_spec())
    targets = json.loads((run_dir / "summary.json").read_text())["targets"]["targets"]
    ok = _judged_ok(run_dir)
    for label in ("a", "b"):
        expected = _expected(run_dir, np.array([r["target"] == label for r in ok]))
        for key, value in expected.items():
            assert targets[label][key] == pytest.approx(value, rel=1e-9), (label, key)
    lines = [line for line in console_block(result.summary) if line.startswith("where TTFT went")]
    assert [line.split(" (")[0] for line in lines] == ["where TTFT went on a", "where TTFT went on b"], lines


def test_the_means_add_up_to_the_clients_ttft_and_e2e(tmp_path: Path) -> None:
    run_dir = _mixed_run(tmp_path / "run")
    run = load_run(run_dir)
    spec = load_slo_spec()
    ok = judged_mask(run, spec) & run.requests["ok"].fillna(False).astype(bool).to_numpy()
    split = split_means(run, ok)
    assert split is not None and split.requests == split.e2e_requests == 180
    timed = [r for r in _judged_ok(run_dir) if r["server_queue_s"] is not None]
    ttft = np.mean([r["ttft_s"] for r in timed]) * 1000
    e2e = np.mean([r["e2e_s"] for r in timed]) * 1000
    queue = np.mean([r["server_queue_s"] for r in timed]) * 1000
    decode = np.mean([r["server_decode_s"] for r in timed]) * 1000
    assert split.ttft_ms == pytest.approx(ttft) and split.e2e_ms == pytest.approx(e2e)
    assert split.queue_ms == pytest.approx(queue) and split.e2e_parts_ms is not None
    assert split.e2e_parts_ms[3] == pytest.approx(decode)
    assert sum(split.ttft_parts_ms) == pytest.approx(ttft) and sum(split.e2e_parts_ms) == pytest.approx(e2e)
    assert 0.0 <= split.e2e_parts_ms[4] <= 2.0  # the tail: E2E − TTFT − decode, 0–2 ms here


def test_a_record_without_its_overhead_gets_the_rest_of_its_ttft(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    records = [{**_timed(i, rng), "overhead_s": None} for i in range(30)]
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished"})
    build_report(run_dir, load_slo_spec())
    summary = json.loads((run_dir / "summary.json").read_text())
    rest = [(r["ttft_s"] - r["server_queue_s"] - r["server_ttft_s"]) * 1000 for r in records]
    assert summary["mean_overhead_ms"] == pytest.approx(np.mean(rest)) and summary["mean_overhead_ms"] > 0.5


def test_a_run_the_server_timed_nothing_of_has_no_server_figures_line_or_section(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path / "run", [request(i, 100.0) for i in range(20)], {"status": "finished"})
    result = build_report(run_dir, load_slo_spec())
    summary = json.loads((run_dir / "summary.json").read_text())
    for block in (summary, summary["workloads"]["chat"]):
        assert not [k for k in block if MINE.search(k)], block.keys()
    assert not any("TTFT went" in line for line in console_block(result.summary))
    assert 'id="time-split"' not in (run_dir / "report.html").read_text()


def test_the_console_line_fits_and_says_the_means_that_add_up(tmp_path: Path) -> None:
    run_dir = _mixed_run(tmp_path / "run")
    result = build_report(run_dir, load_slo_spec())
    want = _expected(run_dir)
    lines = [line for line in console_block(result.summary) if line.startswith("where TTFT went")]
    assert len(lines) == 1 and len(lines[0]) <= 100, lines
    shown = [float(x) for x in re.findall(r"(\d+\.\d)(?: |;)", lines[0])]
    expected = [want[f"mean_{s}_ms"] for s in ("overhead", "server_queue", "server_ttft")]
    assert shown == [round(x, 1) for x in [*expected, want["mean_ttft_server_timed_ms"]]], lines[0]
    assert lines[0].endswith("; 90.0% server-timed")


def test_the_reports_table_holds_the_means_and_each_parts_percentiles(tmp_path: Path) -> None:
    run_dir = _mixed_run(tmp_path / "run")
    build_report(run_dir, load_slo_spec())
    html = (run_dir / "report.html").read_text()
    section = html[html.index('<section id="time-split">') :]
    section = section[: section.index("</section>")]
    want = _expected(run_dir)

    def figure(scope: str, key: str) -> float:
        """``key``'s figure in the section's row of ``scope`` that has it (the means' table, the percentiles')."""
        for row in re.finditer(rf'<tr class="\w+" data-scope="{scope}">.*?</tr>', section, re.S):
            found = re.search(rf'data-figure="{key}" data-value="([^"]+)"', row.group(0))
            if found is not None:
                return float(found.group(1))
        raise AssertionError((scope, key))

    assert figure("all", "queue_ms") == pytest.approx(want["mean_server_queue_ms"])
    assert figure("all", "prefill_ms") == pytest.approx(want["mean_server_ttft_ms"])
    assert figure("all", "overhead_ms") == pytest.approx(want["mean_overhead_ms"])
    assert figure("all", "ttft_ms") == pytest.approx(want["mean_ttft_server_timed_ms"])
    assert figure("all", "decode_ms") == pytest.approx(want["mean_server_decode_ms"])
    assert 'data-scope="workload:code"' in section and 'id="time-split-figure"' in section
    assert figure("all", "p99_server_queue_ms") == pytest.approx(want["p99_server_queue_ms"])
    assert figure("workload:code", "p50_server_ttft_ms") > figure("workload:chat", "p50_server_ttft_ms")


def test_slo_keys_judge_the_servers_parts_and_say_when_there_is_no_server_timing(tmp_path: Path) -> None:
    run_dir = _mixed_run(tmp_path / "run")
    want = _expected(run_dir)
    text = "slos:\n  run:\n    queue_ms: {p95: 500}\n    server_ttft_ms: {p99: 5}\n    overhead_ms: {mean: 10}\n"
    text += "    server_itl_ms: {p50: 100}\n"
    result = build_report(run_dir, load_slo_spec(text=text))
    got = {r.metric: (r.measured, r.passed) for r in result.summary.slo_results}
    assert got["queue_ms"] == (pytest.approx(want["p95_server_queue_ms"]), True)
    assert got["server_ttft_ms"] == (pytest.approx(want["p99_server_ttft_ms"]), False)
    assert got["overhead_ms"] == (pytest.approx(want["mean_overhead_ms"]), True)
    assert got["server_itl_ms"] == (pytest.approx(want["p50_server_itl_ms"]), True)
    assert result.exit_code == 1 and "run server_ttft_ms p99" in result.summary.reason
    # A server that timed nothing: the SLO is not met, and the verdict line says why.
    plain = make_run_dir(tmp_path / "plain", [request(i, 100.0) for i in range(20)], {"status": "finished"})
    result = build_report(plain, load_slo_spec(text="slos:\n  chat:\n    queue_ms: {p95: 500}\n"))
    (slo,) = result.summary.slo_results
    assert (slo.measured, slo.passed, slo.note) == (None, False, NO_SERVER_TIMING) and result.exit_code == 1
    assert "queue_ms p95 no data" in result.summary.reason
    with pytest.raises(SloSpecError, match="did you mean queue_ms"):
        load_slo_spec(text="slos:\n  chat:\n    queue_mss: {p95: 5}\n")


def test_compare_shows_each_parts_figures_with_the_server_timed_requests(tmp_path: Path) -> None:
    a = _mixed_run(tmp_path / "a")
    plain = make_run_dir(tmp_path / "b", [request(i, 100.0) for i in range(20)], {"status": "finished"})
    comparison = compare_runs([a, plain])
    rows = {(r["scope"], r["key"]): r for r in comparison.rows if r["section"] == "server"}
    want = _expected(a)
    queue = rows[("all", "p95_server_queue_ms")]
    assert queue["values"] == [pytest.approx(want["p95_server_queue_ms"]), None]  # absent: not given, never 0
    assert queue["n"][0] == 180 and not any(queue["regressed"])
    assert ("all", "mean_overhead_ms") in rows and ("code", "median_server_ttft_ms") in rows
    text = comparison_text(comparison, details=True)
    assert "WHERE THE TIME WENT" in text and "n server-timed requests" in text


def test_the_servers_front_end_is_shown_only_where_a_span_gave_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    records = [{**_timed(i, rng), "server_frontend_s": 0.0005 + i / 1e5} for i in range(30)]
    run_dir = make_run_dir(tmp_path / "run", records, {"status": "finished"})
    build_report(run_dir, load_slo_spec())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["mean_server_frontend_ms"] == pytest.approx(np.mean([r["server_frontend_s"] for r in records]) * 1e3)
    assert 'data-figure="p99_server_frontend_ms"' in (run_dir / "report.html").read_text()
    plain = _mixed_run(tmp_path / "plain")  # the stream's metrics alone: no front end anywhere
    build_report(plain, load_slo_spec())
    assert "mean_server_frontend_ms" not in json.loads((plain / "summary.json").read_text())
    assert "server front end" not in (plain / "report.html").read_text()


def test_the_servers_itl_per_gap_is_the_token_weighted_mean_vllm_gives(tmp_path: Path) -> None:
    """summary.json's ``mean_server_itl_per_gap_ms`` counts each request's mean gap once per gap, as vLLM's
    inter-token histogram and the Prometheus series do — not once per request."""
    server = {"server_queue_s": 0.01, "server_ttft_s": 0.02, "server_decode_s": 0.1, "overhead_s": 0.03}
    records = [
        request(i, 60.0, output_tokens=2 + 40 * (i % 2), server_itl_s=0.002 if i % 2 else 0.050, **server)
        for i in range(20)
    ]
    result = build_report(make_run_dir(tmp_path / "run", records, {"status": "finished"}))
    summary = json.loads(result.summary_json.read_text())
    gaps = np.array([r["output_tokens"] - 1 for r in records], dtype=float)
    itl = np.array([r["server_itl_s"] for r in records])
    assert summary["mean_server_itl_per_gap_ms"] == pytest.approx(np.average(itl, weights=gaps) * 1000)
    assert summary["mean_server_itl_ms"] == pytest.approx(itl.mean() * 1000)  # per request, as its percentiles
