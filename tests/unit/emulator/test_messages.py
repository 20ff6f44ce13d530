"""``POST /v1/messages`` framed as vLLM 0.32 frames it, event by event, against its captures in ``data/``:
``messages_text.sse`` (a live vLLM 0.32 CPU, tiny model, max_tokens 64), ``messages_tool.sse`` (the same, a named
tool, ``--tool-call-parser hermes``), ``messages_whole.json`` (not streamed) and ``messages_thinking_tool.sse``
(vLLM 0.32's own ``message_stream_converter`` fed a chat stream that reasons, answers and calls a tool: the tiny
model has no reasoning parser)."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from typing import Any

from ._wire import DATA, FIXTURES, Event, capture, post, shape, truth

WEATHER = {
    "name": "get_weather",
    "description": "The weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _pattern(events: list[Event]) -> list[str | None]:
    """The events' names, a run of one name as one: the order of the stream's parts."""
    return [name for name, _ in itertools.groupby(e.name for e in events)]


def _shapes(events: list[Event]) -> dict[tuple[str, str | None], Any]:
    """The shape of each kind of event (its type and, for a delta or block start, what it carries)."""
    out: dict[tuple[str, str | None], Any] = {}
    for e in events:
        inner = e.data.get("delta") or e.data.get("content_block") or {}
        out.setdefault((e.data["type"], inner.get("type")), shape(e.data))
    return out


def _ask(url: str, body: dict[str, Any], **headers: str) -> tuple[Any, dict[str, Any]]:
    rid = uuid.uuid4().hex
    reply = post(url, "/v1/messages", {"model": "m", **body}, {"x-request-id": rid, **headers})
    return reply, truth(url, rid)


def test_a_text_stream_has_vllms_events_fields_and_usage(emulator: Callable[..., str]) -> None:
    url = emulator()
    body = {"max_tokens": 64, "ignore_eos": True, "stream": True, "messages": [{"role": "user", "content": "Hi there"}]}
    reply, t = _ask(url, body)
    events = reply.events()
    vllm = capture("messages_text.sse")
    assert _pattern(events) == _pattern(vllm)
    assert _shapes(events) == _shapes(vllm)
    assert all(e.name == e.data["type"] for e in events)
    deltas = [e for e in events if e.name == "content_block_delta"]
    assert len(deltas) == 64 == t["output_tokens"] and all(d.data["delta"]["text"] for d in deltas)
    start, end = events[0].data["message"]["usage"], events[-2].data["usage"]
    assert start == {"input_tokens": t["prompt_tokens"], "output_tokens": 0}
    assert end["output_tokens"] == 64
    assert (
        end["input_tokens"] + end["cache_read_input_tokens"] + end["cache_creation_input_tokens"] == t["prompt_tokens"]
    )
    assert end["cache_read_input_tokens"] == t["cached_tokens"]
    assert events[-2].data["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None}
    # One write a step: the block starts with its first token; the ends go out together after the last token.
    assert events[1].chunk == events[2].chunk != events[0].chunk
    assert events[-1].chunk == events[-2].chunk == events[-3].chunk != events[-4].chunk
    assert t["api"] == "messages" and len(t["itl_s"]) == 63


def test_a_tool_call_opens_a_tool_use_block_whose_id_the_next_turn_names(emulator: Callable[..., str]) -> None:
    url = emulator()
    ask = [{"role": "user", "content": "What is the weather in Oslo?"}]
    body = {"max_tokens": 200, "stream": True, "messages": ask, "tools": [WEATHER]}
    reply, t = _ask(url, {**body, "tool_choice": {"type": "tool", "name": "get_weather"}})
    events = reply.events()
    vllm = capture("messages_tool.sse")
    assert _pattern(events) == _pattern(vllm)
    assert _shapes(events) == _shapes(vllm)
    block = events[1].data["content_block"]
    assert block == {"type": "tool_use", "id": t["tool_call_ids"][0], "name": "get_weather", "input": {}}
    fragments = [e.data["delta"]["partial_json"] for e in events if e.name == "content_block_delta"]
    arguments = json.loads("".join(fragments))
    assert isinstance(arguments["city"], str)
    assert events[-2].data["delta"]["stop_reason"] == "tool_use"
    # The block's start (the call's name: a token, not a token event) goes out alone, before the first argument.
    assert events[2].chunk == events[1].chunk + 1
    assert len(t["itl_s"]) + 1 == len(fragments) == t["output_tokens"] - 1
    assert t["ttft_tool_s"] < t["ttft_s"]

    # The next turn names the call by that id, and reads as the chat conversation vLLM converts it to.
    call_id = block["id"]
    turn = [
        *ask,
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": "get_weather", "input": arguments}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "Sunny, 21 C"}]},
    ]
    reply, after = _ask(url, {"max_tokens": 5, "messages": turn, "tools": [WEATHER]})
    assert reply.status == 200 and reply.json()["content"][0]["type"] in ("text", "tool_use")
    call = {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(arguments)}}
    chat = [
        *ask,
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": "Sunny, 21 C"},
    ]
    tools = [
        {
            "type": "function",
            "function": {**{k: WEATHER[k] for k in ("name", "description")}, "parameters": WEATHER["input_schema"]},
        }
    ]
    rid = uuid.uuid4().hex
    post(
        url,
        "/v1/chat/completions",
        {"model": "m", "max_tokens": 5, "messages": chat, "tools": tools},
        {"x-request-id": rid},
    )
    same = truth(url, rid)
    assert (same["prompt_tokens"], same["prompt_sha"]) == (after["prompt_tokens"], after["prompt_sha"])
    assert same["cached_tokens"] == (same["prompt_tokens"] - 1) // 16 * 16  # every full block: the same text


def test_thinking_is_a_block_of_its_own_that_ends_with_its_signature(emulator: Callable[..., str]) -> None:
    url = emulator("--reasoning-share", "0.5")
    body = {
        "max_tokens": 40,
        "stream": True,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "Think, then call."}],
        "tools": [WEATHER],
        "tool_choice": {"type": "any"},
    }
    reply, t = _ask(url, body)
    events = reply.events()
    vllm = capture("messages_thinking_tool.sse")
    assert _shapes(events).keys() == _shapes(vllm).keys() - {
        ("content_block_start", "text"),
        ("content_block_delta", "text_delta"),
    }
    for kind, seen in _shapes(events).items():
        assert seen == _shapes(vllm)[kind], kind
    thinking = [e for e in events if e.name == "content_block_delta" and e.data["delta"]["type"] == "thinking_delta"]
    assert len(thinking) == t["reasoning_tokens"] > 0 and {e.data["index"] for e in thinking} == {0}
    names = [(e.name, (e.data.get("delta") or e.data.get("content_block") or {}).get("type")) for e in events]
    at = names.index(("content_block_stop", None))
    assert names[at - 1] == ("content_block_delta", "signature_delta")
    assert names[at + 1] == ("content_block_start", "tool_use") and events[at + 1].data["index"] == 1
    # The thinking block's end and the call's start go out at the call's first step.
    assert events[at - 1].chunk == events[at].chunk == events[at + 1].chunk


def test_empty_text_deltas_are_dropped_and_left_out_of_the_truth(emulator: Callable[..., str]) -> None:
    url = emulator("--empty-chunk-share", "0.5")
    body = {"max_tokens": 60, "ignore_eos": True, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    reply, t = _ask(url, body)
    deltas = [e for e in reply.events() if e.name == "content_block_delta"]
    assert all(d.data["delta"]["text"] for d in deltas)
    assert 10 < len(deltas) < 60  # half the steps held their text back for the next
    assert len(t["itl_s"]) + 1 == len(deltas)
    assert len({d.chunk for d in deltas}) == len(deltas)  # a step sends one delta or nothing at all
    assert reply.events()[-2].data["usage"]["output_tokens"] == 60


def test_a_whole_answer_has_vllms_fields(emulator: Callable[..., str]) -> None:
    url = emulator()
    body = {"max_tokens": 10, "ignore_eos": True, "messages": [{"role": "user", "content": "Hi"}]}
    reply, t = _ask(url, body)
    answer = reply.json()
    assert shape(answer) == shape(json.loads((DATA / "messages_whole.json").read_text()))
    assert answer["stop_reason"] == "max_tokens" and answer["usage"]["output_tokens"] == 10
    usage = answer["usage"]
    assert (
        usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
        == t["prompt_tokens"]
    )
    reply, t = _ask(
        url, {"max_tokens": 200, "messages": body["messages"], "tools": [WEATHER], "tool_choice": {"type": "any"}}
    )
    call = reply.json()["content"][-1]
    assert call["type"] == "tool_use" and call["id"] == t["tool_call_ids"][0] and "city" in call["input"]
    assert reply.json()["stop_reason"] == "tool_use"


def test_a_needle_question_is_answered_with_the_contracts_value_first(emulator: Callable[..., str]) -> None:
    url = emulator()
    question = "Also answer, on the first line of your reply: what is the payment deadline stated in the contract?"
    body = {
        "max_tokens": 30,
        "stream": True,
        "system": "Clause 4. The payment deadline is 45 days.\nClause 5.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": f"Review it. {question}"}]}],
    }
    reply, _ = _ask(url, body)
    text = "".join(e.data["delta"]["text"] for e in reply.events() if e.name == "content_block_delta")
    assert text.startswith("45 days")


def test_errors_are_vllms_own_shapes(emulator: Callable[..., str]) -> None:
    url = emulator()
    ask = [{"role": "user", "content": "Hi"}]
    missing = post(url, "/v1/messages", {"model": "m", "messages": ask})
    assert missing.status == 400  # the request model's validation: chat's shape, as vLLM's FastAPI app answers
    assert missing.json()["error"]["param"] == "body.max_tokens" and missing.json()["error"]["type"] == "Bad Request"
    unknown = post(
        url,
        "/v1/messages",
        {
            "model": "m",
            "max_tokens": 5,
            "messages": ask,
            "tools": [WEATHER],
            "tool_choice": {"type": "tool", "name": "nope"},
        },
    )
    assert unknown.status == 400
    said = "The tool with name 'nope' is not found in the tools list."
    assert unknown.json() == {"type": "error", "error": {"type": "BadRequestError", "message": said}}
    stock = emulator("--no-tool-calls")
    refused = post(stock, "/v1/messages", {"model": "m", "max_tokens": 5, "messages": ask, "tools": [WEATHER]})
    assert refused.status == 400 and refused.json()["type"] == "error"
    assert "requires --enable-auto-tool-choice" in refused.json()["error"]["message"]
    plain = post(stock, "/v1/messages", {"model": "m", "max_tokens": 5, "messages": ask})
    assert plain.status == 200


def test_a_prompt_sent_twice_writes_then_reads_the_cache_as_vllm_counts_it(emulator: Callable[..., str]) -> None:
    url = emulator()
    body = {"max_tokens": 8, "stream": True, "messages": [{"role": "user", "content": f"{uuid.uuid4()} " * 60}]}
    (first, t), (second, _) = _ask(url, body), _ask(url, body)
    write, read = first.events()[-2].data["usage"], second.events()[-2].data["usage"]
    blocks = t["prompt_tokens"] // 16 * 16
    # vLLM (fixtures/vllm/messages_cache_*): the full blocks written the first time, read the second (but the
    # block holding the last prompt token, which is always computed again); input_tokens is the rest.
    assert (write["cache_creation_input_tokens"], write["cache_read_input_tokens"]) == (blocks, 0)
    assert read["cache_read_input_tokens"] == (t["prompt_tokens"] - 1) // 16 * 16
    assert read["cache_creation_input_tokens"] == blocks - read["cache_read_input_tokens"]
    for usage in (write, read):
        assert (
            sum(usage[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
            == (t["prompt_tokens"])
        )
    vllm = capture("messages_cache_write_0.32_cpu.sse", FIXTURES)
    assert [e.name for e in first.events() if e.name != "content_block_delta"] == [
        e.name for e in vllm if e.name != "content_block_delta"
    ]
    assert shape(write) == shape(vllm[-2].data["usage"]) and vllm[-2].data["usage"]["cache_creation_input_tokens"] > 0
