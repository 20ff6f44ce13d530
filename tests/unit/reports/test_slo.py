"""SLO evaluation on constructed data with known percentiles, and invalid SLO files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import make_run_dir, request
from tokenstorm.reports import SloSpecError, evaluate, load_run, load_slo_spec, summarize


def spec(text: str):  # type: ignore[no-untyped-def]
    return load_slo_spec(text=text)


def test_percentiles_errors_and_throughput_on_known_data(tmp_path: Path) -> None:
    # TTFT 1..100 ms: numpy's linear p95 is 95.05 ms; 5 failures out of 105 requests.
    records = [request(i, ttft_ms=i + 1) for i in range(100)]
    records += [request(100 + i, 0, ok=False) for i in range(5)]
    run = load_run(make_run_dir(tmp_path / "run", records))
    results = evaluate(
        run,
        spec("""
slos:
  chat:
    ttft_ms: {p95: 95.1, p50: 50, max: 100}
    itl_ms: {p99: 10}
    error_rate: {max: 5%}
  run:
    requests_per_s: {min: 9}
"""),
    )
    by = {(r.metric, r.stat): r for r in results}
    assert by[("ttft_ms", "p95")].measured == pytest.approx(95.05)
    assert by[("ttft_ms", "p95")].passed
    assert by[("ttft_ms", "p50")].measured == pytest.approx(50.5) and not by[("ttft_ms", "p50")].passed
    assert by[("ttft_ms", "max")].measured == pytest.approx(100) and by[("ttft_ms", "max")].passed
    assert by[("itl_ms", "p99")].measured == pytest.approx(10)
    assert by[("error_rate", "max")].measured == pytest.approx(5 / 105) and by[("error_rate", "max")].passed
    # Window: first start (1000.0) to the last end (request 99: 1009.9 + 0.1 s TTFT + 0.5 s).
    window = 1010.5 - 1000.0
    assert by[("requests_per_s", "min")].measured == pytest.approx(100 / window)


def test_warmup_and_cancelled_requests_are_not_judged(tmp_path: Path) -> None:
    records = [request(i, ttft_ms=5000) for i in range(50)]  # slow warm-up: first 5 s
    records += [request(50 + i, ttft_ms=100) for i in range(50)]
    records.append(request(200, 0, ok=False, error_category="cancelled"))
    run = load_run(make_run_dir(tmp_path / "run", records))
    s = spec("warmup_s: 5\nslos:\n  chat:\n    ttft_ms: {max: 100}\n    error_rate: {max: 0}\n")
    assert all(r.passed for r in evaluate(run, s))
    summary = summarize(run, s)
    assert summary.verdict == "passed" and summary.overall["requests"] == 50
    too_long = summarize(run, spec("warmup_s: 600\nslos:\n  chat:\n    ttft_ms: {max: 100}\n"))
    assert too_long.verdict == "run_failed" and "all fell in the warm-up (600 s)" in too_long.reason


def test_star_applies_to_every_workload_and_a_missing_workload_fails(tmp_path: Path) -> None:
    records = [request(i, ttft_ms=10, workload=w) for i, w in enumerate(["chat", "code"] * 10)]
    run = load_run(make_run_dir(tmp_path / "run", records))
    results = evaluate(run, spec("slos:\n  '*':\n    ttft_ms: {p99: 20}\n  contract:\n    e2e_ms: {p95: 1}\n"))
    assert {(r.scope, r.passed) for r in results} == {("chat", True), ("code", True), ("contract", False)}
    assert "no judged requests" in next(r for r in results if r.scope == "contract").note


def test_gpu_memory_needs_gpu_samples_and_throughput_is_per_gpu(tmp_path: Path) -> None:
    records = [request(i, ttft_ms=10) for i in range(20)]
    run = load_run(make_run_dir(tmp_path / "run", records))
    text = "gpus: 2\nslos:\n  run:\n    gpu_memory_gb: {max: 58}\n    output_tokens_per_s_per_gpu: {min: 1}\n"
    mem, tput = evaluate(run, spec(text))
    assert not mem.judged and mem.passed and "not judged: no GPU sampled" in mem.note  # no GPU monitor: no verdict
    single = evaluate(run, spec(text.replace("gpus: 2", "gpus: 1")))[1]
    assert tput.measured == pytest.approx(single.measured / 2)


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("slos:\n  chat:\n    ttft_ms: {p955: 800}\n", 3, "ttft_ms: unknown statistic (use p50"),
        ("slos:\n  chat:\n    ttft: {p95: 800}\n", 3, "unknown metric — did you mean ttft_ms?"),
        ("slos:\n  chat:\n    ttft_ms: {p95: fast}\n", 3, "must be a number"),
        ("slos:\n  chat:\n    e2e_ms: {p95: -1}\n", 3, "must be >= 0"),
        ("slos:\n  chat:\n    error_rate: {max: 5}\n", 3, "fraction"),
        ("slos:\n  chat:\n    ttft_ms: {p95: 800\n", 4, "not valid YAML"),
        ("slo:\n  chat: {}\n", 1, "unknown key — did you mean slos?"),
        ("warmup_s: 10\n", 1, "no SLOs defined"),
        ("slos:\n  chat:\n    gpu_memory_gb: {max: 58}\n", 3, "whole-run target"),
        ("slos:\n  chat:\n    output_tokens_per_s: {max: 5}\n", 3, "use min"),
    ],
)
def test_invalid_slo_files_name_the_line_and_the_reason(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text(text)
    with pytest.raises(SloSpecError) as err:
        load_slo_spec(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert reason in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("hunter2: sk-hunter2\n", 1),  # a key file given by mistake: unknown key
        ("slos:\n  run:\n    ttft_ms: {p95: hunter2}\n", 3),  # not a number
        ("slos:\n  run:\n    hunter2_ms: {p95: 1}\n", 3),  # unknown metric
        ("slos:\n  run:\n    ttft_ms: {hunter2: 1}\n", 3),  # unknown statistic
        ("slos:\n  run:\n    quality_hunter2: {max: 1}\n", 3),  # a check's name is the file's text too
        ("slos:\n  run:\n    quality_hunter-2: {min: 1}\n", 3),  # not a check name
        ("slos:\n  hunter2: 5\n", 2),  # a workload's entry that is no mapping
        ("version: hunter2\nslos: {run: {error_rate: {max: 0.1}}}\n", 1),
        ("a: !hunter2!x 1\n", 1),  # PyYAML's problem quotes the tag handle
        ('password: "hunter2\n', 2),  # unterminated quote: the line after the last (the file's end)
        ("root:$6$hunter2:19000:0:99999:7:::\nbin:hunter2:1\n", 3),  # a shadow file
    ],
)
def test_an_invalid_slo_file_is_said_by_line_and_reason_never_by_its_text(tmp_path: Path, text: str, line: int) -> None:
    # The line reaches the console, logs and the web form: a file holding secrets must not be quoted.
    path = tmp_path / "slo.yaml"
    path.write_text(text)
    with pytest.raises(SloSpecError) as err:
        load_slo_spec(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: ") and "\n" not in message, message
    assert "hunter" not in message, message


def test_percentile_method_matches_numpy_linear() -> None:
    from tokenstorm.reports.judging.slo import stat_of

    values = np.random.default_rng(1).lognormal(size=999)
    assert stat_of(values, "p99.9") == pytest.approx(np.percentile(values, 99.9))


def test_a_crash_torn_last_record_does_not_stop_the_report(tmp_path: Path) -> None:
    run_dir = make_run_dir(tmp_path / "run", [request(i, ttft_ms=10 + i) for i in range(30)])
    with (run_dir / "requests.jsonl").open("a") as fh:
        fh.write('{"workload": "chat", "start_epoch_s": 10')  # the process died mid-write
    run = load_run(run_dir)
    assert len(run.requests) == 30
    assert run.itl_values(np.ones(30, dtype=bool)).size == 30 * 50


def test_cost_per_million_tokens_from_the_gpu_hour_price_and_measured_throughput(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    records = [request(i, ttft_ms=100, output_tokens=int(rng.integers(10, 500)),
                       prompt_tokens=int(rng.integers(50, 900))) for i in range(200)]  # fmt: skip
    run = load_run(make_run_dir(tmp_path / "run", records, meta={"options": {"gpu_cost_per_hour": 3.0}}))
    window = (1000.0 + 199 / 10 + 0.6) - 1000.0  # first start to last end (TTFT 0.1 + 0.5 s)
    out = sum(r["output_tokens"] for r in records)
    total = out + sum(r["prompt_tokens"] for r in records)
    per_hour = 3.0 * 4  # --gpu-cost-per-hour × the SLO file's 4 GPUs
    overall = summarize(run, spec("gpus: 4\nslos:\n  chat:\n    ttft_ms: {p95: 500}\n")).overall
    assert overall["cost_per_hour"] == per_hour
    assert overall["cost_per_1m_output_tokens"] == pytest.approx(per_hour / (out / window * 3600) * 1e6, rel=1e-9)
    assert overall["cost_per_1m_total_tokens"] == pytest.approx(per_hour / (total / window * 3600) * 1e6, rel=1e-9)
    # The run's --gpu-cost-per-hour wins over the SLO file's, `reports build --gpu-cost-per-hour` over
    # both (0: no cost); without a price there are no cost figures.
    slo_priced = spec("gpus: 4\ngpu_cost_per_hour: 1.5\nslos:\n  chat:\n    ttft_ms: {p95: 500}\n")
    assert summarize(run, slo_priced).overall["cost_per_hour"] == 12.0
    assert summarize(run, slo_priced, gpu_cost_per_hour=0.5).overall["cost_per_hour"] == 2.0
    assert "cost_per_hour" not in summarize(run, slo_priced, gpu_cost_per_hour=0).overall
    unpriced = load_run(make_run_dir(tmp_path / "free", records))
    assert summarize(unpriced, slo_priced).overall["cost_per_hour"] == 6.0
    assert "cost_per_hour" not in summarize(unpriced, spec("slos:\n  chat:\n    ttft_ms: {p95: 500}\n")).overall
