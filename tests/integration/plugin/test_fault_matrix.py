"""The fault and bad-input matrix of issue #13, run end to end so it stays green: the API key
never reaches the web UI or another host, the web UI listens on loopback, a bad start form is
answered in the form, Ctrl-C with the built-in emulator cancels cleanly, bad files get one line.
(Emulator faults: test_faults.py; bad options: test_mixed.py; lost workers: test_distributed.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT, free_port
from tests.fakes.scripted import ScriptedServer
from tests.integration.reports.test_reports import CHROMIUM
from tokenstorm.workloads.rundir import read_records

SECRET = "sk-tokenstorm-test-3f9a1c77d2"
PAGES = ("/", "/stats/requests", "/stats/requests/csv", "/stats/failures/csv", "/stats/report", "/exceptions",
         "/exceptions/csv", "/tasks", "/logs", "/worker-count", "/tokenstorm/report")  # fmt: skip


_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def _listener() -> ScriptedServer:
    """A server that keeps every request's raw bytes (``requests``) and answers each 404."""
    return ScriptedServer(lambda conn, _n: conn.sendall(_NOT_FOUND))


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return str(resp.read().decode("utf-8", "replace"))


def _post(url: str, form: dict[str, str]) -> dict:
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=30) as resp:
        return dict(json.loads(resp.read()))


def _wait_listening(pid: int, port: int, timeout_s: float = 40) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        addrs = [c.laddr.ip for c in psutil.Process(pid).net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == port]  # fmt: skip
        if addrs:
            return addrs
        time.sleep(0.3)
    raise AssertionError(f"nothing listening on port {port}")


def test_the_api_key_stays_out_of_the_web_ui_and_off_other_hosts(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from tokenstorm.emulator import EmulatorProcess

    port = free_port()
    listener = _listener()
    with EmulatorProcess("--ttft-ms", "20", "--itl-ms", "5") as emu:
        proc = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--web-port", str(port),
             "--host", emu.url, "--api-key", SECRET, "--autostart", "-u", "2", "-r", "2",
             "--run-dir", str(tmp_path / "runs"), "--chat-think-time", "0-0.2", "--max-tokens", "8"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            # No --web-host: the UI (no login) listens on loopback only.
            assert _wait_listening(proc.pid, port) == ["127.0.0.1"]
            base = f"http://127.0.0.1:{port}"
            time.sleep(4)  # running, records written, the live report has something to show
            bodies = {path: _get(base + path) for path in PAGES}
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page()
                responses: list = []
                page.on("response", lambda r: responses.append(r))
                page.goto(base + "/")
                page.wait_for_timeout(3000)  # the UI polls /stats/requests, /tasks, ...
                bodies["rendered page"] = page.content()
                textual = [r for r in responses if r.ok and any(
                    t in (r.headers.get("content-type") or "") for t in ("text", "json"))]  # fmt: skip
                seen = [r.text() for r in textual]
                bodies["responses the page fetched"] = "\n".join(seen)
                browser.close()
            leaked = [name for name, body in bodies.items() if SECRET in body or SECRET[-10:] in body]
            assert leaked == []
            assert "tokenstorm SLO report" in bodies["/tokenstorm/report"] and len(seen) > 3
            # Another host from the start form, mid-run and after a stop: the key given for the
            # emulator is never sent there.
            other = f"http://127.0.0.1:{listener.port}"
            answer = _post(base + "/swarm", {"user_count": "4", "spawn_rate": "4", "host": other})
            assert answer["success"], answer
            deadline = time.monotonic() + 20
            while b"POST /v1/" not in listener.seen and time.monotonic() < deadline:
                time.sleep(0.2)
            assert b"POST /v1/" in listener.seen  # new users went there
            _post(base + "/stop", {})
            time.sleep(1)
            answer = _post(base + "/swarm", {"user_count": "1", "spawn_rate": "1", "host": other})
            assert answer["success"], answer
            deadline = time.monotonic() + 20
            while b"GET /v1/models" not in listener.seen and time.monotonic() < deadline:
                time.sleep(0.2)
            assert b"GET /v1/models" in listener.seen
            assert b"authorization" not in listener.seen.lower() and SECRET.encode() not in listener.seen
            # A bad value in the start form is answered in the form, before any traffic.
            bad = _post(base + "/swarm", {"user_count": "1", "spawn_rate": "1", "host": emu.url,
                                          "max_tokens": "-5"})  # fmt: skip
            assert bad == {"success": False, "message": "tokenstorm: --max-tokens -5: must be >= 0", "host": other}
        finally:
            proc.terminate()
            out, _ = proc.communicate(timeout=60)
    assert SECRET not in out and "Traceback" not in out, out[-3000:]
    assert "is not sent to" in out
    for path in (tmp_path / "runs").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    for run_dir in (tmp_path / "runs").iterdir():  # the records decoded too: segments are compressed
        assert SECRET not in repr([r.as_row() for r in read_records(run_dir)])


def test_ctrl_c_with_the_built_in_emulator_cancels_in_flight_requests_and_judges_what_completed(
    tmp_path: Path,
) -> None:
    # As a terminal sends it: SIGINT to the whole foreground process group, emulator included.
    proc = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless", "-u", "6",
         "-r", "6", "-t", "60s", "--run-dir", str(tmp_path / "runs"), "--chat-think-time", "0-0.1",
         "--max-tokens", "100", "--ignore-eos", "--emulator-args", "--ttft-ms 50 --itl-ms 10",
         "--timing-verdict", "warn", "--confidence", "0"],  # what Ctrl-C does is checked, not the clock or sample
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's, not a ``&`` shell's
    )  # fmt: skip
    try:
        time.sleep(8)  # started, each user mid-stream (a request takes ~1 s)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = [r.as_row() for r in read_records(run_dir)]
    categories = {r["error_category"] for r in records}
    assert categories <= {None, "cancelled"}, categories  # no stream_dropped: the emulator outlived the users
    assert "cancelled" in categories and sum(r["ok"] for r in records) >= 6, out[-3000:]
    # Stopped before its planned end (-t 60s): judged on what completed, and incomplete (exit code 4).
    assert proc.returncode == 4, out[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["verdict"] == "incomplete" and "default check held" in summary["verdict_reason"]


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (None, "is a directory, not a dataset file"),
        (b"\xff\xfe not text", "not UTF-8 text (byte 0xff at offset 0)"),
        (b'{"prompt": "ok"}\n{"prompt": 5}\n', "d.jsonl:2: expected 'prompt'"),
    ],
)  # fmt: skip
def test_a_bad_dataset_is_one_line_naming_the_file(
    locust_runner, tmp_path: Path, content: bytes | None, line: str
) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "d.jsonl"
    if content is None:
        data.mkdir()
    else:
        data.write_bytes(content)
    run = locust_runner("chat.py", "-u", "1", "-r", "1", "-t", "20s", "--dataset", str(data))
    assert run.returncode == 3 and f"tokenstorm: {data}" in run.output and line in run.output, run.output[-2000:]
    assert "Traceback" not in run.output and run.run_dir is None
