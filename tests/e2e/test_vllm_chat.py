"""chat.py against a real vLLM server: token counts and timings users will check."""

from __future__ import annotations

import pytest

from .conftest import scrape

pytestmark = pytest.mark.e2e


def test_headless_chat_run_against_real_vllm(vllm_server: str, locust_runner) -> None:  # type: ignore[no-untyped-def]
    before = scrape(vllm_server)
    run = locust_runner(
        "chat.py",
        "--chat-think-time",
        "0-0.2",
        "--wait-time",  # sessions back to back: vLLM busy at every /metrics scrape, not idle between them
        "0",
        "--host",
        vllm_server,
        "-u",
        "6",
        "-r",
        "6",
        "-t",
        "10s",
        "--ignore-eos",
        "--max-tokens",
        "24",
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
    # The run's end may cut a stream the server had just finished (its success counted, our
    # record "cancelled" before [DONE] was read): never fewer successes than records.
    assert len(records) <= finished <= len(records) + len(cancelled)
    completed_tokens = sum(r["output_tokens"] for r in records)
    assert completed_tokens <= generated <= completed_tokens + 24 * len(cancelled)
    prefilled = after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"]
    assert prefilled >= sum(r["prompt_tokens"] for r in records)

    # Server metrics were scraped from vLLM during the run, on the records' time axis.
    import json

    server = [json.loads(line) for line in (run.run_dir / "server.jsonl").read_text().splitlines()]
    samples = [s for s in server if not s.get("gap")]
    assert len(samples) >= 8
    first_req = min(r["start_epoch_s"] for r in everything)
    last_req = max(r["start_epoch_s"] for r in everything)
    assert min(s["epoch_s"] for s in samples) <= first_req + 1.5
    assert max(s["epoch_s"] for s in samples) >= last_req
    running = [s["running"] for s in samples]
    in_flight = [sum(r["start_epoch_s"] <= s["epoch_s"] <= r["start_epoch_s"] + (r["e2e_s"] or 0) for r in everything)
                 for s in samples]  # fmt: skip
    assert max(running) >= 1, list(zip(running, in_flight, strict=True))  # (vLLM's gauge, records in flight)
    gen = [s["generation_tokens"] for s in samples]
    assert gen == sorted(gen) and gen[-1] - gen[0] > 0
    assert all(0.0 <= s["kv_cache_usage"] <= 1.0 for s in samples)


def test_scraper_reads_real_vllm_metrics(vllm_server: str) -> None:
    from tokenstorm.monitors import ServerMetricsScraper

    sample = ServerMetricsScraper(vllm_server).scrape()
    assert sample.running is not None and sample.waiting is not None
    assert sample.kv_cache_usage is not None and 0.0 <= sample.kv_cache_usage <= 1.0
    assert sample.prefix_cache_queries is not None and sample.prefix_cache_hits is not None
    assert sample.preemptions is not None
    assert sample.generation_tokens and sample.prompt_tokens
    for hist in (sample.ttft_hist, sample.itl_hist, sample.e2e_hist):
        assert hist["count"] > 0 and "+Inf" in hist and hist["+Inf"] == hist["count"]


def test_every_workload_against_real_vllm_with_its_tokenizer(vllm_server: str, tiny_model, locust_runner) -> None:  # type: ignore[no-untyped-def]
    run = locust_runner(
        "mixed.py", "--host", vllm_server, "-u", "9", "-r", "9", "-t", "12s", "--max-tokens", "16",
        "--tokenizer", str(tiny_model), "--contract-prompt-tokens", "uniform:500-1500",
        "--code-prompt-tokens", "uniform:50-200", "--chat-think-time", "0-0.3",
        # agent sessions that fit the tiny model's 4,096 tokens (its server calls tools: see conftest)
        "--agent-profiles", "coding", "--agent-prompt-tokens", "uniform:500-1000", "--agent-steps", "2",
        "--agent-tool-result-tokens", "read_file=100,search_code=60,list_directory=40,edit_file=20,run_command=60",
        "--agent-tool-time", "0-0.2",
    )  # fmt: skip
    assert run.returncode == 0, run.output[-3000:]
    records = [r for r in run.records() if r["error_category"] != "cancelled"]
    assert {r["workload"] for r in records} == {"contract", "code", "chat", "agent"}
    assert all(r["ok"] for r in records), [r["error_detail"] for r in records if not r["ok"]][:3]
    for r in records:
        assert r["ttft_s"] <= r["e2e_s"]
        if r["workload"] == "agent":
            continue  # its size counts the tool schemas as JSON; the chat template renders them its own way
        # Sized with the model's own tokenizer: the server counts the same text plus its chat
        # template (~9 tokens per message here; chat sessions carry up to 7 messages), never less.
        overhead = r["prompt_tokens"] - r["requested_prompt_tokens"]
        assert 0 <= overhead <= (70 if r["workload"] == "chat" else 30), r
    contract = [r for r in records if r["workload"] == "contract"]
    assert all(500 <= r["requested_prompt_tokens"] <= 1500 for r in contract)
