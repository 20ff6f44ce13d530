"""A response that never ends (a server ignoring max_tokens) is cut at the client's cap within seconds, recorded
as ``oversized`` with what was read, its connection closed, and the client's memory stays flat (issue #28).

Before the cap: the client read on until the request timeout, its memory growing (an endless non-streamed body:
8.8 GB in 5 s; a stream: ~5 MB/s of ITL gaps and text)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenstorm.emulator import EmulatorProcess
from tokenstorm.workloads.client import CompletionRequest, LlmClient
from tokenstorm.workloads.client.limits import MIN_BYTES, TOKEN_FACTOR
from tokenstorm.workloads.rundir import ErrorCategory

MAX_TOKENS = 500
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorProcess]:
    # No pacing: the endless answer comes as fast as the client reads it, the worst case for its memory.
    with EmulatorProcess("--ttft-ms", "0", "--itl-ms", "0") as emu:
        yield emu


def _peak_rss_mb() -> float:
    """The process's peak resident memory since the last :func:`_reset_peak` (VmHWM)."""
    for line in _STATUS.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/self/status")


def _reset_peak() -> float:
    _CLEAR_REFS.write_text("5")  # resets VmHWM to the current RSS (Linux)
    return _peak_rss_mb()


def _endless(stream: bool, collect_text: bool = True) -> CompletionRequest:
    return CompletionRequest(
        "chat",
        messages=[{"role": "user", "content": "count"}],
        max_tokens=MAX_TOKENS,
        stream=stream,
        collect_text=collect_text,
        headers={"X-Emulator-Fault": "endless"},
    )


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_an_endless_answer_is_cut_at_the_cap_and_the_client_memory_stays_flat(
    emulator: EmulatorProcess, stream: bool
) -> None:
    with LlmClient(emulator.url, timeout_s=20) as client:
        base_mb = _reset_peak()
        t = time.perf_counter()
        records = [client.complete(_endless(stream), "m") for _ in range(5)]
        took_s = time.perf_counter() - t
        growth_mb = _peak_rss_mb() - base_mb
        for rec in records:
            assert (rec.ok, rec.error_category) == (False, ErrorCategory.OVERSIZED), rec.error_detail
            assert rec.error_detail and "the server did not stop" in rec.error_detail
        cap = TOKEN_FACTOR * MAX_TOKENS
        if stream:
            # what was read up to the cap is kept: every token event, the server's count, the gaps between them
            assert {(r.token_events, r.output_tokens, len(r.itl_gaps_s or [])) for r in records} == {
                (cap, cap, cap - 1)
            }
            assert f"cut at {cap:,} tokens" in records[0].error_detail
            assert all(r.ttft_s is not None and r.e2e_s is not None and r.e2e_s < 5 for r in records)
        else:
            assert "MiB" in records[0].error_detail
        assert took_s < 10, f"five endless answers took {took_s:.1f} s to cut"
        assert growth_mb < 50, f"the client grew {growth_mb:.0f} MB reading endless answers"
        # The cut answer's connection was closed: the same client's next request is answered on a fresh one.
        connects = client.connects
        after = client.complete(
            CompletionRequest(
                "chat", messages=[{"role": "user", "content": "hi"}], max_tokens=5, ignore_eos=True, stream=stream
            ),
            "m",
        )
        assert after.ok and after.output_tokens == 5, after.error_detail
        assert client.connects == connects + 1


def test_a_long_answer_within_max_tokens_is_not_cut(emulator: EmulatorProcess) -> None:
    """The cap leaves room: an answer of exactly max_tokens, streamed or whole, is a success."""
    with LlmClient(emulator.url, timeout_s=20) as client:
        for stream in (True, False):
            req = CompletionRequest(
                "chat",
                messages=[{"role": "user", "content": "hi"}],
                max_tokens=4000,
                ignore_eos=True,
                stream=stream,
                collect_text=True,
            )
            rec = client.complete(req, "m")
            assert rec.ok and rec.output_tokens == 4000, rec.error_detail
            assert len(client.last_text) < MIN_BYTES
