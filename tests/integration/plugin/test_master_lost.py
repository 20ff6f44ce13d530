"""No load without its master: a master killed outright (SIGKILL, the OOM killer) takes its load with
it. Workers forked by ``--processes`` stop within a second (a parent-death signal); workers started
with ``--worker --master-host`` within a few seconds (their own watchdog), and say so."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from tests.conftest import LOCUST, ROOT, free_port, master_ports

LOCUSTFILE = str(ROOT / "locustfiles" / "code_completion.py")
#: short requests (~70 ms): every one in flight at the kill has ended well within a second
FAST = ("--ttft-ms", "20", "--itl-ms", "5")
LOAD = ["--wait-time", "0", "--max-tokens", "10", "--timing-verdict", "warn"]


def _served(url: str) -> int:
    """Requests the emulator has seen end (answered or cut off by the client)."""
    with urllib.request.urlopen(url + "/emulator/truth", timeout=10) as resp:
        return len(json.loads(resp.read()))


def _wait_for_load(url: str, requests: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while _served(url) < requests:
        assert time.monotonic() < deadline, f"fewer than {requests} requests arrived in {timeout_s} s"
        time.sleep(0.2)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    """Running (a zombie that nobody reaped has stopped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _served_at(url: str, kill_s: float, after_s: float) -> int:
    time.sleep(max(0.0, kill_s + after_s - time.monotonic()))
    return _served(url)


def test_processes_workers_stop_within_a_second_of_the_master_sigkill(tmp_path: Path) -> None:
    from tokenstorm.emulator import EmulatorProcess

    with EmulatorProcess(*FAST) as emu:
        master = subprocess.Popen(
            [
                *LOCUST,
                "-f",
                LOCUSTFILE,
                "--headless",
                "-u",
                "4",
                "-r",
                "4",
                "-t",
                "40s",
                "--processes",
                "2",
                *master_ports(),
                "--host",
                emu.url,
                *LOAD,
                "--run-dir",
                str(tmp_path / "runs"),
            ],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            _wait_for_load(emu.url, 40)  # both workers' users sending
            workers = _children(master.pid)
            assert len(workers) >= 2
            os.kill(master.pid, signal.SIGKILL)  # no handler runs in the master: its workers are on their own
            killed = time.monotonic()
            master.wait(timeout=10)
            at_1_5_s = _served_at(emu.url, killed, 1.5)
            at_5_s = _served_at(emu.url, killed, 5.0)
            left = [pid for pid in workers if _alive(pid)]
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(master.pid, signal.SIGKILL)  # whatever is left of the process group
    # Before: the workers went on at ~13 req/s for 60 s (Locust's master heartbeat timeout).
    assert at_5_s == at_1_5_s, f"{at_5_s - at_1_5_s} requests arrived 1.5-5 s after the master died"
    assert not left, f"worker processes {left} outlived their master by 5 s"


def test_remote_worker_stops_and_says_so_when_its_master_is_lost(tmp_path: Path) -> None:
    from tokenstorm.emulator import EmulatorProcess

    port = free_port()
    with EmulatorProcess(*FAST) as emu:
        master = subprocess.Popen(
            [
                *LOCUST,
                "-f",
                LOCUSTFILE,
                "--master",
                "--master-bind-host",
                "127.0.0.1",
                "--master-bind-port",
                str(port),
                "--expect-workers",
                "1",
                "--headless",
                "-u",
                "2",
                "-r",
                "2",
                "-t",
                "40s",
                "--host",
                emu.url,
                *LOAD,
                "--run-dir",
                str(tmp_path / "runs"),
            ],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        worker = subprocess.Popen(
            [*LOCUST, "-f", LOCUSTFILE, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            _wait_for_load(emu.url, 20)
            master.kill()
            killed = time.monotonic()
            master.wait(timeout=10)
            out, _ = worker.communicate(timeout=20)  # Locust alone: 60 s, then it quits
            stopped_s = time.monotonic() - killed
            # The requests it had in flight end on the emulator as it notices them cut (its next write): seen
            # 2 arriving just after the worker's exit on a busy machine. Nothing new after that.
            time.sleep(1)
            settled = _served(emu.url)
            time.sleep(2)
            later = _served(emu.url)
        finally:
            for proc in (master, worker):
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
    assert stopped_s < 8 + 6, f"the worker ran on {stopped_s:.1f} s after its master died"  # LOST_MASTER_AFTER_S
    assert f"lost the master at 127.0.0.1:{port} for" in out and "stopping the load" in out, out[-2000:]
    assert worker.returncode == 4, out[-2000:]  # its part of the run is incomplete
    assert later == settled  # and it sent nothing more
    # What it recorded after the master died never reached it: kept beside the runs, and said where.
    (unsent,) = (tmp_path / "runs").glob("unsent-*.jsonl")
    assert f"request records the master never took are in {unsent}" in out, out[-2000:]
    rows = [json.loads(line) for line in unsent.read_text().splitlines()]
    assert len(rows) > 10 and all(row["request_id"] and row["workload"] for row in rows)
