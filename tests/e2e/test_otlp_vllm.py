"""The OTLP path against a real vLLM: started with --otlp-traces-endpoint and without
--enable-per-request-metrics, its streams carry no timing of their own, and every part of each request's time
comes from the ``llm_request`` span it exported to tokenstorm's receiver (--otlp-port), joined by trace id."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_locust
from tokenstorm.reports import load_run
from tokenstorm.workloads.rundir import SPANS_FILE

pytestmark = pytest.mark.e2e

PARTS = ("server_queue_s", "server_ttft_s", "server_decode_s", "server_itl_s", "overhead_s", "server_frontend_s")
MAX_TOKENS = 16


def _run(tmp_path: Path, url: str, port: int, run_time: str):  # type: ignore[no-untyped-def]
    run = run_locust(
        tmp_path,
        "chat.py",
        "--host",
        url,
        "--model",
        "tiny",
        "--chat-turns",
        "1",
        "--chat-think-time",
        "0-0",
        "--wait-time",
        "0",
        "--max-tokens",
        str(MAX_TOKENS),
        "--ignore-eos",
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        run_time,
        "--otlp-port",
        str(port),
    )
    assert run.returncode == 0, run.output[-3000:]
    return run


def test_spans_alone_fill_every_part_of_each_requests_time(
    tracing_vllm: str, otlp_port: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Warm the server first (its first requests compile and allocate), its spans taken by a run of their own; 8 s of
    # 4 users back to back is hundreds of 16-token answers, where 20 are asked.
    _run(tmp_path_factory.mktemp("warm"), tracing_vllm, otlp_port, "4s")
    run = _run(tmp_path_factory.mktemp("measured"), tracing_vllm, otlp_port, "8s")
    records = [r for r in run.records() if r["ok"]]
    assert len(records) >= 20, run.output[-2000:]
    assert all(r["server_queue_s"] is None for r in records)  # the streams said nothing: the spans alone
    assert (run.run_dir / SPANS_FILE).is_file()
    df = load_run(run.run_dir).requests
    done = df[df["ok"]]
    filled = done[list(PARTS)].notna().all(axis=1)
    share = float(filled.mean())
    frontend_ms = statistics.median(done.loc[filled, "server_frontend_s"]) * 1000
    print(
        f"\nOTLP: {filled.sum()} of {len(done)} successful records filled from spans ({share:.1%}); "
        f"server front end median {frontend_ms:.2f} ms, queue median "
        f"{statistics.median(done.loc[filled, 'server_queue_s']) * 1000:.2f} ms, overhead median "
        f"{statistics.median(done.loc[filled, 'overhead_s']) * 1000:.2f} ms"
    )
    assert share >= 0.99, f"{filled.sum()} of {len(done)} records have their span's timing"
    part = done[filled]
    # The parts add up to the client's TTFT, and the client's TTFT holds the server's (from arrival)
    assert (part["overhead_s"] >= -0.001).all(), part["overhead_s"].min()
    total = part["overhead_s"] + part["server_queue_s"] + part["server_ttft_s"]
    assert np.allclose(total, part["ttft_s"], atol=1e-9)
    assert (part["server_frontend_s"] > 0).all(), part["server_frontend_s"].min()
    assert (part["overhead_s"] >= part["server_frontend_s"] - 0.001).all()
    # Every output token after the first came in decode: the server's mean gap times the gaps is its decode time
    gaps = part["output_tokens"] - 1
    assert np.allclose(part["server_itl_s"] * gaps, part["server_decode_s"])
    assert (part["output_tokens"] == MAX_TOKENS).all()
