"""An SLO on a p99 needs some hundreds of requests to be answered (issue #30): a short run ends INCONCLUSIVE
(exit code 6) naming the requests needed, and ``--until-conclusive`` keeps the load on until the answer is
known, then stops by itself — long before its ``-t`` cap, on one process or with ``--processes 2`` (the
workers' records reach the master, which judges them). Real runs of ``code_completion.py`` on the built-in
emulator, judged at 95%.

The SLO, TTFT p99 ≤ 250 ms, holds by a wide margin on the emulator (TTFT ~30-80 ms): what keeps a short run
from saying so is the sample. A p99 has no upper confidence bound at 95% until the sample holds at least
368 requests (0.99ⁿ ≤ 2.5%, the interval's upper tail): fewer, and however low the p99 measured, it is
inconclusive.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.conftest import run_locust

SLO = "slos:\n  run:\n    ttft_ms: {p99: 250}\n"
#: fast requests, so a few hundred take seconds: 20 ms to the first token, 8 tokens 2 ms apart
FAST = ("--max-tokens", "8", "--wait-time", "0", "--emulator-args", "--ttft-ms 20 --itl-ms 2")
#: the fewest requests that can bound a p99 from above at 95%
LEAST_FOR_P99 = 368
CAP_S = 120
STOP_LINE = re.compile(r"tokenstorm: every SLO conclusive after ([\d,]+) requests \((\d+) s\): (.*)")


def _slo_file(tmp_path: Path) -> str:
    path = tmp_path / "slo.yaml"
    path.write_text(SLO)
    return str(path)


def _summary(run_dir: Path | None) -> dict:  # type: ignore[type-arg]
    assert run_dir is not None
    return dict(json.loads((run_dir / "summary.json").read_text()))


def test_a_short_run_cannot_answer_a_p99_and_says_how_many_requests_would(tmp_path: Path) -> None:
    short = ("-u", "1", "-r", "1", "-t", "4s")
    run = run_locust(
        tmp_path, "code_completion.py", *short, "--slo", _slo_file(tmp_path), "--confidence", "0.95", *FAST
    )
    assert run.returncode == 6, run.output[-3000:]
    summary = _summary(run.run_dir)
    slo = summary["slos"][0]
    assert summary["verdict"] == "inconclusive" and slo["result"] == "inconclusive"
    assert slo["measured"] < 250  # the p99 measured is well under the target: only the sample is too small
    assert slo["samples"] < LEAST_FOR_P99 and slo["needed_requests"] > slo["samples"]
    assert f"needs ~{slo['needed_requests']:,} requests" in run.output  # the console names the requests needed
    assert "every SLO conclusive" not in run.output


@pytest.mark.parametrize("processes", [1, 2])
def test_until_conclusive_runs_until_the_p99_is_answered_then_stops_by_itself(tmp_path: Path, processes: int) -> None:
    more = ("--processes", "2") if processes == 2 else ()
    started = time.monotonic()
    capped = ("-u", "2", "-r", "2", "-t", f"{CAP_S}s", "--until-conclusive", *more)
    slo = ("--slo", _slo_file(tmp_path), "--confidence", "0.95")
    run = run_locust(tmp_path, "code_completion.py", *capped, *slo, *FAST, timeout_s=CAP_S + 60)
    elapsed_s = time.monotonic() - started
    assert run.returncode == 0, run.output[-3000:]  # held: passed, not 4 "incomplete" for ending before -t
    stop = STOP_LINE.search(run.output)
    assert stop, run.output[-3000:]
    requests, after_s = int(stop.group(1).replace(",", "")), int(stop.group(2))
    assert requests >= LEAST_FOR_P99  # it ran as long as a p99 needs, not the 4 s of a short run
    assert re.fullmatch(r"ttft_ms p99 [\d.,]+ ms \[[\d.,]+ ms, [\d.,]+ ms\] vs <= 250 ms: held", stop.group(3))
    assert after_s < CAP_S - 30 and elapsed_s < CAP_S - 20  # it stopped by itself, well before the cap
    summary = _summary(run.run_dir)
    assert summary["verdict"] == "passed" and summary["slos"][0]["result"] == "held"
    assert summary["slos"][0]["samples"] >= requests  # the report judged every record, those after the stop too
    assert run.run_dir is not None
    meta = json.loads((run.run_dir / "run.json").read_text())
    assert meta["status"] == "finished" and "interrupted" not in meta  # a planned end
    assert meta["options"]["until_conclusive"] is True
    if processes == 2:
        assert len(meta["workers_seen"]) == 2


def test_a_load_shape_with_until_conclusive_is_refused_before_any_traffic(tmp_path: Path) -> None:
    shape = ("code_completion.py,locustfiles/shape_sweep.py", "--until-conclusive", "--confidence", "0.95")
    run = run_locust(tmp_path, *shape, *FAST)
    assert run.returncode == 3 and run.run_dir is None  # no run directory: nothing was sent
    assert "tokenstorm: --until-conclusive: the SweepShape plans the run's end itself" in run.output
    assert "Traceback" not in run.output


def test_until_conclusive_with_point_estimates_is_refused_before_any_traffic(tmp_path: Path) -> None:
    """At --confidence 0 nothing is ever inconclusive: the run would stop at its first check, 5 s in."""
    run = run_locust(tmp_path, "code_completion.py", "--until-conclusive", "--confidence", "0", "-t", "60s", *FAST)
    assert run.returncode == 3 and run.run_dir is None, run.output[-2000:]
    assert "tokenstorm: --until-conclusive needs intervals to wait for: drop --confidence 0" in run.output
    assert "Traceback" not in run.output
