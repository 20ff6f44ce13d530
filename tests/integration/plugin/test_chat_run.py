"""A default headless run: SIMULATED target, records that match the requests Locust counted."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path


def test_headless_run_without_host_records_every_request(locust_runner) -> None:  # type: ignore[no-untyped-def]
    run = locust_runner(
        "chat.py",
        "--chat-think-time",
        "0-0.2",
        "-u",
        "20",
        "-r",
        "20",
        "-t",
        "8s",
        "--api-key",
        "sk-secret-123",
        "--gpu-monitor",
        "local",
        "--emulator-args",
        "--ttft-ms 100 --itl-ms 5",
        "--csv",
        "locust",
    )
    assert run.returncode == 0, run.output[-3000:]
    assert "SIMULATED" in run.output
    assert "_SIMULATED" in run.run_dir.name  # type: ignore[union-attr]
    # No GPU here: one notice, and the load test runs without GPU samples.
    assert "running without GPU samples" in run.output and "Traceback" not in run.output
    everything = run.records()
    records = [r for r in everything if r["error_category"] != "cancelled"]
    assert all(r["ttft_s"] is None or r["ttft_s"] > 0 for r in everything)
    stats = run.locust_stats()
    assert len(records) == (stats[("E2E", "chat")]["requests"]) > 0
    assert (stats[("TTFT", "chat")]["requests"]) == len(records)
    assert (stats[("TPOT", "chat")]["requests"]) == len(records)
    # Locust's total (the header's RPS, the charts, the Aggregated row) counts requests, not the
    # three rows each request adds to the table (it read 3x the request rate before).
    with (run.csv_prefix.parent / "locust_stats.csv").open() as fh:
        rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(fh)}
    # (The CSV is Locust's own snapshot, written a moment apart from the JSON stats: compared within itself.)
    e2e_rows = int(rows[("E2E", "chat")]["Request Count"])
    assert len(records) - 2 <= e2e_rows <= len(records)
    assert int(rows[("", "Aggregated")]["Request Count"]) == e2e_rows
    assert int(rows[("TTFT", "chat")]["Request Count"]) == e2e_rows  # the TTFT row is still there
    for rec in records:
        assert rec["ok"] and rec["ttft_s"] <= rec["e2e_s"] <= rec["done_s"]
        assert rec["output_tokens"] > 0 and rec["prompt_tokens"] > 0
    meta = run.run_json()
    assert meta["simulated"] is True and meta["model"] == "tokenstorm-emulated"
    # GC pauses during the run are measured (README: "the pauses left are in run.json").
    assert len(meta["gc"]["collections"]) == 3 and meta["gc"]["max_pause_ms"] >= 0
    assert meta["records"] == len(everything)
    # The API key is a secret: nowhere in what the run left behind, nor in its console.
    for path in run.run_dir.rglob("*"):  # type: ignore[union-attr]
        if path.is_file():
            assert b"sk-secret-123" not in path.read_bytes(), path
    assert "sk-secret-123" not in repr(everything)  # the records decoded: segments are compressed
    assert "sk-secret-123" not in run.output


def test_api_key_is_sent_and_a_wrong_one_fails_fast(locust_runner) -> None:  # type: ignore[no-untyped-def]
    server_args = ["--emulator-args", "--api-key sk-right --ttft-ms 20 --itl-ms 2"]
    good = locust_runner("chat.py", "-u", "2", "-r", "2", "-t", "3s", "--api-key", "sk-right", *server_args)
    assert good.returncode == 0, good.output[-2000:]
    assert good.records() and all(r["ok"] for r in good.records() if r["error_category"] != "cancelled")
    bad = locust_runner("chat.py", "-u", "2", "-r", "2", "-t", "30s", "--api-key", "sk-wrong", *server_args)
    assert bad.returncode == 3
    assert "GET /v1/models answered HTTP 401; check --host and --api-key" in bad.output
    assert "sk-wrong" not in bad.output


def test_emulator_health_endpoint_used_by_the_compose_healthcheck() -> None:
    import urllib.request

    from tokenstorm.emulator import EmulatorProcess

    with EmulatorProcess("--api-key", "k") as emu:  # health needs no key, like vLLM's
        assert urllib.request.urlopen(f"{emu.url}/health", timeout=5).status == 200


def test_a_headless_run_ends_with_one_block_of_exact_figures_not_locusts_tables(tmp_path: Path) -> None:
    from tests.conftest import ROOT

    def run(*extra: str) -> str:
        out = subprocess.run([sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless",
                              "-u", "2", "-r", "2", "-t", "8s", "--run-dir", str(tmp_path / "runs"), "--timing-verdict",
                              "warn", "--confidence", "0", "--chat-think-time", "0-0.2", *extra],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
        return out.stdout + out.stderr

    quiet, chatty = run(), run("--locust-stats")
    # Locust's table every 2 s is off, and so are its closing tables (rounded percentiles printed after the
    # verdict): the run's last lines are tokenstorm's verdict and report path.
    assert quiet.count("Aggregated") == 0 and chatty.count("Aggregated") > 2, (quiet.count("Aggregated"), quiet[-3000:])
    assert "Percentage of the requests completed within given times" not in quiet
    tail = [line for line in quiet.splitlines() if line.strip()][-8:]
    assert any(line.startswith("report ") and line.endswith("report.html") for line in tail), tail
    assert tail[-1].startswith("PASSED"), tail  # the verdict is the last line
    # One closing block: its throughput and latency tables each have one "all" row, printed once.
    block = [line for line in quiet.splitlines() if line.startswith("all ")]
    assert len(block) == 2, quiet[-3000:]
