"""The web UI: tokenstorm's tabs get live data and the report link serves the report."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.conftest import ROOT, free_port


def test_web_ui_shows_llm_tab_data_and_serves_the_live_report(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--web-host", "127.0.0.1",
         "--web-port", str(port), "--autostart", "-u", "4", "-r", "4", "--run-dir", str(tmp_path / "runs"),
         "--emulator-args", "--ttft-ms 30 --itl-ms 2"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 40
        rows: list[dict] = []
        while time.monotonic() < deadline:
            time.sleep(1)
            try:
                stats = json.load(urllib.request.urlopen(f"{base}/stats/requests", timeout=5))
            except OSError:
                continue
            ext = {e["key"]: e["data"] for e in stats.get("extended_stats", [])}
            rows = ext.get("tokenstorm", [])
            running = (ext.get("tokenstorm-server") or [{}])[0].get("running")  # a message until sampled
            if rows and rows[-1]["tokens"] > 0 and isinstance(running, (int, float)) and running >= 1:
                break
        total = rows[-1]
        assert total["workload"].startswith("Total") and total["tokens"] > 0 and total["tokens_per_s"] > 0
        assert total["target"].startswith("SIMULATED")
        assert ext["tokenstorm-server"][0]["running"] >= 1  # the emulator's /metrics, live
        # No --gpu-monitor: the GPU tab says how to get samples instead of showing an empty table.
        (gpu,) = ext["tokenstorm-gpu"]
        assert "--gpu-monitor" in gpu["gpu"] and "python -m tokenstorm.monitors gpu" in gpu["gpu"]
        # The live status's first row: the timing fidelity of the window's requests, judged like an SLO;
        # while it says the timing is not trustworthy, the LLM table's Total row says so too.
        live = json.load(urllib.request.urlopen(f"{base}/tokenstorm/live.json", timeout=30))
        timing = live["slo"][0]
        assert timing["label"] == "Timing fidelity", live["slo"]
        words = {"pass": "timing trustworthy: ", "fail": "timing NOT trustworthy: ", "wait": "too few to judge yet: ",
                 "warn": "no cause seen, so not failed live"}[timing["status"]]  # fmt: skip
        assert timing["note"].startswith(words) and 0 <= timing["measured"] <= 1, timing
        stats = json.load(urllib.request.urlopen(f"{base}/stats/requests", timeout=5))  # (nothing judged since)
        total = next(e["data"] for e in stats["extended_stats"] if e["key"] == "tokenstorm")[-1]
        assert ("TIMING NOT TRUSTWORTHY" in total["workload"]) == (timing["status"] == "fail"), (total, timing)
        page = urllib.request.urlopen(f"{base}/", timeout=5).read().decode()
        assert "tokenstorm SLO report" in page  # the link in the UI's template arguments
        report = urllib.request.urlopen(f"{base}/tokenstorm/report", timeout=60).read().decode()
        assert "tokenstorm SLO report" in report and "SIMULATED" in report and 'id="verdict"' in report
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "Traceback" not in out, out[-3000:]
