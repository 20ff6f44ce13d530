"""The stall timeout against the emulator: a stream that goes quiet mid-way fails as ``stall`` with
the tokens it had timed, a pause shorter than the stall timeout does not, and a long stream whose
tokens keep coming is never cut by it."""

from __future__ import annotations

import pytest

from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads.client import CompletionRequest, LlmClient

TOKENS = 10
ITL_S = 0.1
STALL_S = 1.5  # how long the emulator's `stall` fault goes quiet, half way through the stream


@pytest.fixture(scope="module")
def emulator():  # type: ignore[no-untyped-def]
    with EmulatorProcess("--ttft-ms", "30", "--itl-ms", str(ITL_S * 1000), "--stall-s", str(STALL_S)) as emu:
        yield emu


def _request(fault: str | None = None) -> CompletionRequest:
    return CompletionRequest("chat", messages=[{"role": "user", "content": "hello"}], max_tokens=TOKENS,
                             ignore_eos=True, headers={"X-Emulator-Fault": fault} if fault else {})  # fmt: skip


def test_a_stream_that_goes_quiet_fails_as_a_stall_with_its_tokens_kept(emulator) -> None:  # type: ignore[no-untyped-def]
    with LlmClient(emulator.url, stall_timeout_s=0.5, timeout_s=60) as client:
        rec = client.complete(_request("stall"), "m")
        assert (rec.ok, rec.error_category) == (False, "stall"), rec.error_detail
        half = TOKENS // 2  # the emulator stalls before its chunk number TOKENS // 2
        assert rec.error_detail == f"no byte for 0.5 s (stall timeout) after {half} tokens"
        assert rec.token_events == half and rec.output_tokens == half and len(rec.itl_gaps_s) == half - 1
        assert all(gap == pytest.approx(ITL_S, abs=0.03) for gap in rec.itl_gaps_s), rec.itl_gaps_s
        # Given up 0.5 s after the last token, long before the emulator would have gone on.
        last_token_s = rec.ttft_s + sum(rec.itl_gaps_s)
        assert 0.5 <= rec.e2e_s - last_token_s < 0.7, (rec.e2e_s, last_token_s)
        assert not rec.timing_violation
        # The next request streams for ~0.9 s, well past the stall timeout, and is not cut.
        after = client.complete(_request(), "m")
        assert after.ok, after.error_detail
        assert after.output_tokens == TOKENS and after.e2e_s > 0.8


def test_a_pause_shorter_than_the_stall_timeout_is_waited_out(emulator) -> None:  # type: ignore[no-untyped-def]
    with LlmClient(emulator.url, stall_timeout_s=STALL_S + 1.5) as client:
        rec = client.complete(_request("stall"), "m")
    assert rec.ok, rec.error_detail
    assert rec.output_tokens == TOKENS
    assert max(rec.itl_gaps_s) == pytest.approx(STALL_S + ITL_S, abs=0.1)
