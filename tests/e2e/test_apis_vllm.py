"""``--api messages`` and ``--api responses`` against a real vLLM server (CPU build), checked against its ``/metrics``
and against what it streamed (read by a recording proxy in front of it, parsed here without the client's readers).

* A chat run on each API, 64 output tokens with ``ignore_eos``: every record's output tokens are the server's usage
  (64 on Responses; vLLM 0.32's Messages route drops ``ignore_eos``, so a Messages answer may end sooner, and its
  count is still the usage's), TTFT <= E2E, the gaps add up from TTFT to E2E, the records' tokens add up to vLLM's
  ``generation_tokens`` delta, and mean TTFT and TPOT agree with vLLM's own as in test_timing_truth.py — or the
  run says its timing is not trustworthy (exit 5).
* An agent run on Messages: each step's ``tool_use`` blocks carry the ids vLLM streamed to the step before, and each
  ``tool_result`` names one of them, in order (the body the client sent, read at the proxy).
"""

from __future__ import annotations

import itertools
import json
import random
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.proxy import RecordingProxy

from .conftest import scrape

pytestmark = pytest.mark.e2e

MAX_TOKENS = 64
_PROSE = "the supplier shall deliver goods within thirty days of the order date unless the buyer terminates"
RESULTS = "read_file=200,search_code=80,list_directory=60,edit_file=20,run_command=80"
#: single-turn chats back to back, 64 tokens each, 4 users for 5 s: ~140 answers (276–289 in 10 s here)
CHAT_FLAGS = ("--chat-turns", "1", "--chat-think-time", "0-0", "--wait-time", "0", "--ignore-eos")
CHAT_FLAGS += ("--timing-verdict", "fail", "--max-tokens", str(MAX_TOKENS), "-u", "4", "-r", "4", "-t", "5s")
#: two-step coding sessions (a call, then its result) that fit the tiny model's 4,096 tokens, 3 users for 5 s
#: (176 answers in 12 s here)
AGENT_FLAGS = ("--agent-tool-choice", "required", "--agent-profiles", "coding", "--agent-steps", "2")
AGENT_FLAGS += ("--agent-prompt-tokens", "600", "--agent-output-tokens", "96", "--agent-tool-time", "0")
AGENT_FLAGS += ("--wait-time", "0", "-u", "3", "-r", "3", "-t", "5s", "--stop-timeout", "30")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(7)
    rows = [
        {"conversations": [{"from": "human", "value": " ".join(rng.choice(_PROSE.split()) for _ in range(45))}]}
        for _ in range(64)
    ]
    path = tmp_path_factory.mktemp("dataset") / "prompts.json"
    path.write_text(json.dumps(rows))
    return path


def _server_mean(before: dict[str, float], after: dict[str, float], name: str) -> float:
    count = after[f"{name}_count"] - before[f"{name}_count"]
    assert count > 0, f"vLLM recorded no {name} during the run"
    return (after[f"{name}_sum"] - before[f"{name}_sum"]) / count


