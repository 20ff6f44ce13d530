"""Agent sessions against a real vLLM server started with tool calling (``--enable-auto-tool-choice
--tool-call-parser hermes``) and ``--enable-prompt-tokens-details``, checked against what it streamed and its own
``/metrics``: what each record says of its tool calls and its cached prompt tokens is what the server
streamed (read by a recording proxy in front of it, parsed here without the client's parser); each follow-up
step carries back the previous step's calls and a ``tool`` message per call with its id; the records'
cached tokens add up to vLLM's ``prefix_cache_hits`` delta, and the report's hit rate is the ``/metrics`` delta's.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from tests.fakes.proxy import RecordingProxy

from .conftest import scrape

pytestmark = pytest.mark.e2e

HITS, QUERIES = "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"
RESULTS = "read_file=200,search_code=80,list_directory=60,edit_file=20,run_command=80"


def test_agent_sessions_on_vllm_match_what_it_streamed_and_its_prefix_cache(vllm_server: str,
                                                                           locust_runner: Any) -> None:  # fmt: skip
    before = scrape(vllm_server)
    proxy = RecordingProxy(vllm_server)
    try:
        run = locust_runner(
            "agent.py", "--host", proxy.url, "--model", "tiny", "--agent-tool-choice", "required",
            "--agent-profiles", "coding", "--agent-steps", "3", "--agent-prompt-tokens", "700",
            "--agent-tool-result-tokens", RESULTS, "--agent-output-tokens", "48", "--agent-tool-time", "0",
            "--wait-time", "0", "-u", "3", "-r", "3", "-t", "6s", "--stop-timeout", "60",  # 450 answers in 20 s
            "--monitor-interval", "0.5",
        )  # fmt: skip
        after = scrape(vllm_server)
    finally:
        proxy.close()
    # The default SLOs may break on a CPU server (1); a busy 2-core box may make the clock unreliable (5).
    assert run.returncode in (0, 1, 5), run.output[-3000:]
    records = [r for r in run.records() if r["workload"] == "agent"]
    done = [r for r in records if r["ok"]]
    assert len(done) >= 6 and len(done) == len(records), [r["error_detail"] for r in records if not r["ok"]]
    calls: dict[str, list[str]] = {}  # request id -> the call ids vLLM streamed, in order

    # Each record's tool calls and cached tokens are what vLLM streamed to it.
    for r in done:
        events = proxy.events(r["request_id"])
        ids = [c["id"] for e in events for ch in e.get("choices") or () for c in ch["delta"].get("tool_calls") or ()
               if c.get("id")]  # fmt: skip
        calls[r["request_id"]] = list(dict.fromkeys(ids))
        cached = [e["usage"]["prompt_tokens_details"]["cached_tokens"] for e in events
                  if (e.get("usage") or {}).get("prompt_tokens_details")]  # fmt: skip
        assert r["tool_calls"] == len(calls[r["request_id"]]) >= 1, (r["tool_calls"], ids)
        assert cached and r["cached_tokens"] == cached[-1]
        assert r["ttft_tool_s"] is not None and r["ttft_tool_s"] <= r["tool_call_s"] <= r["e2e_s"]
    # A follow-up carries the previous step's calls back, then one tool message per call with its id.
    sessions: dict[str, list[dict[str, Any]]] = {}
    for r in done:
        sessions.setdefault(r["session_id"], []).append(r)
    follow_ups = 0
    for steps in sessions.values():
        steps.sort(key=lambda r: r["step"])
        assert [r["step"] for r in steps] == list(range(len(steps)))
        for prev, r in itertools.pairwise(steps):
            messages = proxy.bodies[r["request_id"]]["messages"]
            i = max(k for k, m in enumerate(messages) if m["role"] == "assistant")
            ids = [c["id"] for c in messages[i]["tool_calls"]]
            assert ids == calls[prev["request_id"]]
            assert [m.get("tool_call_id") for m in messages[i + 1 :]] == ids
            assert all(m["role"] == "tool" and m["content"] for m in messages[i + 1 :])
            follow_ups += 1
    assert follow_ups >= 3
    assert sum(r["session_end"] for r in done) >= 1  # the third step of a session is its last

    # The prefix cache, against vLLM's own counters: the monitor's first /metrics sample is taken after the
    # pre-flight's one-token tool probe and before the first request, its last after the last reply, so its
    # increase is this run's traffic exactly; ours (before/after the whole locust run) adds the probe's.
    summary = json.loads((run.run_dir / "summary.json").read_text())
    block = int(run.run_json()["deployment"][""]["engine"]["cache_config"]["block_size"])
    hits, queries = summary["prefix_cache_hits"], summary["prefix_cache_queries"]
    cached, prompt = sum(r["cached_tokens"] for r in done), sum(r["prompt_tokens"] for r in done)
    assert abs(hits - cached) <= block * len(done) and queries == prompt, (hits, cached, queries, prompt)
    assert cached > 0  # the coding profile's system prompt and tools are shared by every session
    probe = (after[QUERIES] - before[QUERIES]) - queries
    assert 0 < probe < 2000 and 0 <= (after[HITS] - before[HITS]) - hits <= probe
    # The report's two hit rates: from the records, and from the /metrics increase.
    assert summary["prefix_cache_hit_rate_records"] == pytest.approx(cached / prompt, abs=1e-9)
    assert summary["prefix_cache_hit_rate_server"] == pytest.approx(hits / queries, abs=1e-9), summary
    # A complete call is timed at the event that completed it: vLLM sends the call's closing
    # tokens with the finish, after the last argument fragment.
    for r in done:
        assert r["e2e_s"] == r["tool_call_s"] or r["finish_reason"] == "length", r
