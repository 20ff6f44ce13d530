"""chat.py against a real vLLM server: token counts and timings users will check."""

from __future__ import annotations

import pytest

from .conftest import scrape

pytestmark = pytest.mark.e2e


def test_headless_chat_run_against_real_vllm(vllm_server: str, locust_runner) -> None:  # type: ignore[no-untyped-def]
    before = scrape(vllm_server)
    run = locust_runner(
        "chat.py", "--host", vllm_server, "-u", "6", "-r", "6", "-t", "10s", "--ignore-eos", "--max-tokens", "24"
    )
    assert run.returncode == 0, run.output[-3000:]
    after = scrape(vllm_server)
    everything = run.records()
    # Requests still streaming when the run ended are kept as "cancelled", not lost.
    cancelled = [r for r in everything if r["error_category"] == "cancelled"]
    records = [r for r in everything if r["error_category"] != "cancelled"]
    assert len(records) > 10
    assert run.run_json()["simulated"] is False and run.run_json()["model"] == "tiny"
    for rec in records:
        assert rec["ok"], rec
        # ignore_eos: exactly max_tokens, as the server's usage reports
        assert rec["output_tokens"] == 24 == rec["requested_max_tokens"]
        assert 0 < rec["ttfc_s"] <= rec["ttft_s"] <= rec["e2e_s"] <= rec["done_s"]
        # vLLM coalesces tokens into one chunk when the client lags; continuous usage stats say
        # how many, and their gap is spread so there is one ITL per token after the first.
        assert rec["token_events"] <= 24 and len(rec["itl_gaps_s"]) == 23
        assert rec["tpot_s"] == pytest.approx((rec["e2e_s"] - rec["ttft_s"]) / 23)
        assert rec["prompt_tokens"] > 0
    # The server's own counters agree with the records (every request made is recorded).
    generated = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
    finished = after["vllm:request_success_total"] - before["vllm:request_success_total"]
    assert finished == len(records)
    completed_tokens = sum(r["output_tokens"] for r in records)
    assert completed_tokens <= generated <= completed_tokens + 24 * len(cancelled)
    prefilled = after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"]
    assert prefilled >= sum(r["prompt_tokens"] for r in records)
