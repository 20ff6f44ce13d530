"""--otlp-port in a real run: spans a server exports after the run ended (vLLM sends a batch every 5 s) are still
taken before the outputs are built, and the report's table carries them; a port in use and a server that sends
no span are each said in one line."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

from tests.conftest import LOCUST, ROOT, free_port, run_locust
from tests.fakes.otlp_spans import export_body, llm_request_span, post
from tokenstorm.reports import load_run
from tokenstorm.workloads.rundir import SPANS_FILE, read_records

_RUN = [
    "--headless",
    "-u",
    "3",
    "-r",
    "3",
    "--wait-time",
    "0",
    "--max-tokens",
    "8",
    "--timing-verdict",
    "warn",
    "--emulator-args",
    "--ttft-ms 30 --itl-ms 3 --no-enable-per-request-metrics",  # a server that traces but sends no metrics
]


def test_spans_exported_after_the_run_ended_are_taken_before_the_report_is_built(tmp_path: Path) -> None:
    port = free_port()
    cmd = [
        *LOCUST,
        "-f",
        str(ROOT / "locustfiles" / "chat.py"),
        *_RUN,
        "-t",
        "3s",
        "--otlp-port",
        str(port),
        "--run-dir",
        str(tmp_path / "runs"),
        "--confidence",
        "0",
    ]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any("--run-time limit reached" in line for line in lines):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)[-3000:]
            time.sleep(0.1)
        (run_dir,) = (tmp_path / "runs").iterdir()
        records = []
        while not records or len(records) != len(list(read_records(run_dir))):  # the last records flushed
            records = [r.as_row() for r in read_records(run_dir)]
            time.sleep(0.5)
        ok = [r for r in records if r["ok"]]
        assert ok and all(len(r["trace_id"]) == 32 for r in ok)
        # The server's batch: each request's span, as vLLM exports it, after the run's last request
        spans = [
            llm_request_span(
                r["trace_id"],
                r["start_epoch_s"] + 0.0005,
                queue_s=0.002,
                frontend_s=0.001,
                prefill_s=0.010,
                decode_s=0.015,
                output_tokens=int(r["output_tokens"]),
            )
            for r in ok
        ]
        posted_s = time.monotonic()
        assert post(f"http://127.0.0.1:{port}/v1/traces", export_body(*spans))[0] == 200
        assert not (run_dir / "report.html").exists()  # taken before the outputs
        proc.wait(timeout=120)
        ended_s = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    out = "".join(lines)
    assert proc.returncode == 0, out[-3000:]
    assert "Traceback" not in out
    assert ended_s - posted_s < 30  # no long wait once the batch came (8 s at most, then the report)
    df = load_run(run_dir).requests
    done = df[df["ok"]]
    assert len(done) == len(ok) and done["server_queue_s"].notna().all() and done["server_frontend_s"].notna().all()
    assert np.allclose(done["server_frontend_s"], 0.001) and np.allclose(done["server_ttft_s"], 0.010)
    assert len((run_dir / SPANS_FILE).read_text().splitlines()) == len(ok)


def test_a_port_in_use_is_one_line_and_exit_3(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = run_locust(tmp_path, "chat.py", "-u", "1", "-t", "2s", "--otlp-port", str(port))
    assert run.returncode == 3
    said = [line for line in run.output.splitlines() if "--otlp-port" in line]
    assert len(said) == 1 and "cannot listen" in said[0], run.output[-2000:]
    assert "Traceback" not in run.output


def test_a_server_that_sends_no_span_is_said_in_one_line_naming_the_flag(tmp_path: Path) -> None:
    port = free_port()
    started = time.monotonic()
    run = run_locust(tmp_path, "chat.py", *_RUN, "-t", "2s", "--otlp-port", str(port))
    took_s = time.monotonic() - started
    assert run.returncode == 0, run.output[-2000:]
    said = [line for line in run.output.splitlines() if "no llm_request span" in line]
    assert len(said) == 1 and "--otlp-traces-endpoint" in said[0] and f":{port}/v1/traces" in said[0]
    assert took_s < 90
    assert not (run.run_dir / SPANS_FILE).exists()  # type: ignore[operator]
