"""Issue 30 as a user meets it: two identical short runs against the built-in emulator compared — no regression,
exit 0, their differences said to be no significant difference (before, such a pair "regressed" by +17.7% and
exited 1); a run whose emulator takes 50% longer to the first token — a TTFT regression, exit 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: checks measured latencies against a truth: runs alone (scripts/test.sh's second phase)
pytestmark = pytest.mark.serial

#: the emulator's defaults (250 ms, 100 µs a prompt token) raised by 50%
SLOW_TTFT = "--ttft-ms 375 --prefill-us-per-token 150"


def _compare(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenstorm.reports", "compare", *map(str, args), "--confidence", "0.95"],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_identical_runs_do_not_regress_and_a_slower_first_token_does(locust_runner) -> None:  # type: ignore[no-untyped-def]
    common = ["-u", "8", "-r", "8", "-t", "12s", "--confidence", "0.95"]
    one = locust_runner("chat.py", *common)
    two = locust_runner("chat.py", *common)
    slow = locust_runner("chat.py", *common, "--emulator-args", SLOW_TTFT)
    for run in (one, two, slow):
        assert run.run_dir is not None and run.returncode in (0, 6), run.output[-3000:]  # 6: SLOs inconclusive

    same = _compare(one.run_dir, two.run_dir)
    text = same.stdout
    assert same.returncode == 0, text + same.stderr
    assert "no significant difference" in text.replace("\n  ", " ")
    assert text.splitlines()[0].endswith("changes judged by their 95% intervals")
    assert "REGRESSION" not in text and max(len(line) for line in text.splitlines()) <= 100

    slower = _compare(one.run_dir, slow.run_dir)
    text = slower.stdout
    assert slower.returncode == 1, text + slower.stderr
    sentence = next(p for p in text.split("\n\n") if p.startswith("B vs A: ")).replace("\n  ", " ")
    assert sentence.startswith("B vs A: worse: TTFT p50 +"), sentence
    assert text.split("\n\n")[-1].startswith("REGRESSION: ")
