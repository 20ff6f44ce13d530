"""The Messages and Responses readers on real vLLM 0.32 streams (tests/fixtures/vllm/README.md), replayed by a
scripted server one SSE event per write: what a user reads in the records of an ``--api messages|responses`` run.

The expected figures are read from the fixtures here, with this file's own small parser, not the client's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.scripted import END, HEAD, ScriptedServer, chunk
from tokenstorm.workloads import RequestRecord
from tokenstorm.workloads.client import CompletionRequest, LlmClient

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vllm"
#: each fixture's request as it was sent to vLLM (path, status, body)
REQUESTS: dict[str, dict[str, Any]] = json.loads((FIXTURES / "api_requests_0.32_cpu.json").read_text())
READ_FILE = {
    "name": "read_file",
    "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}
TOOLS = [{"type": "function", "function": READ_FILE}]
#: the answers with at least one token event (an answer whose first token ended it has none: see its own test)
STREAMS = sorted(name for name in REQUESTS if name.endswith(".sse") and "_empty_answer_" not in name)
#: what carries a token: the answer, the reasoning and a tool call's arguments, in each API
MESSAGES_DELTAS = {"text_delta": "answer", "thinking_delta": "reasoning", "input_json_delta": "tool"}
RESPONSES_DELTAS = {
    "response.output_text.delta": "answer",
    "response.reasoning_text.delta": "reasoning",
    "response.function_call_arguments.delta": "tool",
}
STEP_S = 0.002  # between two events' writes: every event its own read, its own stamp


def _api(name: str) -> str:
    return REQUESTS[name]["path"].removeprefix("/v1/")


def _blocks(name: str) -> list[bytes]:
    """The fixture's SSE events as the server wrote them (``event:`` and ``data:`` lines and the blank line)."""
    raw = (FIXTURES / name).read_bytes()
    return [block + b"\n\n" for block in raw.split(b"\n\n") if block.strip()]


def _events(name: str) -> list[dict[str, Any]]:
    out = []
    for block in _blocks(name):
        data = b"".join(line[6:] for line in block.split(b"\n") if line.startswith(b"data: "))
        out.append(json.loads(data))
    return out


def _kinds(name: str) -> list[str]:
    """What each token event of the fixture carries: answer, reasoning or tool."""
    if _api(name) == "messages":
        deltas = [e["delta"]["type"] for e in _events(name) if e["type"] == "content_block_delta"]
        return [MESSAGES_DELTAS[d] for d in deltas if d in MESSAGES_DELTAS]
    return [RESPONSES_DELTAS[e["type"]] for e in _events(name) if e["type"] in RESPONSES_DELTAS]


def _usage(name: str) -> dict[str, Any]:
    """The figures the server said: output, whole prompt, cached tokens, stop reason, answer id."""
    events = _events(name)
    if _api(name) == "messages":
        usage = [e for e in events if e["type"] == "message_delta"][-1]["usage"]
        parts = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        reason = [e for e in events if e["type"] == "message_delta"][-1]["delta"]["stop_reason"]
        return {
            "output": usage["output_tokens"],
            "prompt": sum(usage.get(k, 0) for k in parts),
            "cached": usage.get("cache_read_input_tokens"),
            "finish": {"max_tokens": "length", "tool_use": "tool_calls", "end_turn": "stop"}[reason],
            "id": events[0]["message"]["id"],
        }
    response = events[-1]["response"]
    calls = any(item["type"] == "function_call" for item in response["output"])
    incomplete = response["incomplete_details"]
    return {
        "output": response["usage"]["output_tokens"],
        "prompt": response["usage"]["input_tokens"],
        "cached": response["usage"]["input_tokens_details"]["cached_tokens"],
        "finish": "length" if incomplete else "tool_calls" if calls else "stop",
        "id": response["id"],
    }


