"""The records' timings against vLLM's own: the check that the emulator cannot make.

The emulator paces itself perfectly, so a client that reads late or bunches events still
looks right against it. Here a real vLLM server (CPU build) that has already served a few
thousand streams (issue #19: a server that had served traffic showed what a fresh one hid)
streams to 8 users back to back, with the server-metrics monitor on, and its own ``/metrics``
are the reference. On this 2-core machine vLLM itself takes ~1.6 cores, so whether the load
generator reads on time varies from run to run. What must hold either way — never silently wrong:

* when the run says its timing is trustworthy (``timing_fidelity``, exit code 0): mean TPOT within
  5% of ``vllm:request_time_per_output_token_seconds``, mean TTFT at or above
  ``vllm:time_to_first_token_seconds`` and at most 15 ms above it, and at most 1% of streams read
  "at once" (more than half of their gaps at 0) — the product's own bound
  (``FIDELITY_MAX_READ_AT_ONCE_SHARE``), here counted from the gaps, not from its flags;
* when it is not: the verdict is ``unreliable`` and the exit code 5, and every stream read at once
  is a record that counts late events;
* every record keeps ``ttfc <= ttft <= e2e <= done`` (one clock per record).

So that the first branch is never skipped, one run puts the load generator on a core of its own (vLLM, every
thread, on the other): there it must read on time and agree (measured here: TTFT +5.6 to +6.5 ms over vLLM's,
TPOT within 1%, 99.6-99.9% of events read on time, 4 runs of 4).

Why 15 ms and not the 10 ms asked for in issue #9: on this 2-core machine the server's API
process itself adds 5-8 ms outside its TTFT clock at this load, for any client — a minimal
raw-socket asyncio client measured 4.6-8.0 ms, ``vllm bench serve`` 10-16 ms, tokenstorm 3.5-11.4 ms
over the sessions' runs (benchmarks/README.md). 15 ms still fails on the bugs found (+143 ms
from bunched reads).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from .conftest import CHAT_TOKENS, client_core_of_its_own, scrape

pytestmark = pytest.mark.e2e

MAX_TOKENS = CHAT_TOKENS


def _server_mean(before: dict[str, float], after: dict[str, float], name: str) -> float:
    count = after[f"{name}_count"] - before[f"{name}_count"]
    assert count > 0, f"vLLM recorded no {name} during the run"
    return (after[f"{name}_sum"] - before[f"{name}_sum"]) / count


def _chat_run(
    locust_runner: Any, url: str, dataset: Path, *extra: str, run_time: str = "12s"
) -> tuple[list[dict[str, Any]], Any]:
    run = locust_runner(
        "chat.py", "--host", url, "--model", "tiny", "--dataset", str(dataset), "--chat-turns", "1",
        "--chat-think-time", "0-0", "--wait-time", "0", "--max-tokens", str(MAX_TOKENS), "--ignore-eos",
        "-u", "8", "-r", "8", "-t", run_time, "--timing-verdict", "fail", *extra,
    )  # fmt: skip
    # 0: the SLOs held and the timing is trustworthy; 5: the client says its timing was not.
    assert run.returncode in (0, 5), run.output[-3000:]
    return run.records(), run


def _bunched(record: dict[str, Any]) -> bool:
    gaps = record["itl_gaps_s"]
    return bool(gaps) and sum(g == 0 for g in gaps) > len(gaps) / 2


def _check_stream_reading(records: list[dict[str, Any]], run: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The checks every run passes, trustworthy or not; returns the successful records and summary.json."""
    done = [r for r in records if r["ok"]]
    assert len(done) >= 40, f"only {len(done)} successful records"
    assert all(r["output_tokens"] == MAX_TOKENS and len(r["itl_gaps_s"]) == MAX_TOKENS - 1 for r in done)
    for r in records:
        chain = [r[k] for k in ("ttfc_s", "ttft_s", "e2e_s", "done_s") if r[k] is not None]
        assert chain == sorted(chain), r
        assert all(g >= 0 for g in r["itl_gaps_s"]), r
        assert r["timing_violation"] is None, r
    summary = json.loads((run.run_dir / "summary.json").read_text())
    assert summary["timing_violations"] == 0
    fidelity = summary["timing_fidelity"]
    # A stream read at once is never passed off as measured: its record owns up to it.
    unflagged = [r for r in done if _bunched(r) and not r["late_events"]]
    assert not unflagged, f"{len(unflagged)} streams read at once count no late event"
    if fidelity["trustworthy"]:
        assert run.returncode == 0 and summary["verdict"] == "passed", (summary["verdict"], fidelity["reason"])
        bunched = [r for r in done if _bunched(r)]
        streams = [r for r in records if r["ttft_s"] is not None]  # what the bound counts: cancelled ones too
        assert len(bunched) <= 0.01 * len(streams), f"{len(bunched)} of {len(streams)} streams were read at once"
    else:
        assert run.returncode == 5 and summary["verdict"] == "unreliable", (run.returncode, summary["verdict"])
        assert "not trustworthy" in run.output, run.output[-2000:]  # the console's last lines say it
    return done, summary


