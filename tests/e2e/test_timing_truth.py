"""The records' timings against vLLM's own: the check that the emulator cannot make.

The emulator paces itself perfectly, so a client that reads late or bunches events still
looks right against it. Here a real vLLM server (CPU build) streams to 8 users back to back,
with the server-metrics monitor on, and its own ``/metrics`` are the reference:

* no stream is read "all at once" (more than half of its gaps at 0): under 1% of records;
* every record keeps ``ttfc <= ttft <= e2e <= done`` (one clock per record);
* mean TPOT within 5% of ``vllm:request_time_per_output_token_seconds`` over the run;
* mean TTFT at or above ``vllm:time_to_first_token_seconds`` (the server starts its clock
  after receiving and tokenising the request, and stops it before the chunk is serialised and
  sent) and at most 15 ms above it.

Why 15 ms and not the 10 ms asked for in issue #9: on this 2-core machine the server's API
process itself adds 5-8 ms outside its TTFT clock at this load, for any client — a minimal
raw-socket asyncio client measured 4.6-8.0 ms, ``vllm bench serve`` 16 ms, tokenstorm 5.4-11.4 ms
over the session's runs (benchmarks/README.md). 10 ms would fail on the server's bad minutes;
15 ms still fails on the bugs found (+143 ms from bunched reads).
"""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path
from typing import Any

import pytest

from .conftest import scrape

pytestmark = pytest.mark.e2e

_PROSE = (
    "the supplier shall deliver goods within thirty days of the order date and the buyer may terminate "
    "this agreement by written notice if any party breaches its duties of confidentiality or payment"
)
_WORDS = _PROSE.split()
MAX_TOKENS = 64


def _server_mean(before: dict[str, float], after: dict[str, float], name: str) -> float:
    count = after[f"{name}_count"] - before[f"{name}_count"]
    assert count > 0, f"vLLM recorded no {name} during the run"
    return (after[f"{name}_sum"] - before[f"{name}_sum"]) / count


@pytest.fixture(scope="module")
def sharegpt_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(11)
    data = [
        {"conversations": [{"from": "human", "value": " ".join(rng.choice(_WORDS) for _ in range(45))}]}
        for _ in range(128)
    ]
    path = tmp_path_factory.mktemp("dataset") / "prompts.json"
    path.write_text(json.dumps(data))
    return path


def _chat_run(locust_runner: Any, url: str, dataset: Path, *extra: str) -> tuple[list[dict[str, Any]], Any]:
    run = locust_runner(
        "chat.py", "--host", url, "--model", "tiny", "--dataset", str(dataset), "--chat-turns", "1",
        "--chat-think-time", "0-0", "--wait-time", "0", "--max-tokens", str(MAX_TOKENS), "--ignore-eos",
        "-u", "8", "-r", "8", "-t", "12s", *extra,
    )  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    return run.records(), run


def _bunched(record: dict[str, Any]) -> bool:
    gaps = record["itl_gaps_s"]
    return bool(gaps) and sum(g == 0 for g in gaps) > len(gaps) / 2


def _check_stream_reading(records: list[dict[str, Any]], run: Any) -> list[dict[str, Any]]:
    done = [r for r in records if r["ok"]]
    assert len(done) >= 40, f"only {len(done)} successful records"
    assert all(r["output_tokens"] == MAX_TOKENS and len(r["itl_gaps_s"]) == MAX_TOKENS - 1 for r in done)
    bunched = [r for r in done if _bunched(r)]
    assert len(bunched) < 0.01 * len(done), f"{len(bunched)} of {len(done)} streams were read at once"
    for r in records:
        chain = [r[k] for k in ("ttfc_s", "ttft_s", "e2e_s", "done_s") if r[k] is not None]
        assert chain == sorted(chain), r
        assert all(g >= 0 for g in r["itl_gaps_s"]), r
        assert r["timing_violation"] is None, r
    assert json.loads((run.run_dir / "summary.json").read_text())["timing_violations"] == 0
    return done


def test_records_agree_with_vllms_own_metrics(vllm_server: str, sharegpt_file: Path, locust_runner) -> None:  # type: ignore[no-untyped-def]
    before = scrape(vllm_server)
    records, run = _chat_run(locust_runner, vllm_server, sharegpt_file)
    after = scrape(vllm_server)
    done = _check_stream_reading(records, run)
    # The monitor really scraped /metrics during the run (it is what used to stall the reads).
    server_rows = (run.run_dir / "server.jsonl").read_text().splitlines()
    assert len([r for r in server_rows if '"gap"' not in r]) >= 8

    vllm_tpot = _server_mean(before, after, "vllm:request_time_per_output_token_seconds")
    ours_tpot = statistics.fmean(r["tpot_s"] for r in done)
    assert ours_tpot == pytest.approx(vllm_tpot, rel=0.05), (ours_tpot, vllm_tpot)

    # vLLM times first tokens of every request it started, including those the run's end cancelled.
    vllm_ttft = _server_mean(before, after, "vllm:time_to_first_token_seconds")
    ours_ttft = statistics.fmean(r["ttft_s"] for r in records if r["ttft_s"] is not None)
    assert vllm_ttft <= ours_ttft <= vllm_ttft + 0.015, (ours_ttft, vllm_ttft)


def test_streams_are_read_as_they_arrive_with_two_processes(vllm_server: str, sharegpt_file: Path, locust_runner):  # type: ignore[no-untyped-def]
    records, run = _chat_run(locust_runner, vllm_server, sharegpt_file, "--processes", "2")
    done = _check_stream_reading(records, run)
    assert {r["worker_id"] for r in done} != {"local"} and len({r["worker_id"] for r in done}) == 2