def _calls(name: str) -> list[dict[str, Any]]:
    """The tool calls the fixture streamed, as a chat history carries them back (ids, names, arguments)."""
    calls: dict[int, dict[str, Any]] = {}
    for e in _events(name):
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use":
            block = e["content_block"]
            calls[e["index"]] = {"id": block["id"], "type": "function", "function": {"name": block["name"]}}
            calls[e["index"]]["function"]["arguments"] = ""
        elif e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta":
            calls[e["index"]]["function"]["arguments"] += e["delta"]["partial_json"]
        elif e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call":
            item = e["item"]
            function = {"name": item["name"], "arguments": item["arguments"]}
            calls[e["output_index"]] = {"id": item["call_id"], "type": "function", "function": function}
    return [calls[i] for i in sorted(calls)]


def _serve(blocks: list[bytes], head: bytes = HEAD) -> ScriptedServer:
    def script(conn, n):  # type: ignore[no-untyped-def]
        conn.sendall(head)
        for block in blocks:
            conn.sendall(chunk(block))
            time.sleep(STEP_S)
        conn.sendall(END)

    return ScriptedServer(script)


def _complete(server: ScriptedServer, api: str, **kw: Any) -> tuple[RequestRecord, LlmClient]:
    req = CompletionRequest("agent", endpoint=api, messages=[{"role": "user", "content": "Read notes.txt"}], **kw)  # type: ignore[arg-type]
    try:
        with LlmClient(f"http://127.0.0.1:{server.port}") as client:
            return client.complete(req, "tiny"), client
    finally:
        server.close()


@pytest.mark.parametrize("name", STREAMS)
def test_every_recorded_stream_gives_the_servers_usage_and_gaps_that_add_up_from_ttft_to_e2e(name: str) -> None:
    record, _ = _complete(_serve(_blocks(name)), _api(name), collect_text=True)
    usage, kinds = _usage(name), _kinds(name)
    assert record.ok, record.error_detail
    assert (record.output_tokens, record.prompt_tokens) == (usage["output"], usage["prompt"])
    assert (record.cached_tokens, record.finish_reason, record.response_id) == (
        usage["cached"],
        usage["finish"],
        usage["id"],
    )
    assert record.ttfc_s is not None and record.ttft_s is not None and record.e2e_s is not None
    assert 0 < record.ttfc_s <= record.ttft_s <= record.e2e_s <= record.done_s  # type: ignore[operator]
    # One gap per token event after the first (neither API says how many tokens an event carried), and together
    # they are the time from the first token to the last.
    assert record.token_events == len(kinds) and len(record.itl_gaps_s) == len(kinds) - 1
    assert sum(record.itl_gaps_s) == pytest.approx(record.e2e_s - record.ttft_s, abs=1e-9)
    assert record.tpot_s == pytest.approx((record.e2e_s - record.ttft_s) / (usage["output"] - 1))
    assert record.reasoning_events == kinds.count("reasoning")
    assert record.tool_calls == len(_calls(name))


