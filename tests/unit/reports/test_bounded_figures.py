"""A report's figures from its bounded table (columns no record fills cost nothing, counts in float32, sums and
the gaps' design effect a batch at a time) are numpy's on the raw records, for a run of several segments and
batches whose columns start, stop and change their categories part-way through."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tokenstorm.reports import build_report
from tokenstorm.reports.data.rundir import load_run
from tokenstorm.reports.judging.intervals import (
    run_itl_design_effect,
    run_itl_design_effects,
    scopes_itl_design_effects,
)
from tokenstorm.workloads.rundir import SEGMENTS_DIR, read_requests_frame
from tokenstorm.workloads.rundir.segments import rows_to_batch, write_parquet_segment

N = 30_000  # four segments of 8,000 rows, read in batches of 8,192: columns and categories cross both


def _rows() -> list[dict[str, Any]]:
    rng = np.random.default_rng(7)
    rows = []
    for i in range(N):
        ok = i % 50 != 7
        gaps = np.round(rng.lognormal(np.log(0.02), 0.4, int(rng.integers(0, 40))), 6).tolist() if ok else []
        ttft = float(rng.lognormal(np.log(0.3), 0.5))
        row: dict[str, Any] = {
            "workload": "agent" if i >= 25_000 and i % 2 else ("chat" if i % 3 else "code"),  # a late workload
            "endpoint": "/v1/chat/completions",
            "model": "m",
            "stream": True,
            "start_epoch_s": 1_800_000_000.0 + i * 0.01,
            "request_id": f"{i:032x}",
            "worker_id": f"w{i % 3}",
            "ok": ok,
            "status_code": 200 if ok else 503,
            "prompt_tokens": int(rng.integers(1000, 200_000)),  # long contexts: sums far past 2**24
            "itl_gaps_s": gaps,
            "late_events": 0,
            "ttft_late": False,
        }
        if ok:
            row |= {"output_tokens": len(gaps) + 1, "token_events": len(gaps) + 1, "ttft_s": ttft,
                    "e2e_s": ttft + sum(gaps), "tpot_s": sum(gaps) / len(gaps) if gaps else None}  # fmt: skip
            if i >= 12_000:  # usage's cached tokens only from the second segment on: a column that starts late
                row["cached_tokens"] = int(rng.integers(0, row["prompt_tokens"]))
        else:  # 200 distinct texts: the codes widen past int8 part-way through
            row |= {"error_category": "http_5xx", "error_detail": f"HTTP 503: busy ({i % 200})"}
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    path = tmp_path_factory.mktemp("bounded")
    rows = _rows()
    (path / SEGMENTS_DIR).mkdir()
    for k, i in enumerate(range(0, N, 8_000), start=1):
        segment = path / SEGMENTS_DIR / f"seg-{k:06d}.parquet"
        write_parquet_segment(segment, iter([rows_to_batch(rows[i : i + 8_000])]))
    (path / "run.json").write_text(json.dumps({"target": "http://x", "model": "m", "options": {"confidence": 0.95}}))
    return path, rows


def test_the_table_holds_every_value_and_costs_nothing_for_columns_no_record_fills(run) -> None:  # type: ignore[no-untyped-def]
    path, rows = run
    assert len(list((path / SEGMENTS_DIR).iterdir())) == 4
    tracemalloc.start()
    frame, _ = read_requests_frame(path)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    # ~60 bytes a request here (the all-float64 table of before: ~200, its server timing columns never filled)
    assert held / N < 90, held / N
    cached = frame["cached_tokens"].to_numpy(dtype=float)
    want = [r.get("cached_tokens", np.nan) for r in rows]
    np.testing.assert_array_equal(cached, np.array(want, dtype=float))
    assert frame["server_ttft_s"].isna().all() and not frame["session_end"].any()
    assert list(frame["error_detail"].astype(object).where(frame["error_detail"].notna(), None)) == [
        r.get("error_detail") for r in rows
    ]
    assert list(frame["workload"].astype(str)) == [r["workload"] for r in rows]
    np.testing.assert_array_equal(frame["prompt_tokens"].to_numpy(dtype=float), [r["prompt_tokens"] for r in rows])


def test_the_summary_figures_are_numpys_on_the_raw_records(run) -> None:  # type: ignore[no-untyped-def]
    path, rows = run
    summary = build_report(path).summary.to_json(load_run(path))
    ok = [r for r in rows if r["ok"]]
    ttft_ms = np.array([r["ttft_s"] for r in ok]) * 1000
    e2e_ms = np.array([r["e2e_s"] for r in ok]) * 1000
    gaps_ms = np.array([g for r in ok for g in r["itl_gaps_s"]]) * 1000
    prompt = np.array([r["prompt_tokens"] for r in ok], dtype=float)
    assert summary["completed"] == len(ok) and summary["failed"] == N - len(ok)
    for p in (50, 90, 99):
        assert summary[f"p{p}_ttft_ms"] == pytest.approx(np.percentile(ttft_ms, p), rel=1e-12)
        assert summary[f"p{p}_e2el_ms"] == pytest.approx(np.percentile(e2e_ms, p), rel=1e-12)
        assert summary[f"p{p}_itl_ms"] == pytest.approx(np.percentile(gaps_ms, p), rel=1e-9)
        assert summary[f"p{p}_prompt_tokens"] == np.percentile(prompt, p)
    assert summary["mean_itl_ms"] == pytest.approx(gaps_ms.mean(), rel=1e-12)
    assert summary["total_input_tokens"] == int(prompt.sum())
    assert summary["total_output_tokens"] == sum(r["output_tokens"] for r in ok)
    cached = [(r["cached_tokens"], r["prompt_tokens"]) for r in ok if "cached_tokens" in r]
    assert summary["cache_reporting_requests"] == len(cached)
    assert summary["prefix_cache_hit_rate_records"] == pytest.approx(
        sum(c for c, _ in cached) / sum(p for _, p in cached), rel=1e-12
    )


def _woodruff(below: np.ndarray, counts: np.ndarray) -> float:
    """The design effect as a whole-array numpy computation (the formula of intervals._design_effect)."""
    total = counts.sum()
    used = counts > 0
    g = int(used.sum())
    p = below.sum() / total
    resid = below[used] - p * counts[used]
    return max(1.0, g / (g - 1) * float(np.dot(resid, resid)) / total**2 / (p * (1 - p) / total))


def test_the_gaps_design_effect_met_a_batch_at_a_time_is_the_whole_arrays(run) -> None:  # type: ignore[no-untyped-def]
    path, rows = run
    data = load_run(path)
    ok_rows = np.array([r["ok"] for r in rows])
    hist = data.itl_values(ok_rows)
    starts = np.array([r["start_epoch_s"] for r in rows])[ok_rows]
    e2e = np.array([r["e2e_s"] for r in rows if r["ok"]])
    wants = []
    for q in (50.0, 99.0):
        threshold_us = hist.percentiles([q])[0] * 1e6
        counts = np.array([len(r["itl_gaps_s"]) for r in rows if r["ok"]], dtype=float)
        below = np.array([sum(round(g * 1e6) <= threshold_us for g in r["itl_gaps_s"]) for r in rows if r["ok"]])
        moment = ((starts - starts.min()) // max(1.0, float(np.median(e2e)))).astype(np.int64)
        want = max(
            _woodruff(below.astype(float), counts),
            _woodruff(np.bincount(moment, weights=below), np.bincount(moment, weights=counts)),
        )
        assert run_itl_design_effect(data, ok_rows, hist, q) == pytest.approx(want, rel=1e-9)
        wants.append(want)
    # both percentiles' in one pass over the gaps, as the summary asks them: each its own
    assert run_itl_design_effects(data, ok_rows, hist, [50.0, 99.0]) == pytest.approx(wants, rel=1e-9)
    assert wants[0] != pytest.approx(wants[1], rel=1e-3)  # told apart: a mix-up of the two would show


def test_every_scopes_gap_design_effects_from_one_pass_are_each_scopes_own(run) -> None:  # type: ignore[no-untyped-def]
    path, rows = run
    data = load_run(path)
    ok_rows = np.array([r["ok"] for r in rows])
    workload = np.array([r["workload"] for r in rows])
    scopes = [ok_rows, ok_rows & (workload == "chat"), ok_rows & (workload == "agent"), np.zeros(N, dtype=bool)]
    hists = [data.itl_values(ok) for ok in scopes]
    got = scopes_itl_design_effects(data, list(zip(scopes, hists, strict=True)), [50.0, 99.0])
    want = [run_itl_design_effects(data, ok, hist, [50.0, 99.0]) for ok, hist in zip(scopes, hists, strict=True)]
    assert got == want and got[-1] == [1.0, 1.0]
    assert len({d for deffs in got[:-1] for d in deffs}) >= 4  # different figures: a mix-up would show
