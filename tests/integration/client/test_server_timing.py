"""The server's own timing on every record, against the emulator's truth: with ``--enable-per-request-metrics``
the emulator puts vLLM's per-request ``metrics`` on each answer, and the records must carry each part as the
emulator measured it (queue, server TTFT, decode, mean ITL), the front end (``--frontend-ms``) in the overhead and
the wait for a ``--max-num-seqs`` slot in the queue — each part where it belongs, never read into another's field."""

from __future__ import annotations

import json
import statistics
import urllib.request
from typing import Any, Literal

import pytest

from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads import RequestRecord
from tokenstorm.workloads.client import CompletionRequest, LlmClient

#: record field → the emulator's truth of it (seconds)
PARTS = {"server_queue_s": "queue_s", "server_ttft_s": "server_ttft_s", "server_decode_s": "decode_s",
         "server_itl_s": "mean_itl_s"}  # fmt: skip


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def _truth(url: str) -> dict[str, dict[str, Any]]:
    return {t["request_id"]: t for t in json.load(urllib.request.urlopen(f"{url}/emulator/truth"))}


def test_a_run_past_max_num_seqs_carries_each_server_part_as_the_emulator_measured_it(locust_runner) -> None:  # type: ignore[no-untyped-def]
    # Six users on two slots: most requests wait for one, so queue, server TTFT (30 ms), decode (11 x 4 ms) and
    # the mean ITL (4 ms) are four different figures on every record, and a part read as another fails.
    args = "--ttft-ms 30 --itl-ms 4 --prefill-us-per-token 0 --max-num-seqs 2 --frontend-ms 3"
    with EmulatorProcess(*args.split(), "--enable-per-request-metrics") as emu:
        run = locust_runner(
            "chat.py", "--chat-turns", "1", "--chat-think-time", "0-0", "--wait-time", "0", "--max-tokens", "12",
            "--ignore-eos", "-u", "6", "-r", "6", "-t", "6s", "--host", emu.url,
        )  # fmt: skip
        truth = _truth(emu.url)
    assert run.returncode == 0, run.output[-3000:]
    done = [r for r in run.records() if r["ok"]]
    assert len(done) >= 60, len(done)
    for field, part in PARTS.items():
        errors_ms = [abs(r[field] - truth[r["request_id"]][part]) * 1e3 for r in done]
        assert _p99(errors_ms) <= 0.5, (field, sorted(errors_ms)[-5:])
    # The queue is real: most requests waited for a slot, as long as the emulator says each did.
    waited = [r for r in done if truth[r["request_id"]]["queue_s"] > 0.01]
    assert len(waited) >= len(done) / 2, (len(waited), len(done))
    assert sum(r["server_queue_s"] for r in done) == pytest.approx(sum(truth[r["request_id"]]["queue_s"]
                                                                       for r in done), rel=0.001)  # fmt: skip
    # Every record's parts add up to the client's TTFT; what is left is the front end (3 ms) and the wire.
    for r in done:
        assert r["overhead_s"] == pytest.approx(r["ttft_s"] - r["server_queue_s"] - r["server_ttft_s"], abs=1e-9)
        assert r["trace_id"] == truth[r["request_id"]]["trace_id"] != ""  # the emulator got each traceparent
    on_time = [r for r in done if not r["ttft_late"]]
    beyond_ms = [(r["overhead_s"] - truth[r["request_id"]]["frontend_s"]) * 1e3 for r in on_time]
    assert len(on_time) >= len(done) / 2 and -0.5 <= statistics.median(beyond_ms) <= 1.5, sorted(beyond_ms)


def _serve(
    front_ms: int, endpoint: Literal["chat", "completions"], stream: bool
) -> tuple[list[RequestRecord], dict[str, dict[str, Any]]]:
    """Eight requests one after another (no queue) to an emulator whose front end takes ``front_ms``."""
    args = ("--ttft-ms", "20", "--itl-ms", "3", "--prefill-us-per-token", "0", "--frontend-ms", str(front_ms))
    with EmulatorProcess(*args, "--enable-per-request-metrics") as emu:
        with LlmClient(emu.url) as client:
            client.complete(CompletionRequest("chat", messages=[], max_tokens=2), "m")  # connect first
            asked = CompletionRequest(endpoint, endpoint=endpoint, messages=[{"role": "user", "content": "hi"}],
                                      prompt="hi", max_tokens=10, ignore_eos=True, stream=stream)  # fmt: skip
            records = [client.complete(asked, "m") for _ in range(8)]
        truth = _truth(emu.url)
    for r in records:
        assert r.ok and r.endpoint == asked.path, r.error_detail
    return records, truth


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_the_front_end_shows_in_the_overhead_and_nowhere_else(endpoint: Literal["chat", "completions"]) -> None:
    quick, quick_truth = _serve(0, endpoint, True)
    slow, slow_truth = _serve(25, endpoint, True)
    for records, truth in ((quick, quick_truth), (slow, slow_truth)):
        for r in records:
            t = truth[r.request_id]
            for field, part in PARTS.items():
                assert getattr(r, field) == pytest.approx(t[part], abs=5e-4), (field, r, t)
    # Alone on the server nothing queues, and the server's TTFT is the 20 ms asked for, front end or not.
    assert max(r.server_queue_s for r in quick + slow) < 0.002
    assert statistics.median(r.server_ttft_s for r in slow) == pytest.approx(0.020, abs=0.003)
    added_ms = (statistics.median(r.overhead_s for r in slow) - statistics.median(r.overhead_s for r in quick)) * 1e3
    assert added_ms == pytest.approx(25, abs=3), added_ms
    assert statistics.median(r.ttft_s - r.server_queue_s - r.server_ttft_s for r in slow) == pytest.approx(
        statistics.median(r.overhead_s for r in slow)
    )


def test_a_whole_answer_carries_the_server_parts_and_a_server_without_the_flag_none() -> None:
    records, truth = _serve(0, "completions", False)
    for r in records:
        t = truth[r.request_id]
        assert (r.server_ttft_s, r.server_decode_s) == (pytest.approx(t["server_ttft_s"]), pytest.approx(t["decode_s"]))
        assert r.server_queue_s == pytest.approx(t["queue_s"]) and r.overhead_s is None  # no first-token time
    with EmulatorProcess("--ttft-ms", "5", "--itl-ms", "1") as emu, LlmClient(emu.url) as client:
        r = client.complete(CompletionRequest("chat", messages=[{"role": "user", "content": "hi"}], max_tokens=4), "m")
    assert r.ok and r.ttft_s is not None
    assert (r.server_queue_s, r.server_ttft_s, r.server_decode_s, r.server_itl_s, r.overhead_s) == (None,) * 5
