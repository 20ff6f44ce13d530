"""The in-run monitor process: samples the target into the run directory, keeps the key off its command line."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tokenstorm.emulator import EmulatorProcess
from tokenstorm.monitors import MonitorProcess


def test_monitor_process_scrapes_and_never_shows_the_api_key(tmp_path: Path) -> None:
    secret = "sk-monitor-secret-42"
    with EmulatorProcess("--api-key", secret) as emu:
        monitor = MonitorProcess(
            tmp_path, target_url=emu.url, gpu_monitor=None, interval_s=0.2, authorization={emu.url: f"Bearer {secret}"}
        )
        try:
            pid = monitor._proc.pid
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes() if os.path.exists(f"/proc/{pid}") else b""
            assert secret.encode() not in cmdline  # `ps` shows the command line to every local user
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and len(monitor.latest()[1]) == 0:
                time.sleep(0.2)
            _gpus, server = monitor.latest()
            assert server.get("running") is not None, server
        finally:
            monitor.stop()
    rows = [json.loads(line) for line in (tmp_path / "server.jsonl").read_text().splitlines()]
    assert len(rows) >= 2 and not any(r.get("gap") for r in rows)  # the last sample is taken on stop
    assert secret not in (tmp_path / "server.jsonl").read_text()
