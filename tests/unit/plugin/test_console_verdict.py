"""The console's last lines: the report's path, the timing fidelity, then the verdict — UNRELIABLE with exit
code 5 when the load generator read late, whatever the SLOs said — printed as a block, with no log prefix.
The outputs are built as at the end of a run (``closing.build_outputs``), in a process of its own
(Locust patches the standard library)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, make_run_dir, request

_BUILD = """
import logging, sys
from pathlib import Path
from types import SimpleNamespace
from tokenstorm.workloads.plugin.core import closing
from tokenstorm.workloads.plugin.core.context import RunContext

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stdout)
environment = SimpleNamespace(process_exit_code=None)
closing.build_outputs(environment, RunContext(is_worker=False, run_dir=Path(sys.argv[1])))
print("process exit code", environment.process_exit_code)
"""


def _last_lines(run_dir: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _BUILD, str(run_dir)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout.splitlines()


def _sentences(lines: list[str]) -> list[str]:
    """The block's lines with a wrapped sentence's continuation (indented two spaces) joined to it."""
    out: list[str] = []
    for line in lines:
        _level, _, text = line.partition(" ")
        if text.startswith("  ") and out:
            out[-1] += " " + text.strip()
        else:
            out.append(line)
    return out


def _run(tmp_path: Path, late_every: int) -> Path:
    """40 fast streamed requests of 51 token events; every ``late_every``-th read late (its first 20 events)."""
    records = [request(i, 100, token_events=51, read_lag_max_s=0.0003, late_events=20 if late_every and i %
                       late_every == 0 else 0, ttft_late=bool(late_every) and i % late_every == 0)
               for i in range(40)]  # fmt: skip
    return make_run_dir(tmp_path / f"late-{late_every}", records, {"status": "finished", "stopped_epoch_s": 1010.0})


def test_a_run_read_on_time_says_so_before_its_verdict(tmp_path: Path) -> None:
    *_, report, timing, verdict, code = _sentences(_last_lines(_run(tmp_path, 0)))
    on_time = "100% of 2,040 token events and 100% of TTFTs read on time, read lag p99 0.30 ms"
    assert report.startswith("INFO report ") and report.endswith("report.html"), report
    assert timing == f"INFO timing trustworthy: {on_time}"
    assert verdict.startswith("INFO PASSED — ") and verdict.endswith("(exit code 0)")
    assert code == "process exit code 0"


def test_a_run_read_late_is_unreliable_with_exit_code_5_whatever_its_slos_said(tmp_path: Path) -> None:
    *_, timing, verdict, code = _sentences(_last_lines(_run(tmp_path, 4)))  # 10 of 40 TTFTs late, 200 events of 2,040
    assert timing.startswith("WARNING timing NOT trustworthy: 10% of 2,040 token events and 25% of "
                             "TTFTs read late"), timing  # fmt: skip
    assert verdict.startswith("ERROR UNRELIABLE — timing not trustworthy") and "default check held" in verdict
    assert verdict.endswith("(exit code 5)"), verdict
    assert code == "process exit code 5"


def _table(lines: list[str], header_start: str) -> dict[str, list[str]]:
    """The rows under the table whose header line starts with ``header_start`` (up to a blank line)."""
    at = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = {}
    for line in lines[at + 1 :]:
        if not line.strip():
            break
        rows[line.split()[0]] = line.split()
    return rows


def test_the_console_ends_with_the_reports_own_figures_per_workload(tmp_path: Path) -> None:
    import json

    records = [request(i, 80 + i, workload="chat" if i % 2 else "code") for i in range(40)]
    run_dir = make_run_dir(tmp_path / "two", records, {"status": "finished", "stopped_epoch_s": 1010.0})
    lines = _last_lines(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    said = [line.split(" ", 1)[1] if " " in line else "" for line in lines if line.startswith("INFO")]
    counts = _table(said, " " * 22 + "        ok")
    latencies = _table(said, "ms, p50/p99")
    assert set(counts) == set(latencies) == {"all", "chat", "code"}, lines
    for name in counts:
        block = summary if name == "all" else summary["workloads"][name]
        assert int(counts[name][1]) == block["completed"] and int(counts[name][2]) == block["failed"]
        assert latencies[name][1] == f"{block['median_ttft_ms']:.1f}/{block['p99_ttft_ms']:.1f}", latencies[name]
        assert latencies[name][4] == f"{block['median_e2el_ms']:.1f}/{block['p99_e2el_ms']:.1f}"
    # the block comes before the report's path, the timing line and the verdict, which stay the last lines
    joined = _sentences(lines)
    assert joined[-3].startswith("INFO timing") and "PASSED" in joined[-2]
    block = [line.split(" ", 1)[1] for line in lines if line.startswith("INFO") and " report " not in line[:12]]
    assert all(len(line) <= 100 for line in block), lines  # the report's path is as long as it is
