"""Before any traffic, a run with agent sessions asks the server once whether it calls tools: a vLLM started
without a tool-call parser refuses them (HTTP 400), and the run stops with one line naming the flags."""

from __future__ import annotations

import json
import socket

from tests.fakes.scripted import ScriptedServer
from tokenstorm.workloads.client import LlmClient
from tokenstorm.workloads.client.probes import tool_calling_problem
from tokenstorm.workloads.traffic.models.agent import PROFILES

# vLLM 0.32's answer to tool_choice "auto" when started without --enable-auto-tool-choice.
REFUSAL = json.dumps({"error": {"message": '"auto" tool choice requires --enable-auto-tool-choice and '
                                           "--tool-call-parser to be set", "type": "BadRequestError",
                                "param": None, "code": 400}}).encode()  # fmt: skip
ANSWER = json.dumps({"id": "x", "choices": [{"index": 0, "finish_reason": "length",
                                             "message": {"role": "assistant", "content": "p"}}],
                     "usage": {"prompt_tokens": 9, "completion_tokens": 1}}).encode()  # fmt: skip
TOOLS = [t.schema for t in PROFILES["coding"].tools]


def _answering(status: str, body: bytes) -> ScriptedServer:
    def script(conn: socket.socket, n: int) -> None:
        conn.sendall(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                     .encode() + body)  # fmt: skip

    return ScriptedServer(script)


def test_a_server_that_refuses_tools_is_named_with_the_flags_and_one_that_answers_passes() -> None:
    refusing, answering = _answering("400 Bad Request", REFUSAL), _answering("200 OK", ANSWER)
    try:
        with LlmClient(f"http://127.0.0.1:{refusing.port}") as client:
            why = tool_calling_problem(client, "m", TOOLS, "auto")
        with LlmClient(f"http://127.0.0.1:{answering.port}") as client:
            assert tool_calling_problem(client, "m", TOOLS, "required") is None
    finally:
        refusing.close()
        answering.close()
    assert why is not None and "\n" not in why
    assert "refuses tool calls" in why and "--enable-auto-tool-choice --tool-call-parser NAME" in why
    sent = json.loads(refusing.requests[0].partition(b"\r\n\r\n")[2])
    assert sent["tools"] == TOOLS and sent["tool_choice"] == "auto" and sent["max_tokens"] == 1
