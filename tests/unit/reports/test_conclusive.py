"""What ``--until-conclusive`` asks of a run so far (``tokenstorm.reports.judging.conclusive``): every SLO held or
failed
by its interval, judged on the run directory as the final report judges it; a target measured on nothing yet
is not an answer (a workload with no request so far is no failure). Constructed run directories, and the
child process the load generator asks, over its pipe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.conftest import ROOT, make_run_dir, request
from tokenstorm.reports import load_slo_spec
from tokenstorm.reports.data.rundir import load_run
from tokenstorm.reports.judging.conclusive import answer
from tokenstorm.workloads.rundir.procs import child_env

AT_95 = {"options": {"confidence": 0.95}}


def _run(tmp_path: Path, n: int) -> Path:
    rng = np.random.default_rng(3)
    records = [request(i, float(80 + rng.uniform(0, 40))) for i in range(n)]
    return make_run_dir(tmp_path / f"run{n}", records, AT_95)


def test_a_p99_of_fifty_requests_is_open_and_of_five_hundred_is_answered(tmp_path: Path) -> None:
    spec = load_slo_spec(text="slos:\n  run:\n    ttft_ms: {p99: 250}\n")
    few = answer(load_run(_run(tmp_path, 50)), spec)
    assert not few.answered and few.requests == 50 and len(few.open) == 1
    assert few.open[0].startswith("ttft_ms p99 ") and "inconclusive, needs about" in few.open[0]
    many = answer(load_run(_run(tmp_path, 500)), spec)
    assert many.answered and many.requests == 500 and many.open == [] and many.failed == []
    assert many.held[0].endswith("vs <= 250 ms: held") and " [" in many.held[0]  # the interval it was judged by


def test_a_clear_failure_is_an_answer_and_a_target_with_nothing_measured_yet_is_not(tmp_path: Path) -> None:
    run = load_run(_run(tmp_path, 50))
    failed = answer(run, load_slo_spec(text="slos:\n  run:\n    ttft_ms: {p50: 10}\n"))
    assert failed.answered and failed.failed and failed.failed[0].endswith(": failed")
    # the records are all chat: the code workload has had no request yet — wait for it, do not fail it
    spec = load_slo_spec(text="slos:\n  run:\n    ttft_ms: {p50: 10}\n  code:\n    ttft_ms: {p50: 500}\n")
    waiting = answer(run, spec)
    assert not waiting.answered and any("not measured yet" in words for words in waiting.open)


def test_the_child_answers_each_check_on_its_pipe(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, 500)
    slo = tmp_path / "slo.yaml"
    slo.write_text("slos:\n  run:\n    ttft_ms: {p99: 250}\n")
    asks = [
        {"run_dir": str(run_dir), "slo": str(slo), "slo_text": None},
        {"run_dir": str(tmp_path / "missing"), "slo": "", "slo_text": None},
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "tokenstorm.reports.judging.conclusive"],
        input="".join(json.dumps(a) + "\n" for a in asks),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=child_env(),
    )
    first, second = (json.loads(line) for line in proc.stdout.splitlines())
    assert proc.returncode == 0 and first["answered"] is True and first["requests"] == 500
    assert "FileNotFoundError" in second["error"]  # one bad check is said, and the child goes on
