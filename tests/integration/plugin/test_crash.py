"""A load test killed outright (SIGKILL, OOM killer, a lost machine) keeps every request that
finished more than 2 s before it died, readable by the reports at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.conftest import ROOT
from tokenstorm.workloads.client.probes import PROBE_ID_PREFIX
from tokenstorm.workloads.rundir import read_records


def _served(url: str) -> set[str]:
    with urllib.request.urlopen(url + "/emulator/truth", timeout=10) as resp:
        # the workloads' requests (not the pre-flight probe's, which is never a record)
        return {t["request_id"] for t in json.loads(resp.read())
                if not t["fault"] and not t["request_id"].startswith(PROBE_ID_PREFIX)}  # fmt: skip


def test_sigkill_loses_at_most_the_last_two_seconds_of_records(tmp_path: Path) -> None:
    from tokenstorm.emulator import EmulatorProcess

    with EmulatorProcess("--ttft-ms", "20", "--itl-ms", "5") as emu:
        proc = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "mixed.py"), "--headless",
             "-u", "8", "-r", "8", "-t", "120s", "--host", emu.url, "--wait-time", "0", "--max-tokens", "20",
             "--run-dir", str(tmp_path / "runs")],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            time.sleep(12)  # records flowing for a while: several flushes, several batches
            finished_long_ago = _served(emu.url)  # the server's own list of what it completed by now
            time.sleep(2.5)
            os.killpg(proc.pid, signal.SIGKILL)  # no handler runs: no flush, no close, no report
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert not (run_dir / "report.html").exists()  # it really died before writing anything at the end
    recorded = {r.request_id for r in read_records(run_dir)}
    assert len(finished_long_ago) > 50
    missing = finished_long_ago - recorded
    assert not missing, f"{len(missing)} requests finished > 2.5 s before the kill are lost"
    # The reports read the crashed run as it is, and say it never finished.
    out = subprocess.run([sys.executable, "-m", "tokenstorm.reports", "build", str(run_dir)], capture_output=True,
        text=True,
                         cwd=ROOT, timeout=120)  # fmt: skip
    assert out.returncode == 4, out.stdout + out.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["completed"] + summary["failed"] == len(recorded)
