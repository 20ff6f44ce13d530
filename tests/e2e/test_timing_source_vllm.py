"""A starved client against real vLLM: the second clock sees it, and ``--timing-source auto`` still answers.

Issue #19's contention recipe: the load generator pinned to one core beside four busy loops (each spins 4 ms,
sleeps 0.3 ms), vLLM (CPU build, ``--enable-per-request-metrics``: the session server) held to the other core
meanwhile, as the wire tests keep the emulator apart (beside the loops it would be starved too, and a server slowed
to a trickle of tokens leaves a starved client time to read them).
Against the session server after its warm-up (``served_vllm``: 40 s of chat at 160 users, 64-token answers):

* a quiet run (no neighbours) gives the residuals' baseline;
* the contended run, made with ``--timing-source auto``, ends 0 or 1, its latency judged on vLLM's own timing,
  and the console, summary.json, JUnit and the report say so (never as what users saw);
* the same records judged with the default (``--timing-source client``, rebuilt by ``python -m tokenstorm.reports
  build``, which reads the run's options from run.json) are ``unreliable`` (exit 5), and their residuals — the
  overhead outside vLLM's engine per record (TTFT − queue − server TTFT) — never contradict the flags: where the
  client flagged its first token late they are larger (the server's clock agrees) or within the on-time ones'
  spread (it cannot tell; kernel receive stamps keep most late reads' first-token time), and the verdict quotes
  which. The quiet run's residuals are printed beside the starved run's; they are not asserted apart (see the
  test's last lines).

A client that read on time beside four loops anyway (the machine's other load varies) is given more, twice.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import run_locust
from tests.wire.procs import BusyNeighbours, two_cpus
from tokenstorm.reports.judging.formats import ms

pytestmark = pytest.mark.e2e

SLO = "slos:\n  '*':\n    ttft_ms: {p95: 60000}\n    tpot_ms: {p95: 10000}\n"
SAID = "latency judged on the server's timing, not what users saw"
_CPUS = two_cpus()


def _server_threads(url: str) -> list[int]:
    """Every thread of the server listening at ``url`` and of its child processes (vLLM's engine core)."""
    port = int(url.rsplit(":", 1)[1])
    pids = {c.pid for c in psutil.net_connections("tcp") if c.laddr and c.laddr.port == port and c.pid}
    procs = [psutil.Process(pid) for pid in pids]
    procs += [child for p in list(procs) for child in p.children(recursive=True)]
    return [t.id for p in procs for t in p.threads()]


@contextmanager
def _starved(cpu: int, server_cpu: int, url: str, loops: int) -> Iterator[None]:
    """This process (and the load generator it starts) on core ``cpu`` beside ``loops`` busy loops, the server
    on core ``server_cpu`` (as the wire tests keep the emulator apart): the client is starved, not the server."""
    before = os.sched_getaffinity(0)
    threads = {tid: os.sched_getaffinity(tid) for tid in _server_threads(url)}
    assert threads, f"no process listens at {url}"
    with BusyNeighbours(loops, cpu, duration_s=120):
        for tid in threads:
            with suppress(ProcessLookupError):
                os.sched_setaffinity(tid, {server_cpu})
        os.sched_setaffinity(0, {cpu})
        try:
            yield
        finally:
            os.sched_setaffinity(0, before)
            for tid, cpus in threads.items():
                with suppress(ProcessLookupError):
                    os.sched_setaffinity(tid, cpus)


def _chat(tmp_path: Path, url: str, prompts: Path, seconds: int, *extra: str) -> tuple[Any, dict[str, Any]]:
    """8 users of 64-token chat answers for ``seconds``; the run and its summary.json."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    slo = tmp_path / "slo.yaml"
    slo.write_text(SLO)
    args = f"--host {url} --model tiny --dataset {prompts} --chat-turns 1 --chat-think-time 0-0 --wait-time 0"
    args += f" --max-tokens 64 --ignore-eos -u 8 -r 8 -t {seconds}s --timing-verdict fail --slo {slo}"
    run = run_locust(tmp_path, "chat.py", *args.split(), *extra)
    assert run.run_dir is not None and (run.run_dir / "summary.json").exists(), run.output[-3000:]
    return run, json.loads((run.run_dir / "summary.json").read_text())


def _overhead_ms(summary: dict[str, Any], stat: str) -> float:
    clock = summary["timing_fidelity"]["second_clock"]
    assert clock is not None and clock["records"] >= 0.99 * summary["timing_fidelity"]["ttft_records"], clock
    return float(clock["overhead_ms"][stat])


@pytest.mark.skipif(_CPUS is None, reason="needs two CPU cores: the starved client's and the server's")
def test_a_starved_client_is_unreliable_seen_by_the_server_and_judged_on_its_timing_with_auto(
    served_vllm: str, prompts: Path, tmp_path: Path
) -> None:
    assert _CPUS is not None
    with _starved(_CPUS[0], _CPUS[1], served_vllm, 0):  # the same cores, no neighbours
        _quiet_run, quiet = _chat(tmp_path / "quiet", served_vllm, prompts, 8)
    for loops in (4, 6, 8):  # a client that read on time anyway (the machine's load varies) is given more
        with _starved(_CPUS[0], _CPUS[1], served_vllm, loops):
            run, auto = _chat(tmp_path / f"starved{loops}", served_vllm, prompts, 15, "--timing-source", "auto")
        if auto["completed"] and not auto["timing_fidelity"]["trustworthy"]:
            break
    assert run.run_dir is not None
    figures = (
        f"overhead p50/p99 quiet {_overhead_ms(quiet, 'p50'):.1f}/{_overhead_ms(quiet, 'p99'):.1f} ms, starved "
        f"({loops} loops) {_overhead_ms(auto, 'p50'):.1f}/{_overhead_ms(auto, 'p99'):.1f} ms; "
        f"quiet: {quiet['timing_fidelity']['reason']}; starved: {auto['timing_fidelity']['reason']}"
    )
    print(f"second clock: {figures}")
    assert not auto["timing_fidelity"]["trustworthy"], figures
    # auto: judged on vLLM's own timing, 0 or 1 (here the generous SLOs hold), and every output says so.
    assert run.returncode in (0, 1) and auto["verdict"] in ("passed", "failed"), run.output[-3000:]
    assert auto["timing_source_used"] == "server" and SAID in auto["verdict_reason"]
    assert SAID in " ".join(run.output.split()), run.output[-3000:]  # the console's verdict line (wrapped)
    case = ET.parse(run.run_dir / "junit.xml").getroot().find(".//testcase[@name='timing_fidelity']")
    assert case is not None and case.find("failure") is None and case.find("skipped") is not None
    assert 'id="timing-source"' in (run.run_dir / "report.html").read_text()
    # The default on the same records: unreliable, exit 5 — and the server's clock saw the late reads.
    default = tmp_path / "default"
    shutil.copytree(run.run_dir, default)
    meta = json.loads((default / "run.json").read_text())
    meta["options"]["timing_source"] = "client"
    (default / "run.json").write_text(json.dumps(meta))
    build = subprocess.run(
        [sys.executable, "-m", "tokenstorm.reports", "build", str(default)], capture_output=True, text=True, timeout=180
    )
    assert build.returncode == 5, build.stdout[-2000:] + build.stderr[-2000:]
    assert json.loads((default / "summary.json").read_text())["verdict"] == "unreliable"
    # The server's clock never contradicts the late-read flags. Whether it sees them depends on the run: the first
    # tokens flagged late had the larger overhead by +7.9 and +8.5 ms at the median in two runs here, and by
    # -0.2 ms (19.3 vs 19.5, "cannot tell") in CI's: kernel receive stamps keep most first tokens' time, so a late
    # read moves the overhead only when the stamp is missing, and the front end's own spread is as large. Set
    # against the quiet run, the run-level overhead is not reliably apart either (p50 21.0 vs 21.1 ms, p99 45 vs
    # 93 ms in one run; p50 25.5 vs 18.4, p99 64 vs 51 in the next).
    clock = auto["timing_fidelity"]["second_clock"]
    assert clock["compared"] in ("ttft", "itl", ""), figures
    assert clock["agrees"] is not False, figures
    if clock["compared"] == "ttft":  # the comparison is quoted where the verdict is read
        reason = auto["timing_fidelity"]["reason"]
        assert f"TTFTs read late had overhead p50 {ms(clock['late_overhead_p50_ms'])} ms" in reason, figures
        verdict = "agrees with the late-read flags" if clock["agrees"] else "cannot tell them apart"
        assert verdict in reason, figures
