"""``--api messages`` and ``--api responses`` against the emulator: a load's records timed as the emulator wrote
their token events (its truth), and every fault knob recorded in the category it gets on chat."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tokenstorm.emulator import FAULT_KINDS, EmulatorProcess
from tokenstorm.workloads.client import CompletionRequest, LlmClient
from tokenstorm.workloads.rundir import LATE_EVENT_S, SUMMARY_FILE, ErrorCategory

APIS = ("messages", "responses")
#: the category of each fault, as tests/integration/client/test_faults.py and test_oversized.py hold chat to it
EXPECTED = {
    "429": ErrorCategory.RATE_LIMITED,
    "500": ErrorCategory.SERVER_ERROR,
    "503": ErrorCategory.SERVER_ERROR,
    "echo_auth": ErrorCategory.SERVER_ERROR,
    "refuse": ErrorCategory.CONNECT,
    "drop": ErrorCategory.STREAM_DROPPED,
    "malformed": ErrorCategory.MALFORMED_CHUNK,
    "no_done": ErrorCategory.MISSING_DONE,
    "stall": ErrorCategory.TIMEOUT,
    "endless": ErrorCategory.OVERSIZED,
}
KEY = "sk-emulated-0123456789"
#: a truth stamp is held to 0.5 ms where the emulator wrote its event within this of its deadline (it runs ~0.5 ms
#: behind on a 2-core box; a write further behind was preempted, and the stamp after it may be late as well)
ON_SCHEDULE_S = 0.001


def _behind_s(t: dict[str, Any]) -> list[float]:
    """How far behind its own schedule the emulator wrote each token event (its deadline: arrival + front end +
    queue + imposed TTFT, then an ITL a token). Where it fell behind (a busy machine preempted it), the stamp it
    took after the write may be late too: the truth is held to where the emulator kept its schedule."""
    due = t["frontend_s"] + t["queue_s"] + t["imposed_ttft_s"]
    at = t["ttft_s"]
    behind = [at - due]
    for i, gap in enumerate(t["itl_s"], start=1):
        at += gap
        behind.append(at - due - i * t["imposed_itl_s"])
    return behind


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


@pytest.mark.serial  # timings against the truth: medians within 0.5 ms, p99 within the late-read threshold
@pytest.mark.parametrize("api", APIS)
def test_a_load_by_the_api_is_timed_as_the_emulator_wrote_its_token_events(
    locust_runner: Callable[..., Any], tmp_path: Path, api: str
) -> None:
    log = tmp_path / "truth.jsonl"
    with EmulatorProcess("--ttft-ms", "60", "--itl-ms", "8", "--seed", "5", "--truth-log", str(log)) as emu:
        run = locust_runner(
            "chat.py",
            "--api",
            api,
            "--chat-think-time",
            "0-0.1",
            "--wait-time",
            "0-0.1",
            "-u",
            "4",
            "-r",
            "4",
            "-t",
            "12s",  # 8 s: 114 answers, 2,166 token gaps here (40, 100, 10 TTFTs asked); its p99s want more
            "--ignore-eos",
            "--max-tokens",
            "20",
            "--host",
            emu.url,
            "--no-server-metrics",
        )
    assert run.returncode in (0, 5, 6), (
        run.returncode,
        run.output[-3000:],
    )  # 5: timing not trusted on a busy box; 6: inconclusive
    truth: dict[str, dict[str, Any]] = {row["request_id"]: row for row in map(json.loads, log.read_text().splitlines())}
    records = [r for r in run.records() if r["ok"]]
    assert len(records) >= 40, (run.returncode, run.output[-3000:])
    ttft_ms, event_ms, bracket_ms = [], [], []
    for r in records:
        t = truth[r["request_id"]]
        assert (t["api"], r["endpoint"]) == (api, f"/v1/{api}")
        assert r["output_tokens"] == t["output_tokens"] == 20 and r["prompt_tokens"] == t["prompt_tokens"]
        assert len(r["itl_gaps_s"]) == len(t["itl_s"]) == 19  # one token event a token: none empty, none merged
        on_time = [behind < ON_SCHEDULE_S for behind in _behind_s(t)]
        if r["late_events"] == 0:  # a record whose reads the client flagged late has said it may be off
            pairs = zip(r["itl_gaps_s"], t["itl_s"], on_time, on_time[1:], strict=False)
            event_ms += [abs(a - b) * 1e3 for a, b, before, after in pairs if before and after]
        # The client cannot see the first token before the emulator began writing it: its TTFT, from its send, is
        # the truth's (from the emulator's read of the request) and the request's transit.
        assert r["ttft_s"] >= t["ttft_before_write_s"] - 0.0005, (r["ttft_s"], t)
        bracket_ms.append(max(0.0, r["ttft_s"] - t["ttft_s"]) * 1e3)
        if not r["ttft_late"] and on_time[0]:
            # Without the request's transit (a busy machine delays the emulator's read of it, unseen by either
            # clock): from the stream's first event (message_start, response.created) to its first token event.
            ttft_ms.append(abs((r["ttft_s"] - r["ttfc_s"]) - (t["ttft_s"] - t["ttfc_s"])) * 1e3)
    assert len(event_ms) >= 100 and len(ttft_ms) >= 10, (len(event_ms), len(ttft_ms))
    assert (
        statistics.median(event_ms) < 0.5 and statistics.median(ttft_ms) < 0.5 and statistics.median(bracket_ms) < 0.5
    )
    fidelity = json.loads((run.run_dir / SUMMARY_FILE).read_text())["timing_fidelity"]
    if fidelity["trustworthy"]:  # as the wire test: a run on a box too busy to time says so, and is not held to it
        # The tail at the late-read threshold: a read off by less is not a late event by the product's definition.
        # Not pinned to a core as the wire test is (p99 <= 0.5 ms there): beside a busy host a few TTFTs of ~50 were
        # 0.6-0.9 ms off in a run that was trustworthy (twice in a row, then 2 passes alone at 0.5).
        bound_ms = LATE_EVENT_S * 1e3
        gaps = f"|token event gap − truth| p99 {_p99(event_ms):.3f} ms, max {max(event_ms):.3f}"
        assert _p99(event_ms) <= bound_ms, gaps
        assert _p99(ttft_ms) <= bound_ms, f"|TTFT − truth| p99 {_p99(ttft_ms):.3f} ms: {sorted(ttft_ms)[-5:]}"


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorProcess]:
    with EmulatorProcess("--ttft-ms", "20", "--itl-ms", "5") as emu:
        yield emu


def test_every_fault_knob_is_expected_here() -> None:
    assert set(EXPECTED) == set(FAULT_KINDS)


@pytest.mark.parametrize("api", ["chat", *APIS])
@pytest.mark.parametrize("fault", sorted(FAULT_KINDS))
def test_every_fault_is_categorised_as_on_chat_and_the_client_recovers(
    emulator: EmulatorProcess, fault: str, api: str
) -> None:
    ask = [{"role": "user", "content": "hello"}]
    with LlmClient(emulator.url, timeout_s=1.5, api_key=KEY) as client:
        headers = {"X-Emulator-Fault": fault}
        faulty = CompletionRequest("chat", endpoint=api, messages=ask, max_tokens=20, ignore_eos=True, headers=headers)  # type: ignore[arg-type]
        rec = client.complete(faulty, "m")
        assert not rec.ok
        assert rec.error_category == EXPECTED[fault], rec.error_detail
        assert rec.error_detail and KEY not in rec.error_detail  # echo_auth's echo is masked as on chat
        assert ("Authorization: Bearer ***" in rec.error_detail) == (fault == "echo_auth"), rec.error_detail
        plain = CompletionRequest("chat", endpoint=api, messages=ask, max_tokens=20, ignore_eos=True)  # type: ignore[arg-type]
        after = client.complete(plain, "m")  # the same user carries on
        assert after.ok, after.error_detail
        assert after.output_tokens == 20
