"""An interrupted run is incomplete: a CI job killed by its runner's timeout (SIGTERM), or a Ctrl-C
(SIGINT), before the run's planned end must not read as passed — exit code 4, ``complete: false``,
with the verdict of what completed still shown. A run with no planned end ends by a signal: complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import LOCUST, ROOT, master_ports

LOCUSTFILE = str(ROOT / "locustfiles" / "code_completion.py")


def _sigint_as_a_terminal() -> None:
    """As from a terminal: a shell that ran these tests in the background (``&``) left SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run_and_signal(tmp_path: Path, signum: int, *args: str) -> tuple[int, str, Path]:
    """Start a headless run, send ``signum`` ~3 s after its run directory appears; (exit code, output, run dir)."""
    proc = subprocess.Popen(
        [
            *LOCUST,
            "-f",
            LOCUSTFILE,
            "--headless",
            "-u",
            "2",
            "-r",
            "2",
            "--max-tokens",
            "10",
            "--timing-verdict",
            "warn",
            "--confidence",
            "0",
            "--run-dir",
            str(tmp_path / "runs"),
            "--emulator-args",
            "--ttft-ms 20",
            *args,
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_sigint_as_a_terminal,
    )
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / "runs").glob("*/run.json")):
            assert time.monotonic() < deadline and proc.poll() is None, "the run did not start"
            time.sleep(0.1)
        time.sleep(3)
        os.kill(proc.pid, signum)  # the locust process only, as a CI runner's timeout or a terminal's Ctrl-C
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    (run_dir,) = (tmp_path / "runs").iterdir()
    return proc.returncode, out, run_dir


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_before_the_planned_end_makes_the_run_incomplete(tmp_path: Path, signum: int) -> None:
    code, out, run_dir = _run_and_signal(tmp_path, signum, "-t", "30s")
    name = signal.Signals(signum).name
    # Before: exit 0 and complete: true — a CI job cut off by its timeout read as passed.
    assert code == 4, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"] is False and summary["verdict"] == "incomplete"
    (reason,) = summary["incomplete_reasons"]
    assert reason.startswith(f"interrupted by {name} ") and "into its planned 30 s" in reason, reason
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["interrupted"].startswith(name)
    # The verdict of what completed is still given, last, on the console and in the report.
    verdict = out.rstrip().splitlines()[-1]
    assert "(exit code 4)" in out and "INCOMPLETE — run incomplete — interrupted by" in out, out[-3000:]
    assert "default check held" in out, verdict
    assert summary["completed"] > 0
    report = (run_dir / "report.html").read_text()
    assert "Run incomplete" in report and f"interrupted by {name}" in report
    junit = (run_dir / "junit.xml").read_text()
    assert "run incomplete: interrupted by" in junit
    if signum == signal.SIGTERM:  # the report rebuilt later reads the run the same way
        rebuilt = subprocess.run(
            [*LOCUST[:1], "-m", "tokenstorm.reports", "build", str(run_dir)], capture_output=True, text=True,
                cwd=ROOT, timeout=120
        )
        assert rebuilt.returncode == 4, rebuilt.stdout[-2000:] + rebuilt.stderr[-2000:]


def test_a_run_without_a_planned_end_stopped_by_sigterm_is_complete(tmp_path: Path) -> None:
    code, out, run_dir = _run_and_signal(tmp_path, signal.SIGTERM)  # no -t: it runs until it is stopped
    assert code == 0, out[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"] is True and summary["verdict"] == "passed"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


def test_ctrl_c_of_a_processes_run_keeps_every_request_its_workers_made(tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the workers too: each stops on its own, and ships its last records
    (in-flight ones as cancelled) to the master before it quits — they were lost before."""
    from tokenstorm.emulator import EmulatorProcess
    from tokenstorm.workloads.client.probes import PROBE_ID_PREFIX
    from tokenstorm.workloads.rundir import read_records

    with EmulatorProcess("--ttft-ms", "20", "--itl-ms", "5") as emu:  # its own session: Ctrl-C spares it
        proc = subprocess.Popen(
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
                "30s",
                "--processes",
                "2",
                *master_ports(),
                "--host",
                emu.url,
                "--wait-time",
                "0",
                "--max-tokens",
                "10",
                "--timing-verdict",
                "warn",
                "--run-dir",
                str(tmp_path / "runs"),
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=_sigint_as_a_terminal,
        )
        try:
            deadline = time.monotonic() + 60
            while not list((tmp_path / "runs").glob("*/run.json")):
                assert time.monotonic() < deadline and proc.poll() is None, "the run did not start"
                time.sleep(0.1)
            time.sleep(3)
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: master and workers
            out, _ = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
            assert proc.stdout is not None
            proc.stdout.close()  # also when the run died before its output was read (no ResourceWarning later)
        with urllib.request.urlopen(emu.url + "/emulator/truth", timeout=10) as resp:
            served = {
                t["request_id"] for t in json.loads(resp.read()) if not t["request_id"].startswith(PROBE_ID_PREFIX)
            }
    (run_dir,) = (p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    recorded = {r.request_id for r in read_records(run_dir)}
    assert proc.returncode == 4, out[-3000:]
    # A worker's Ctrl-C raised in whichever greenlet ran: a user's died there, its answered request unrecorded
    assert "KeyboardInterrupt" not in out, out[-3000:]
    assert len(served) > 20
    missing = served - recorded
    assert not missing, f"{len(missing)} of {len(served)} requests the server saw are not in the run's records"
    assert not list((tmp_path / "runs").glob("unsent-*")), "the master was there to take them"


def test_a_web_ui_run_whose_form_left_the_run_time_empty_has_no_planned_end(tmp_path: Path) -> None:
    """Locust keeps an earlier form's run time in its options when the next form leaves it empty: the second
    run has no planned end, so a SIGTERM during it is its end, not an interruption."""
    import urllib.parse

    from tests.conftest import free_port

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [*LOCUST, "-f", LOCUSTFILE, "--web-host", "127.0.0.1", "--web-port", str(port), "--run-dir", "runs",
         "--timing-verdict", "warn", "--wait-time", "0", "--max-tokens", "10"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip

    def swarm(**form: str) -> None:
        data = urllib.parse.urlencode({"user_count": "2", "spawn_rate": "2", **form}).encode()
        with urllib.request.urlopen(urllib.request.Request(base + "/swarm", data=data), timeout=60) as resp:
            assert json.loads(resp.read())["success"]

    def state() -> str:
        return str(json.load(urllib.request.urlopen(base + "/stats/requests", timeout=30))["state"])

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                state()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "the web UI did not come up"
                time.sleep(0.3)
        swarm(run_time="2s")  # the first run ends at its planned 2 s
        time.sleep(1)
        while state() != "stopped":
            assert time.monotonic() < deadline, state()
            time.sleep(0.3)
        swarm()  # the second: no run time
        time.sleep(3)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    first, second = sorted((tmp_path / "runs").glob("*/run.json"))
    assert json.loads(first.read_text())["status"] == "finished"
    assert json.loads(second.read_text())["status"] == "finished", out[-3000:]
    assert "interrupted" not in out, out[-3000:]
