"""What the emulator keeps of a Messages or Responses request — its truth (the times of the events that carried
tokens on that API's wire, in chat's shape), ``/metrics``' counters, the prefix cache — and ``--endpoints``, under
which the routes left out answer 404 as vLLM's FastAPI app answers a route it does not have."""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tokenstorm.emulator import check_args

from ._wire import get_json, post, truth

#: each API's request (a stream of 30 tokens) and the names of its token events
API: dict[str, tuple[str, dict[str, Any], tuple[str | None, ...]]] = {
    "chat": ("/v1/chat/completions", {"max_tokens": 30, "messages": [{"role": "user", "content": "Hi"}]}, (None,)),
    "messages": (
        "/v1/messages",
        {"max_tokens": 30, "messages": [{"role": "user", "content": "Hi"}]},
        ("content_block_delta",),
    ),
    "responses": ("/v1/responses", {"max_output_tokens": 30, "input": "Hi"}, ("response.output_text.delta",)),
}


def _carries_tokens(data: Any) -> bool:
    """Whether an event of ``names`` carries tokens (chat: not the role announcement, the usage or [DONE])."""
    if not isinstance(data, dict) or "choices" not in data:
        return isinstance(data, dict) and "object" not in data
    return bool(data["choices"]) and "role" not in data["choices"][0]["delta"]


@pytest.mark.serial  # a TTFT against the truth to 0.5 ms
@pytest.mark.parametrize("api", sorted(API))
def test_the_truth_times_the_chunks_that_carry_token_events(emulator: Callable[..., str], api: str) -> None:
    url = emulator("--itl-ms", "4")
    path, body, names = API[api]
    rid = uuid.uuid4().hex
    reply = post(url, path, {"model": "m", "stream": True, "ignore_eos": True, **body}, {"x-request-id": rid})
    t = truth(url, rid)
    events = reply.events()
    chunks = sorted({e.chunk for e in events if _carries_tokens(e.data) and e.name in names})
    times = [reply.chunks[i][0] for i in chunks]
    assert t["api"] == api and len(t["itl_s"]) + 1 == len(times) == 30
    # The truth's gaps are the client's, give or take the two processes' scheduling on a busy machine.
    assert sum(t["itl_s"]) == pytest.approx(times[-1] - times[0], abs=0.03)
    assert all(gap > 0.002 for gap in t["itl_s"])
    assert t["ttft_before_write_s"] <= t["ttft_s"] and t["prompt_sha"]
    # The stream's first event (the role announcement, message_start, response.created) went out as the request
    # took its slot, the first token the imposed 20 ms later: the truth times both, as the client saw them.
    assert t["ttft_s"] - t["ttfc_s"] >= 0.02
    assert t["ttft_s"] - t["ttfc_s"] == pytest.approx(times[0] - reply.chunks[0][0], abs=0.01)


def test_metrics_count_every_apis_tokens_and_prefix_cache_hits(emulator: Callable[..., str]) -> None:
    url = emulator("--max-num-seqs", "255")  # an emulator of its own: its counters count these requests alone
    system = "You are a careful assistant. " * 40
    turn = [{"role": "user", "content": "Hi"}]
    sent = [
        ("/v1/messages", {"max_tokens": 7, "system": system, "messages": turn}),
        ("/v1/responses", {"max_output_tokens": 9, "instructions": system, "input": "Hi", "stream": True}),
        ("/v1/chat/completions", {"max_tokens": 11, "messages": [{"role": "system", "content": system}, *turn]}),
    ]
    truths = []
    for path, body in sent:
        rid = uuid.uuid4().hex
        assert post(url, path, {"model": "m", "ignore_eos": True, **body}, {"x-request-id": rid}).status == 200
        truths.append(truth(url, rid))
    # The same conversation by each API is the same prompt: the second and third find the first's blocks.
    assert len({t["prompt_tokens"] for t in truths}) == 1 and len({t["prompt_sha"] for t in truths}) == 1
    assert truths[0]["cached_tokens"] == 0 < truths[1]["cached_tokens"] == truths[2]["cached_tokens"]
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        families = {f.name: f for f in text_string_to_metric_families(resp.read().decode())}

    def total(name: str) -> float:
        return sum(s.value for s in families[name].samples if s.name.endswith("_total"))

    assert total("vllm:generation_tokens") == 7 + 9 + 11
    assert total("vllm:prompt_tokens") == sum(t["prompt_tokens"] for t in truths)
    assert total("vllm:prefix_cache_queries") == sum(t["prompt_tokens"] for t in truths)
    assert total("vllm:prefix_cache_hits") == sum(t["cached_tokens"] for t in truths)


def test_endpoints_left_out_answer_404_as_a_server_without_them(emulator: Callable[..., str]) -> None:
    url = emulator("--endpoints", "chat,completions")
    for path in ("/v1/messages", "/v1/responses"):
        reply = post(url, path, {"model": "m", "max_tokens": 5, "messages": [], "input": "Hi"})
        assert (reply.status, reply.body) == (404, b'{"detail":"Not Found"}')
        assert reply.headers["content-type"] == "application/json"
    chat = post(
        url, "/v1/chat/completions", {"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": "x"}]}
    )
    assert chat.status == 200
    assert get_json(url, "/emulator/config")["endpoints"] == ["chat", "completions"]
    only = emulator("--endpoints", "messages")
    assert post(only, "/v1/chat/completions", {"model": "m", "messages": []}).status == 404
    messages = {"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": "x"}]}
    assert post(only, "/v1/messages", messages).status == 200
    assert get_json(emulator(), "/emulator/config")["endpoints"] == ["chat", "completions", "messages", "responses"]


def test_a_misspelt_endpoint_is_one_line_naming_the_right_one() -> None:
    assert check_args(["--endpoints", "chat,mesages"]) == (
        "--endpoints chat,mesages: unknown endpoint 'mesages' (did you mean messages?)"
    )
    assert "name at least one" in str(check_args(["--endpoints", ","]))