@pytest.mark.serial  # the call's start and its first token apart: two reads, not one late read of both
@pytest.mark.parametrize(
    "name",
    [
        "messages_tool_call_0.32_cpu.sse",
        "messages_tool_calls_parallel_0.32_cpu.sse",
        "responses_tool_call_0.32_cpu.sse",
        "responses_tool_calls_parallel_0.32_cpu.sse",
    ],
)
def test_tool_calls_are_assembled_with_their_ids_names_and_whole_json_arguments(name: str) -> None:
    record, client = _complete(
        _serve(_blocks(name)), _api(name), tools=TOOLS, tool_choice="required", collect_text=True
    )
    calls = client.last_answer.tool_calls
    assert calls == _calls(name) and len(calls) == record.tool_calls >= 1
    for call in calls:
        # the id a tool result must name: Responses' call_id (chatcmpl-tool-…), never its item id (fc_…)
        assert call["id"].startswith("chatcmpl-tool-") and call["function"]["name"] == "read_file"
        json.loads(call["function"]["arguments"])  # the fragments make one JSON value
    assert record.finish_reason == "tool_calls" and record.session_end is False
    # The call starts at its id and name (not a token event) and is complete at its last argument fragment.
    assert record.ttft_tool_s is not None and record.ttft_s is not None and record.tool_call_s is not None
    assert record.ttft_tool_s < record.ttft_s <= record.tool_call_s == record.e2e_s


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_the_calls_go_back_with_their_ids_as_vllm_accepted_them(api: str) -> None:
    """The second turn the client sends after a recorded call names the call's id where vLLM read it."""
    name = f"{api}_tool_call_0.32_cpu.sse"
    _, client = _complete(_serve(_blocks(name)), api, tools=TOOLS, tool_choice="required", collect_text=True)
    history = [
        {"role": "user", "content": "Read notes.txt"},
        client.last_answer.message(),
        {"role": "tool", "tool_call_id": _calls(name)[0]["id"], "content": "the supplier shall deliver"},
    ]
    body = client.build_body(CompletionRequest("agent", endpoint=api, messages=history, tools=TOOLS), "tiny")  # type: ignore[arg-type]
    sent = REQUESTS[f"{api}_tool_result_0.32_cpu.sse"]["body"]  # what vLLM answered with 200
    call_id = _calls(name)[0]["id"]
    if api == "messages":
        (use,) = body["messages"][1]["content"]
        (result,) = body["messages"][2]["content"]
        assert (use["type"], use["id"], use["name"]) == ("tool_use", call_id, "read_file")
        assert (result["type"], result["tool_use_id"]) == ("tool_result", call_id)
        assert [m["role"] for m in body["messages"]] == [m["role"] for m in sent["messages"]]
        assert body["tools"] == sent["tools"]
    else:
        call, output = body["input"][1], body["input"][2]
        assert (call["type"], call["call_id"], call["name"]) == ("function_call", call_id, "read_file")
        assert (output["type"], output["call_id"]) == ("function_call_output", call_id)
        assert [i.get("type", "message") for i in body["input"]] == [i.get("type", "message") for i in sent["input"]]
        assert body["tools"] == sent["tools"]


@pytest.mark.parametrize("name", ["messages_thinking_0.32_cpu.sse", "responses_reasoning_0.32_cpu.sse"])
def test_reasoning_is_counted_as_reasoning_and_the_answer_after_it_as_the_answer(name: str) -> None:
    record, client = _complete(_serve(_blocks(name)), _api(name), collect_text=True)
    kinds = _kinds(name)
    first_answer = kinds.index("answer")
    assert kinds[:first_answer] == ["reasoning"] * first_answer and first_answer > 0
    assert record.reasoning_events == first_answer and record.reasoning_tokens == first_answer
    # TTFT is the first reasoning token; the answer starts later. Its text is vLLM's, "</think>" and all: the
    # server's parser already took the reasoning out, so a "</think>" in the answer is not read as a marker.
    assert record.ttft_s is not None and record.ttft_answer_s is not None and record.ttft_s < record.ttft_answer_s
    events = _events(name)
    text = "".join(
        e["delta"]["text"] if _api(name) == "messages" else e["delta"]
        for e in events
        if e["type"] == "response.output_text.delta"
        or (e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta")
    )
    assert client.last_text == text and "</think>" in text


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_a_whole_answer_gives_the_usage_and_only_responses_the_servers_own_timing(api: str) -> None:
    body = (FIXTURES / f"{api}_text_0.32_cpu.json").read_bytes()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)

    def script(conn, n):  # type: ignore[no-untyped-def]
        conn.sendall(head + body)

    record, _ = _complete(ScriptedServer(script), api, stream=False)
    assert record.ok, record.error_detail
    assert (record.output_tokens, record.prompt_tokens, record.finish_reason) == (32, 38, "length")
    assert record.response_id == json.loads(body)["id"]
    # --enable-per-request-metrics: vLLM 0.32 times the request on Responses only
    metrics = json.loads(body).get("metrics")
    if api == "responses":
        assert record.server_ttft_s == pytest.approx(metrics["time_to_first_token_ms"] / 1000)
    else:
        assert metrics is None and record.server_ttft_s is None


