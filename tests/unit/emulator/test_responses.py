"""``POST /v1/responses`` framed as vLLM 0.32 frames it, event by event, against its captures in ``data/``:
``responses_text.sse`` (a live vLLM 0.32 CPU, tiny model, max_output_tokens 16, --enable-per-request-metrics),
``responses_tool.sse`` (the same, a named function, ``--tool-call-parser hermes``), ``responses_whole.json`` (not
streamed) and ``responses_reasoning_tool.sse`` (vLLM 0.32's own ``SimpleStreamingEventProcessor`` fed deltas that
reason, answer and call a function, empty ones among them: the tiny model has no reasoning parser)."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from typing import Any

from ._wire import DATA, FIXTURES, Event, capture, post, shape, truth

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather of a city",
    "parameters": {  # as the capture's, whose response echoes it
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 8}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


def _pattern(events: list[Event]) -> list[str | None]:
    return [name for name, _ in itertools.groupby(e.name for e in events)]


def _shapes(events: list[Event]) -> dict[tuple[str, str | None], Any]:
    """The shape of each kind of event (its type and the type of the item it adds or ends)."""
    out: dict[tuple[str, str | None], Any] = {}
    for e in events:
        out.setdefault((e.data["type"], (e.data.get("item") or {}).get("type")), shape(e.data))
    return out


def _ask(url: str, body: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    rid = uuid.uuid4().hex
    reply = post(url, "/v1/responses", {"model": "m", **body}, {"x-request-id": rid})
    return reply, truth(url, rid)


def test_a_text_stream_has_vllms_events_fields_usage_and_metrics(emulator: Callable[..., str]) -> None:
    url = emulator()
    reply, t = _ask(url, {"max_output_tokens": 16, "ignore_eos": True, "stream": True, "input": "Hi there"})
    events = reply.events()
    vllm = capture("responses_text.sse")
    assert _pattern(events) == _pattern(vllm)
    assert _shapes(events) == _shapes(vllm)
    assert [e.data["sequence_number"] for e in events] == list(range(len(events)))
    assert all(e.name == e.data["type"] for e in events)
    deltas = [e.data["delta"] for e in events if e.name == "response.output_text.delta"]
    assert len(deltas) == 16 == t["output_tokens"] and all(deltas)
    done = events[-1].data["response"]
    assert done["status"] == "incomplete" and done["incomplete_details"] == {"reason": "max_output_tokens"}
    usage = done["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (
        t["prompt_tokens"],
        16,
        t["prompt_tokens"] + 16,
    )
    assert usage["input_tokens_details"]["cached_tokens"] == t["cached_tokens"]
    assert usage["input_tokens_details"]["cache_write_tokens"] == t["prompt_tokens"] // 16 * 16 - t["cached_tokens"]
    assert done["output"][0]["content"][0]["text"] == "".join(deltas)
    assert done["metrics"]["time_to_first_token_ms"] == t["server_ttft_s"] * 1000
    # One write a step: the item opens with its first token; the ends go out together after the last token.
    assert events[1].chunk < events[2].chunk == events[3].chunk == events[4].chunk
    assert events[-1].chunk == events[-4].chunk != events[-5].chunk
    assert t["api"] == "responses" and len(t["itl_s"]) == 15


def test_a_function_call_item_carries_the_call_id_the_next_turn_names(emulator: Callable[..., str]) -> None:
    url = emulator()
    body = {"max_output_tokens": 200, "stream": True, "input": "Weather in Oslo?", "tools": [WEATHER]}
    reply, t = _ask(url, {**body, "tool_choice": {"type": "function", "name": "get_weather"}})
    events = reply.events()
    vllm = capture("responses_tool.sse")
    assert _pattern(events) == _pattern(vllm)
    assert _shapes(events) == _shapes(vllm)
    item = events[2].data["item"]
    assert (item["type"], item["call_id"], item["name"]) == ("function_call", t["tool_call_ids"][0], "get_weather")
    fragments = [e.data["delta"] for e in events if e.name == "response.function_call_arguments.delta"]
    arguments = "".join(fragments)
    assert json.loads(arguments)["city"] and events[-1].data["response"]["status"] == "completed"
    assert events[-1].data["response"]["output"][0]["arguments"] == arguments
    assert events[3].chunk == events[2].chunk + 1  # the item's start (the call's name) goes out alone
    assert len(t["itl_s"]) + 1 == len(fragments) == t["output_tokens"] - 1
    assert t["ttft_tool_s"] < t["ttft_s"]

    call_id = item["call_id"]
    turn = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": arguments},
        {"type": "function_call_output", "call_id": call_id, "output": "Sunny, 21 C"},
    ]
    reply, after = _ask(url, {"max_output_tokens": 5, "input": turn, "tools": [WEATHER]})
    assert reply.status == 200
    call = {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
    chat = [
        turn[0],
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "content": "Sunny, 21 C", "tool_call_id": call_id},
    ]
    tools = [{"type": "function", "function": {k: WEATHER[k] for k in ("name", "description", "parameters")}}]
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


def test_reasoning_is_an_item_of_its_own_counted_in_the_usage(emulator: Callable[..., str]) -> None:
    url = emulator("--reasoning-share", "0.5")
    body = {
        "max_output_tokens": 40,
        "stream": True,
        "reasoning": {"effort": "low"},
        "input": "Think, then call.",
        "tools": [WEATHER],
        "tool_choice": "required",
    }
    reply, t = _ask(url, body)
    events = reply.events()
    vllm = capture("responses_reasoning_tool.sse")
    lifecycle = ("response.created", "response.in_progress", "response.completed")
    ours = {k: v for k, v in _shapes(events).items() if k[0] not in lifecycle}
    theirs = {k: v for k, v in _shapes(vllm).items() if "output_text" not in k[0] and k[1] != "message"}
    assert ours == theirs  # the reference also answers with text, which this request does not
    reasoning = [e for e in events if e.name == "response.reasoning_text.delta"]
    assert len(reasoning) == t["reasoning_tokens"] > 0
    assert events[-1].data["response"]["usage"]["output_tokens_details"]["reasoning_tokens"] == t["reasoning_tokens"]
    assert [i["type"] for i in events[-1].data["response"]["output"]] == ["reasoning", "function_call"]
    assert events[0].data["response"]["reasoning"]["effort"] == "low"


def test_empty_text_deltas_are_dropped_and_left_out_of_the_truth(emulator: Callable[..., str]) -> None:
    url = emulator("--empty-chunk-share", "0.5")
    reply, t = _ask(url, {"max_output_tokens": 60, "ignore_eos": True, "stream": True, "input": "Hi"})
    deltas = [e for e in reply.events() if e.name == "response.output_text.delta"]
    assert all(d.data["delta"] for d in deltas)
    assert 10 < len(deltas) < 60
    assert len(t["itl_s"]) + 1 == len(deltas)
    assert reply.events()[-1].data["response"]["usage"]["output_tokens"] == 60


def test_a_whole_answer_has_vllms_fields(emulator: Callable[..., str]) -> None:
    url = emulator()
    items = [{"role": "user", "content": "Hi"}]
    reply, t = _ask(url, {"max_output_tokens": 5, "ignore_eos": True, "input": items, "instructions": "be brief"})
    answer = reply.json()
    assert shape(answer) == shape(json.loads((DATA / "responses_whole.json").read_text()))
    assert answer["status"] == "incomplete" and answer["usage"]["output_tokens"] == 5
    assert answer["instructions"] == "be brief" and answer["usage"]["input_tokens"] == t["prompt_tokens"]
    reply, t = _ask(url, {"max_output_tokens": 200, "input": items, "tools": [WEATHER], "tool_choice": "required"})
    call = reply.json()["output"][-1]
    assert call["type"] == "function_call" and call["call_id"] == t["tool_call_ids"][0]
    assert reply.json()["status"] == "completed" and "city" in json.loads(call["arguments"])


def test_errors_are_vllms_own_shapes(emulator: Callable[..., str]) -> None:
    url = emulator()
    missing = post(url, "/v1/responses", {"model": "m"})
    assert missing.status == 400 and missing.json()["error"]["param"] == "body.input"
    required = post(url, "/v1/responses", {"model": "m", "input": "Hi", "tool_choice": "required"})
    said = "Tool choice 'required' must be specified with 'tools' parameter. (parameter=tool_choice)"
    assert required.status == 400
    assert required.json() == {
        "error": {"message": said, "type": "BadRequestError", "param": "tool_choice", "code": 400}
    }
    named = {"type": "function", "name": "nope"}
    unknown = post(url, "/v1/responses", {"model": "m", "input": "Hi", "tools": [WEATHER], "tool_choice": named})
    assert unknown.status == 400 and "not found in 'tools'" in unknown.json()["error"]["message"]
    # Without a tool-call parser vLLM does not refuse tools here (as it does on chat): it answers with text.
    stock = emulator("--no-tool-calls")
    text = post(
        stock,
        "/v1/responses",
        {"model": "m", "input": "Hi", "max_output_tokens": 5, "tools": [WEATHER], "tool_choice": "required"},
    )
    assert text.status == 200 and [i["type"] for i in text.json()["output"]] == ["message"]


def test_a_prompt_sent_twice_writes_then_reads_the_cache_as_vllm_counts_it(emulator: Callable[..., str]) -> None:
    url = emulator()
    body = {"max_output_tokens": 8, "stream": True, "input": f"{uuid.uuid4()} " * 60}
    (first, t), (second, _) = _ask(url, body), _ask(url, body)
    write = first.events()[-1].data["response"]["usage"]
    read = second.events()[-1].data["response"]["usage"]
    blocks = t["prompt_tokens"] // 16 * 16
    assert write["input_tokens"] == read["input_tokens"] == t["prompt_tokens"]  # the whole prompt, as OpenAI's
    assert (write["input_tokens_details"]["cache_write_tokens"], write["input_tokens_details"]["cached_tokens"]) == (
        blocks,
        0,
    )
    assert read["input_tokens_details"]["cached_tokens"] == (t["prompt_tokens"] - 1) // 16 * 16
    vllm = capture("responses_cache_write_0.32_cpu.sse", FIXTURES)
    assert shape(write) == shape(vllm[-1].data["response"]["usage"])
    assert vllm[-1].data["response"]["usage"]["input_tokens_details"]["cache_write_tokens"] > 0
