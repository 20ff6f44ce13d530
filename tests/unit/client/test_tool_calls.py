"""Tool-call timing and prefix-cache accounting, on real vLLM 0.32 streams (tests/fixtures/vllm/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from tests.fakes.scripted import END, HEAD, ScriptedServer, chunk
from tokenstorm.workloads.client import CompletionRequest, LlmClient, StreamError, StreamTimer

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vllm"
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]  # fmt: skip


def _events(name: str) -> list[bytes]:
    text = (FIXTURES / name).read_bytes()
    return [block.removeprefix(b"data: ") for block in text.split(b"\n\n") if block.strip()]


def _replay(events: list[bytes], step_s: float = 0.01) -> StreamTimer:
    timer = StreamTimer(collect_text=True)
    for i, payload in enumerate(events):
        timer.on_event(payload, (i + 1) * step_s)
    timer.finish()
    return timer


@pytest.mark.parametrize(("fixture", "finish"), [("tool_call_named_0.32_cpu.sse", "stop"),
                                                 ("tool_call_required_0.32_cpu.sse", "tool_calls")])  # fmt: skip
def test_a_streamed_tool_call_is_timed_from_its_name_chunk_to_its_last_argument_fragment(
    fixture: str, finish: str
) -> None:
    events = _events(fixture)
    timer = _replay(events)
    chunks = [orjson.loads(e) for e in events[:-1]]  # all but [DONE]
    tool = [i for i, c in enumerate(chunks) if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
    (end,) = [i for i, c in enumerate(chunks) if c["choices"] and c["choices"][0]["finish_reason"]]
    assert timer.first_tool_t == pytest.approx((tool[0] + 1) * 0.01)  # the id/name chunk
    # vLLM sends the call's closing tokens with the finish, as an empty delta: the call is complete there.
    assert chunks[end]["choices"][0]["delta"] == {} and end > tool[-1]
    assert chunks[end]["usage"]["completion_tokens"] > chunks[tool[-1]]["usage"]["completion_tokens"]
    assert timer.last_tool_t == pytest.approx((end + 1) * 0.01)
    (call,) = timer.collected_tool_calls()
    fragments = "".join(chunks[i]["choices"][0]["delta"]["tool_calls"][0]["function"].get("arguments", "")
                        for i in tool)  # fmt: skip
    assert call["id"].startswith("chatcmpl-tool-") and call["function"] == {"name": "read_file", "arguments": fragments}
    # Every token the server generated came with the call (usage says how many): the answer is the call.
    assert timer.tool_tokens == chunks[end]["usage"]["completion_tokens"] == timer.output_tokens
    # A tool call is output like content: one ITL per output token after the first, E2E at the finish.
    assert len(timer.itl_gaps) == timer.output_tokens - 1 and timer.last_token_t == timer.last_tool_t
    assert timer.cached_tokens == chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert timer.finish_reason == finish  # vLLM 0.32 ends a named tool_choice with "stop", "required" with "tool_calls"


def test_a_text_answer_has_no_tool_timing_and_still_its_cached_tokens() -> None:
    timer = _replay(_events("tool_auto_answer_0.32_cpu.sse"))
    assert timer.tools == {} and timer.first_tool_t is None and timer.last_tool_t is None and timer.tool_tokens == 0
    assert timer.cached_tokens == 384 and timer.finish_reason == "stop"


def test_parallel_calls_are_told_apart_by_index_and_a_bad_tool_calls_field_is_malformed() -> None:
    timer = StreamTimer(collect_text=True)
    for t, delta in enumerate([
        {"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "grep", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"q": 1}'}}]},
        {"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
    ]):  # fmt: skip
        timer.on_event(json.dumps({"choices": [{"delta": delta}]}).encode(), 0.1 * (t + 1))
    assert [c["function"] for c in timer.collected_tool_calls()] == [{"name": "grep", "arguments": '{"q": 1}'},
                                                                      {"name": "ls", "arguments": "{}"}]  # fmt: skip
    assert timer.token_events == 3 and timer.last_tool_t == pytest.approx(0.3)
    with pytest.raises(StreamError, match="tool_calls is not a list"):
        StreamTimer().on_event(b'{"choices": [{"delta": {"tool_calls": {"index": 0}}}]}', 0.1)
    with pytest.raises(StreamError, match="index is not a number"):
        StreamTimer().on_event(b'{"choices": [{"delta": {"tool_calls": [{"index": "0"}]}}]}', 0.1)


def _serve_fixture(name: str) -> ScriptedServer:
    body = (FIXTURES / name).read_bytes()

    def script(conn, n):  # type: ignore[no-untyped-def]
        conn.sendall(HEAD + chunk(body) + END)

    return ScriptedServer(script)


@pytest.mark.parametrize(("fixture", "calls", "ends"), [("tool_call_named_0.32_cpu.sse", 1, False),
                                                        ("tool_auto_answer_0.32_cpu.sse", 0, True)])  # fmt: skip
def test_the_record_and_the_answer_carry_the_calls_and_an_answer_without_one_ends_the_session(
    fixture: str, calls: int, ends: bool
) -> None:
    server = _serve_fixture(fixture)
    try:
        with LlmClient(f"http://127.0.0.1:{server.port}") as client:
            req = CompletionRequest("agent", messages=[{"role": "user", "content": "read main.py"}], tools=TOOLS,
                                    tool_choice="auto", collect_text=True, session_id="s1", step=2)  # fmt: skip
            record = client.complete(req, "tiny")
            answer = client.last_answer
    finally:
        server.close()
    sent = orjson.loads(server.requests[0].partition(b"\r\n\r\n")[2])
    assert sent["tools"] == TOOLS and sent["tool_choice"] == "auto"
    assert record.ok, record.error_detail
    assert (record.session_id, record.step, record.tool_calls, record.session_end) == ("s1", 2, calls, ends)
    assert record.cached_tokens == 384
    if calls:
        assert record.ttft_s is not None and record.ttft_tool_s == record.ttft_s  # the name chunk is the first token
        # One write here, so one stamp: the call is complete when its first delta is read.
        assert record.tool_call_s is not None and record.ttft_tool_s <= record.tool_call_s <= record.e2e_s
        assert answer.tool_calls and answer.message()["tool_calls"] == answer.tool_calls
        assert answer.message()["content"] is None
    else:
        assert record.ttft_tool_s is None and record.tool_call_tokens is None and answer.text == client.last_text
        assert answer.message() == {"role": "assistant", "content": answer.text}
