"""``tokenstorm compare`` on real runs against two built-in emulators, one decoding 3x slower: an A/B run
(its first ``--targets`` target the baseline, though its name sorts last; no LOAD DIFFERS between its
twins, which shared their requests) and two runs one after the other (the summary first, the sample
sizes beside the figures, every line within 100 characters, the runs' whole names in a legend)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads.rundir import read_summary

#: checks measured latencies against a truth: runs alone (scripts/test.sh's second phase)
pytestmark = pytest.mark.serial


def _compare(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenstorm", "compare", *map(str, args)], capture_output=True, text=True, timeout=180
    )


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_compare_of_real_runs_reads_in_100_columns(locust_runner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    common = ["--chat-turns", "1", "--chat-think-time", "0-0", "--max-tokens", "16", "--no-server-metrics"]
    with (
        EmulatorProcess("--ttft-ms", "20", "--itl-ms", "4") as fast,
        EmulatorProcess("--ttft-ms", "20", "--itl-ms", "12") as slow,
    ):
        ab = locust_runner(
            "chat.py", *common, "-u", "2", "-r", "2", "-t", "6s", "--targets", f"zeta={slow.url},alpha={fast.url}"
        )
        one = locust_runner("chat.py", *common, "-u", "2", "-r", "2", "-t", "5s", "--host", fast.url)
        two = locust_runner("chat.py", *common, "-u", "2", "-r", "2", "-t", "5s", "--host", slow.url)
    for run in (ab, one, two):
        assert run.returncode in (0, 5) and run.run_dir is not None, run.output[-3000:]
    assert ab.run_dir is not None and one.run_dir is not None and two.run_dir is not None

    # The A/B run alone: zeta (given first, the slow one) is the baseline; alpha decodes faster, and no
    # word of a different load between twins that shared their requests.
    proc = _compare(ab.run_dir)
    text = proc.stdout
    assert proc.returncode in (0, 1), text + proc.stderr  # 1: a TTFT of a busy box may be worse on alpha
    assert f"A  {ab.run_dir.name}[zeta] (baseline) — {slow.url}" in text
    assert f"B  {ab.run_dir.name}[alpha] — {fast.url}" in text
    assert re.search(r"B vs A: .*better: (\w+ p\d+ [-+][\d.]+%, )*ITL p50 -\d", text.replace("\n  ", " ")), text
    assert "LOAD" not in text and _widest(text) <= 100

    # Two runs, the fast one the baseline: the slower decode is the first thing said, with the sample sizes.
    proc = _compare(one.run_dir, two.run_dir, "--html", tmp_path / "cmp.html")
    text = proc.stdout
    assert proc.returncode == 1, text + proc.stderr  # ITL 3x: a regression, exit code as before
    summary_a, summary_b = read_summary(one.run_dir), read_summary(two.run_dir)
    assert summary_a is not None and summary_b is not None
    paragraphs = text.split("\n\n")
    assert paragraphs[0].splitlines()[1] == f"A  {one.run_dir.name} (baseline)"  # the whole name
    assert f"B  {two.run_dir.name}" in paragraphs[0]
    assert paragraphs[1].startswith("B vs A: worse: ") and "ITL p50 +" in paragraphs[1].replace("\n  ", " ")
    n_row = f"n={summary_a['completed']:,}", f"n={summary_b['completed']:,}"
    assert re.search(rf"^n requests\s+{n_row[0]}\s+{n_row[1]}$", paragraphs[2], re.M), paragraphs[2]
    assert paragraphs[-1].startswith("REGRESSION: ")
    assert _widest(text) <= 100 and len(text.splitlines()) < 45
    details = _compare(one.run_dir, two.run_dir, "--details").stdout
    assert _widest(details) <= 100 and "chat: n requests" in details and "RUN CONTEXT" in details
    html = (tmp_path / "cmp.html").read_text()
    assert html.index('id="summary"') < html.index('id="context"') and "B vs A: worse: " in html