@pytest.mark.parametrize(
    ("name", "status", "detail"),
    [
        ("messages_error_400_0.32_cpu.json", 400, "max_tokens must be positive"),
        ("messages_error_400_max_len_0.32_cpu.json", 400, "cannot be greater than max_model_len=4096"),
        ("messages_error_404_0.32_cpu.json", 404, "The model `nope` does not exist"),
        ("responses_error_400_0.32_cpu.json", 400, "max_tokens must be at least 1, got 0"),
        ("responses_error_400_max_len_0.32_cpu.json", 400, "cannot be greater than max_model_len=4096"),
        ("responses_error_404_0.32_cpu.json", 404, "The model `nope` does not exist"),
    ],
)
def test_error_bodies_of_both_apis_are_client_errors_that_quote_the_servers_message(
    name: str, status: int, detail: str
) -> None:
    body = (FIXTURES / name).read_bytes()
    reason = {400: b"Bad Request", 404: b"Not Found"}[status]
    head = b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"

    def script(conn, n):  # type: ignore[no-untyped-def]
        conn.sendall(head % (status, reason, len(body)) + body)

    record, _ = _complete(ScriptedServer(script), name.partition("_")[0])
    assert (record.ok, record.status_code, record.error_category) == (False, status, "http_4xx")
    # Both of Messages' shapes ({"error": {...}} and {"type": "error", "error": {...}}) give the message itself.
    assert record.error_detail is not None and record.error_detail.startswith(f"HTTP {status}: ")
    assert detail in record.error_detail and "{" not in record.error_detail.partition(": ")[2][:1]


# vLLM 0.32's error event mid-stream: Messages as anthropic/serving.py writes it; Responses in OpenAI's shape
# (type "error" with code and message), which vLLM did not produce on demand.
MESSAGES_ERROR = b'event: error\ndata: {"type":"error","error":{"type":"internal_error","message":"engine died"}}\n\n'
RESPONSES_ERROR = (
    b'event: error\ndata: {"type":"error","code":"server_error","message":"engine died","param":null,'
    b'"sequence_number":9}\n\n'
)


@pytest.mark.parametrize(
    ("name", "error"),
    [("messages_text_0.32_cpu.sse", MESSAGES_ERROR), ("responses_text_0.32_cpu.sse", RESPONSES_ERROR)],
)
def test_an_error_event_mid_stream_fails_the_record_as_an_error_event_and_keeps_its_timing(
    name: str, error: bytes
) -> None:
    blocks = _blocks(name)
    first = next(i for i, b in enumerate(blocks) if b"_delta" in b or b".delta" in b)
    record, _ = _complete(_serve([*blocks[: first + 3], error]), _api(name))
    assert (record.ok, record.error_category) == (False, "error_event")
    assert record.error_detail is not None and "engine died" in record.error_detail
    # (the first token no later than the end: a busy machine may read the three events and the error in one read)
    assert record.token_events == 3 and record.ttft_s is not None and record.ttft_s <= record.e2e_s  # type: ignore[operator]


@pytest.mark.parametrize("name", ["messages_text_0.32_cpu.sse", "responses_text_0.32_cpu.sse"])
def test_a_stream_cut_before_its_end_event_is_missing_its_end(name: str) -> None:
    blocks = _blocks(name)
    record, _ = _complete(_serve(blocks[:-1]), _api(name))  # message_stop / response.completed never came
    assert (record.ok, record.error_category) == (False, "missing_done")
    assert record.token_events == len(_kinds(name))


@pytest.mark.parametrize("name", sorted(n for n in REQUESTS if "_empty_answer_" in n))
def test_an_answer_whose_first_token_ends_it_is_ok_with_one_token_event_at_its_closing_usage(name: str) -> None:
    # vLLM sends no content block / output item for it; chat counts its empty finish chunk as the token event.
    record, _ = _complete(_serve(_blocks(name)), _api(name))
    assert record.ok, record.error_detail
    assert record.output_tokens == _usage(name)["output"] >= 1
    assert record.token_events == 1 and record.itl_gaps_s == []
    assert record.ttft_s is not None and record.ttft_s == record.e2e_s <= record.done_s  # type: ignore[operator]
