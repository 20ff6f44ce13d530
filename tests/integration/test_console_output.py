"""What a headless ``tokenstorm run`` prints, read as a user reads it, on the built-in emulator answering
HTTP 500 to a share of the requests: a progress line at least every 5 s with elapsed and remaining time,
req/s, TTFT and the errors as they happen; then Locust's error report; then the closing block — no log
prefix, no line over 100 characters, sessions counted per workload, the cost — ending with the verdict.
The same with ``--processes 2``: the master prints what its workers measured. And in a terminal (a pty),
the live display instead of the plain lines, the closing block after it."""

from __future__ import annotations

import itertools
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, master_ports

#: a Locust log line's prefix: ``[2026-12-03 08:36:16,277] host/INFO/tokenstorm: ``
LOG_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\] \S+/[A-Z]+/")
PROGRESS = re.compile(
    r"^(?P<m>\d+):(?P<s>\d\d) \((?P<left>\d+:\d\d) left\) · (?P<users>\d+) users, (?P<rps>[\d.,]+|—) req/s, "
    r"(?:[\d,]+ tok/s, )?TTFT p50/p95 (?P<ttft>[\d,]+/[\d,]+ ms|—) · (?P<errors>no errors|\d+ errors? \([^)]*\)) · "
    r"(?P<timing>timing.*|TIMING NOT TRUSTWORTHY.*)$"
)
VERDICT = re.compile(r"^(PASSED|FAILED|INCONCLUSIVE|UNRELIABLE|INCOMPLETE|RUN_FAILED) — .*")
#: gevent's sleep may come late on a busy 2-core runner: a line may be this much past its 5 s
SLACK_S = 1.5


def _run(tmp_path: Path, *args: str, duration_s: int = 24) -> list[tuple[float, str]]:
    """``tokenstorm run mixed`` on the emulator (20% HTTP 500): its output lines, each with when it came."""
    cmd = [
        sys.executable,
        "-m",
        "tokenstorm",
        "run",
        "mixed",
        "--headless",
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        f"{duration_s}s",
        "--run-dir",
        str(tmp_path / "runs"),
        "--timing-verdict",
        "warn",
        "--gpu-cost-per-hour",
        "2.5",
        "--emulator-args",
        "--fault 500=0.2",
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + duration_s + 120
        for line in proc.stdout:
            lines.append((time.monotonic(), line.rstrip("\n")))
            if time.monotonic() > deadline:
                proc.kill()
        code = proc.wait(timeout=60)
    assert code == 1, "\n".join(text for _, text in lines)[-3000:]  # the 500s fail error_rate
    return lines


def _summary(tmp_path: Path) -> dict:
    (run_dir,) = (tmp_path / "runs").iterdir()
    return json.loads((run_dir / "summary.json").read_text())


def _check_progress(lines: list[tuple[float, str]]) -> list[re.Match[str]]:
    """The progress lines: one at least every 5 s from the run's start to its end, each with its figures."""
    text = [t for _, t in lines]
    started = next(at for at, t in lines if "run directory" in t)
    ended = next(at for at, t in lines if "--run-time limit reached" in t)
    progress = [(at, m) for at, t in lines if (m := PROGRESS.match(t))]
    assert len(progress) >= 3, "\n".join(text)
    times = [started, *(at for at, _ in progress)]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) <= 5 + SLACK_S and ended - times[-1] <= 5 + SLACK_S, (gaps, "\n".join(text))
    elapsed = [int(m["m"]) * 60 + int(m["s"]) for _, m in progress]
    assert elapsed == sorted(elapsed) and elapsed[0] <= 6, elapsed
    assert any(m["rps"] != "—" and float(m["rps"]) > 0 for _, m in progress), "\n".join(text)
    assert any(m["ttft"].endswith(" ms") for _, m in progress), "\n".join(text)
    assert all(m["users"] == "4" for _, m in progress[1:]), "\n".join(text)
    # The 500s show while the run goes on, with their share and category, not only at its end.
    while_running = [m for at, m in progress if at < ended]
    assert any(re.fullmatch(r"\d+ errors? \(\d+\.\d% http_5xx\)", m["errors"]) for m in while_running), text
    return [m for _, m in progress]