def test_records_agree_with_vllms_own_metrics_or_say_why_not(served_vllm: str, prompts: Path,
                                                              locust_runner) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    before = scrape(served_vllm)
    records, run = _chat_run(locust_runner, served_vllm, prompts)
    after = scrape(served_vllm)
    _done, summary = _check_stream_reading(records, run)
    # The monitor really scraped /metrics during the run (it is what used to stall the reads).
    server_rows = (run.run_dir / "server.jsonl").read_text().splitlines()
    # Not one per second: on a 2-core box beside vLLM a scrape can take longer than its interval (5 in a 12 s run
    # was seen), but several, from the run's first seconds to its last.
    scraped = [json.loads(r)["epoch_s"] for r in server_rows if '"gap"' not in r]
    assert len(scraped) >= 3 and max(scraped) - min(scraped) >= 5, scraped

    accurate, figures = _agreement(before, after, records, summary)
    # Never silently wrong: figures off vLLM's are a run that says its timing is not trustworthy.
    assert accurate or not summary["timing_fidelity"]["trustworthy"], figures
    if summary["timing_fidelity"]["trustworthy"]:
        assert accurate, figures


def test_on_a_core_of_its_own_the_client_reads_on_time_and_agrees_with_vllm(
    served_vllm: str, prompts: Path, locust_runner: Any
) -> None:
    """The branch above that a busy run may skip, forced: the load generator on a core vLLM does not use (vLLM on
    the other), so it reads on time, says so (exit 0), and its means agree with vLLM's."""
    with client_core_of_its_own(served_vllm):
        before = scrape(served_vllm)
        records, run = _chat_run(locust_runner, served_vllm, prompts)
        after = scrape(served_vllm)
    _done, summary = _check_stream_reading(records, run)
    accurate, figures = _agreement(before, after, records, summary)
    assert summary["timing_fidelity"]["trustworthy"] and run.returncode == 0, figures
    assert accurate, figures


def _agreement(
    before: dict[str, float], after: dict[str, float], records: list[dict[str, Any]], summary: dict[str, Any]
) -> tuple[bool, str]:
    """Whether the records' mean TPOT and TTFT agree with vLLM's over the run (the bounds of this module's
    docstring), and the figures."""
    done = [r for r in records if r["ok"]]
    vllm_tpot = _server_mean(before, after, "vllm:request_time_per_output_token_seconds")
    ours_tpot = statistics.fmean(r["tpot_s"] for r in done)
    # vLLM times first tokens of every request it started, including those the run's end cancelled.
    vllm_ttft = _server_mean(before, after, "vllm:time_to_first_token_seconds")
    ours_ttft = statistics.fmean(r["ttft_s"] for r in records if r["ttft_s"] is not None)
    accurate = ours_tpot == pytest.approx(vllm_tpot, rel=0.05) and vllm_ttft <= ours_ttft <= vllm_ttft + 0.015
    figures = (
        f"TPOT {ours_tpot * 1000:.2f} vs vLLM {vllm_tpot * 1000:.2f} ms, TTFT {ours_ttft * 1000:.2f} vs "
        f"{vllm_ttft * 1000:.2f} ms; {summary['timing_fidelity']['reason']}"
    )
    print(f"timing truth: {figures}")  # the figures behind the verdict, in CI's log (pytest -s / -rA)
    return accurate, figures


def test_streams_are_read_as_they_arrive_with_two_processes(served_vllm: str, prompts: Path,
                                                            locust_runner) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    records, run = _chat_run(locust_runner, served_vllm, prompts, "--processes", "2")
    done, _summary = _check_stream_reading(records, run)
    assert {r["worker_id"] for r in done} != {"local"} and len({r["worker_id"] for r in done}) == 2
