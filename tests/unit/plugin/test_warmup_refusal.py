"""A warm-up as long as the run or longer (``--warmup``, or the SLO file's ``warmup_s``) would judge no
request: it is refused before any traffic, in one line naming both durations, exit 3 — not a run that ends
in "run failed" after it sent its load."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import LOCUST, ROOT
from tokenstorm.workloads.plugin.core.options import warmup_problem


def test_a_warmup_shorter_than_the_run_or_a_run_of_no_set_length_is_fine() -> None:
    assert warmup_problem(5.0, 0.0, "", 30.0) is None
    assert warmup_problem(0.0, 29.0, "slo.yaml", 30.0) is None
    assert warmup_problem(300.0, 30.0, "slo.yaml", None) is None  # web UI or a load shape: no -t


@pytest.mark.parametrize(
    ("warmup_s", "slo_warmup_s", "run_time_s", "says"),
    [
        (0.0, 30.0, 30.0, "the warm-up (warmup_s 30 s in the SLO file slo/slo.yaml) is as long as the run (-t 30 s)"),
        (300.0, 30.0, 60.0, "the warm-up (--warmup 300 s) is longer than the run (-t 60 s)"),
    ],
)
def test_a_warmup_as_long_as_the_run_names_both_durations(
    warmup_s: float, slo_warmup_s: float, run_time_s: float, says: str
) -> None:
    problem = warmup_problem(warmup_s, slo_warmup_s, "slo/slo.yaml", run_time_s)
    assert problem is not None and problem.startswith(says) and "\n" not in problem
    assert problem.endswith("no request would be judged; run longer or shorten the warm-up")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--slo", "slo.yaml", "-t", "30s"], "tokenstorm: the warm-up (warmup_s 30 s in the SLO file slo.yaml) is "
                                             "as long as the run (-t 30 s)"),
        (["--warmup", "5m", "-t", "1m"], "tokenstorm: the warm-up (--warmup 300 s) is longer than the run (-t 60 s)"),
    ],
)  # fmt: skip
def test_locust_refuses_it_before_any_traffic(args: list[str], says: str, tmp_path: Path) -> None:
    (tmp_path / "slo.yaml").write_text("warmup_s: 30\nslos:\n  run:\n    error_rate: {max: 1%}\n")
    proc = subprocess.run([*LOCUST, "-f", str(ROOT / "locustfiles" / "chat.py"), "--headless", "-u", "1", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-2000:]
    last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1]
    assert last.startswith(says), proc.stderr[-2000:]
    assert "emulator" not in proc.stderr.lower() and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()  # no run directory: nothing was started, nothing sent