def _usage_output_tokens(events: list[dict[str, Any]], api: str) -> int | None:
    """The output tokens the server's own usage says, from the streamed events."""
    for e in reversed(events):
        if api == "messages" and e.get("type") == "message_delta":
            return int(e["usage"]["output_tokens"])
        if api == "responses" and e.get("type") in ("response.completed", "response.incomplete"):
            return int(e["response"]["usage"]["output_tokens"])
    return None


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_a_chat_run_on_the_api_agrees_with_vllms_usage_and_its_own_timing(
    api: str, vllm_server: str, dataset: Path, locust_runner: Any
) -> None:
    before = scrape(vllm_server)
    run = locust_runner(
        "chat.py",
        *("--api", api, "--host", vllm_server, "--model", "tiny", "--dataset", str(dataset)),
        *CHAT_FLAGS,
    )
    after = scrape(vllm_server)
    # 0: the SLOs held and the timing is trustworthy; 5: the client says its timing was not.
    assert run.returncode in (0, 5), run.output[-3000:]
    records = run.records()
    done = [r for r in records if r["ok"]]
    cancelled = [r for r in records if r["error_category"] == "cancelled"]
    failed = [r for r in records if not r["ok"] and r["error_category"] != "cancelled"]
    assert len(done) >= 20 and not failed, [
        (r["error_category"], r["error_detail"], r["output_tokens"]) for r in failed
    ]
    assert {r["endpoint"] for r in records} == {f"/v1/{api}"}
    for r in done:
        assert r["requested_max_tokens"] == MAX_TOKENS and 1 <= r["output_tokens"] <= MAX_TOKENS, r
        if api == "responses":  # ignore_eos honoured; Messages ends at the model's end of text when it comes
            assert r["output_tokens"] == MAX_TOKENS and r["finish_reason"] == "length", r
        assert 0 < r["ttfc_s"] <= r["ttft_s"] <= r["e2e_s"] <= r["done_s"], r
        # One gap per token event after the first, together the time from the first token to the last.
        assert len(r["itl_gaps_s"]) == r["token_events"] - 1 and r["token_events"] <= r["output_tokens"], r
        assert sum(r["itl_gaps_s"]) == pytest.approx(r["e2e_s"] - r["ttft_s"], abs=1e-6 * r["token_events"]), (
            r
        )  # µs each
        if r["output_tokens"] > 1:
            assert r["tpot_s"] == pytest.approx((r["e2e_s"] - r["ttft_s"]) / (r["output_tokens"] - 1)), r
        else:  # a Messages answer may end at the model's end of text after one token: no TPOT to measure
            assert r["tpot_s"] is None, r
        assert r["prompt_tokens"] > 0 and r["cached_tokens"] is not None, r
    assert sum(r["output_tokens"] == MAX_TOKENS for r in done) >= 0.7 * len(done)
    # The server's counters: every token it generated is in a record (or in a stream the run's end cut).
    generated = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
    tokens = sum(r["output_tokens"] for r in done)
    assert tokens <= generated <= tokens + MAX_TOKENS * len(cancelled) + 1  # +1: the pre-flight's probe
    finished = after["vllm:request_success_total"] - before["vllm:request_success_total"]
    assert len(done) <= finished <= len(done) + len(cancelled) + 1

    # Mean TTFT and TPOT against vLLM's own histograms, as test_timing_truth.py judges chat.
    vllm_tpot = _server_mean(before, after, "vllm:request_time_per_output_token_seconds")
    vllm_ttft = _server_mean(before, after, "vllm:time_to_first_token_seconds")
    # vLLM's histogram takes a one-token answer's TPOT as 0 (vllm/v1/metrics/stats.py): so does this mean.
    ours_tpot = statistics.fmean(r["tpot_s"] or 0.0 for r in done)
    ours_ttft = statistics.fmean(r["ttft_s"] for r in records if r["ttft_s"] is not None)
    summary = json.loads((run.run_dir / "summary.json").read_text())
    trustworthy = summary["timing_fidelity"]["trustworthy"]
    accurate = ours_tpot == pytest.approx(vllm_tpot, rel=0.05) and vllm_ttft <= ours_ttft <= vllm_ttft + 0.015
    figures = (
        f"{api}: TPOT {ours_tpot * 1000:.2f} vs vLLM {vllm_tpot * 1000:.2f} ms, TTFT {ours_ttft * 1000:.2f} vs "
        f"{vllm_ttft * 1000:.2f} ms; {summary['timing_fidelity']['reason']}"
    )
    print(f"api timing truth: {figures}")
    assert accurate or not trustworthy, figures
    assert (run.returncode == 5) == (not trustworthy), (run.returncode, figures)


def _messages_call_ids(events: list[dict[str, Any]]) -> list[str]:
    return [
        e["content_block"]["id"]
        for e in events
        if e.get("type") == "content_block_start" and e["content_block"].get("type") == "tool_use"
    ]


def test_agent_sessions_on_messages_send_each_tool_result_with_the_id_of_its_call(
    vllm_server: str, locust_runner: Any
) -> None:
    proxy = RecordingProxy(vllm_server)
    try:
        run = locust_runner(
            "agent.py",
            *("--api", "messages", "--host", proxy.url, "--model", "tiny", "--agent-tool-result-tokens", RESULTS),
            *AGENT_FLAGS,
        )
    finally:
        proxy.close()
    # The default SLOs may break on a CPU server (1); a busy 2-core box may make the clock unreliable (5).
    assert run.returncode in (0, 1, 5), run.output[-3000:]
    done = [r for r in run.records() if r["workload"] == "agent" and r["ok"]]
    assert len(done) >= 4, [r["error_detail"] for r in run.records() if not r["ok"]][:3]
    calls: dict[str, list[str]] = {}  # request id -> the tool_use ids vLLM streamed to it
    for r in done:
        events = proxy.events(r["request_id"])
        calls[r["request_id"]] = _messages_call_ids(events)
        assert proxy.bodies[r["request_id"]]["tool_choice"] == {"type": "any"}
        assert r["tool_calls"] == len(calls[r["request_id"]]) >= 1, r
        assert r["output_tokens"] == _usage_output_tokens(events, "messages"), r
    sessions: dict[str, list[dict[str, Any]]] = {}
    for r in done:
        sessions.setdefault(r["session_id"], []).append(r)
    follow_ups = 0
    for steps in sessions.values():
        steps.sort(key=lambda r: r["step"])
        for prev, r in itertools.pairwise(steps):
            messages = proxy.bodies[r["request_id"]]["messages"]
            i = max(k for k, m in enumerate(messages) if m["role"] == "assistant")
            uses = [b for b in messages[i]["content"] if b["type"] == "tool_use"]
            assert [b["id"] for b in uses] == calls[prev["request_id"]]
            (answer,) = messages[i + 1 :]  # one user turn holds every call's result
            assert answer["role"] == "user"
            assert [b["tool_use_id"] for b in answer["content"]] == [b["id"] for b in uses]
            assert all(b["type"] == "tool_result" and b["content"] for b in answer["content"])
            follow_ups += 1
    assert follow_ups >= 2