def _check_block(text: list[str], summary: dict) -> list[str]:
    """The closing block, after Locust's error report: no log prefix, none over 100 characters, the verdict
    last. Returns the block's lines."""
    rule = "-" * 100
    start = text.index(rule)
    assert "Error report" in text[:start], "\n".join(text)  # Locust's own, before the block
    block = text[start:]
    assert not [line for line in block if LOG_PREFIX.match(line)], "\n".join(block)
    assert not [line for line in block if len(line) > 100], "\n".join(block)
    last = max(i for i, line in enumerate(block) if not line.startswith("  "))  # a wrapped line's continuation
    assert VERDICT.match(block[last]) and block[-1].endswith("(exit code 1)"), "\n".join(block)
    assert summary["verdict"].upper() in block[last]
    assert not any(PROGRESS.match(line) for line in block), "\n".join(block)
    return block


def _money(value: float) -> str:
    return f"{value:,.4g}" if value < 10 else f"{value:,.2f}"


def test_a_headless_run_shows_progress_and_ends_on_its_verdict(tmp_path: Path) -> None:
    lines = _run(tmp_path)
    text = [t for _, t in lines]
    _check_progress(lines)
    summary = _summary(tmp_path)
    block = _check_block(text, summary)
    joined = "\n".join(block)
    # Each workload's own sessions, as summary.json counts them (not the run's, pooled); a chat's sessions
    # are long (think time between turns): a short run may have none judged, and then says none.
    assert summary["workloads"]["agent"]["sessions"], summary["workloads"]["agent"]
    for workload in ("agent", "chat"):
        mine = summary["workloads"][workload]
        said = f"{workload}: {mine['completed_sessions']:,} of {mine['sessions']:,} sessions completed"
        if mine["sessions"]:
            assert re.search(rf"^{said} ", joined, re.M), joined
        else:
            assert not re.search(rf"^{workload}: .* sessions completed", joined, re.M), joined
    assert f"cost at 2.5 per GPU-hour × 1 GPU: {_money(summary['cost_per_1m_output_tokens'])} per 1M output" in joined


@pytest.mark.serial  # a progress line at least every 5 s (+ slack), the 500s seen while it runs: its own pace
def test_the_master_of_processes_prints_what_its_workers_measured(tmp_path: Path) -> None:
    # Shorter answers (4 ms a token): enough requests in 20 s that the 500s show and decide the error rate (at
    # 20 ms a token two workers made 17, and 0 of them failed once: INCONCLUSIVE, no error report).
    faster = ("--emulator-args", "--fault 500=0.2 --itl-ms 4")
    # not Locust's 5557: other runs on this machine may hold it
    lines = _run(tmp_path, "--processes", "2", *master_ports(), *faster, duration_s=20)
    progress = _check_progress(lines)
    assert any(m["rps"] != "—" and float(m["rps"]) > 0 for m in progress)
    _check_block([t for _, t in lines], _summary(tmp_path))


def test_in_a_terminal_the_progress_is_a_live_display_and_the_verdict_comes_last(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "tokenstorm",
        "run",
        "chat",
        "--headless",
        "-u",
        "2",
        "-r",
        "2",
        "-t",
        "8s",
        "--run-dir",
        str(tmp_path / "runs"),
        "--timing-verdict",
        "warn",
        "--confidence",
        "0",  # 8 s of chat decides nothing at 95%: this test is about the display, not the interval
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100", "LINES": "40", "TERM": "xterm-256color"}
    main, child = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdin=child, stdout=child, stderr=child, env=env)
    os.close(child)
    out = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(main)
    assert proc.wait(timeout=30) == 0, out.decode(errors="replace")[-3000:]
    screen = out.decode(errors="replace")
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen).replace("\r", "")
    assert "\x1b[" in screen  # drawn in place, with the terminal's cursor controls
    assert re.search(r"tokenstorm \d:\d\d \(\d:\d\d left\)", plain), plain[-3000:]
    assert re.search(r"2 users · [\d.]+ req/s · [\d,]+ output tok/s · TTFT p50/p95", plain), plain[-3000:]
    assert not re.search(PROGRESS.pattern, plain, re.M)  # no plain progress lines in a terminal
    lines = [line.rstrip() for line in plain.splitlines() if line.strip()]
    assert VERDICT.match(lines[-1]) and lines[-1].endswith("(exit code 0)"), lines[-12:]
