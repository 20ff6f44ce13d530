"""The emulator answering the requests of the project's real vLLM 0.32 captures (``tests/fixtures/vllm``, each with
the request that made it in ``api_requests_0.32_cpu.json``): the same events in the same order, each kind with the
same fields, and the same error bodies. Where the tiny model answered otherwise than the emulator does (two calls
at once, a thinking template that always reasons, an end of text first, a model name or length vLLM refuses), the
capture is left out: what differs there is the answer, not its framing."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest

from ._wire import FIXTURES, Event, capture, post, shape

REQUESTS: dict[str, dict[str, Any]] = json.loads((FIXTURES / "api_requests_0.32_cpu.json").read_text())
#: the server "think" reasons whatever it is asked; the emulator reasons when asked to
THINK = {"chat_template_kwargs": {"enable_thinking": True}}
STREAMS = [
    "messages_text_0.32_cpu.sse",
    "messages_tool_call_0.32_cpu.sse",
    "messages_thinking_0.32_cpu.sse",
    "messages_cache_write_0.32_cpu.sse",
    "responses_text_0.32_cpu.sse",
    "responses_tool_call_0.32_cpu.sse",
    "responses_reasoning_0.32_cpu.sse",
    "responses_cache_write_0.32_cpu.sse",
]
WHOLE = ["messages_text_0.32_cpu.json", "responses_text_0.32_cpu.json"]
ERRORS = ["messages_error_400_0.32_cpu.json", "responses_error_400_0.32_cpu.json"]


def _inner(data: dict[str, Any]) -> str | None:
    """What an event carries: its delta's, block's or item's type."""
    inner = data.get("delta") if isinstance(data.get("delta"), dict) else data.get("content_block") or data.get("item")
    return inner.get("type") if isinstance(inner, dict) else None


def _kinds(events: list[Event]) -> dict[tuple[str, str | None], Any]:
    return {
        k: shape(next(e.data for e in events if (e.data["type"], _inner(e.data)) == k))
        for k in dict.fromkeys((e.data["type"], _inner(e.data)) for e in events)
    }


def _ask(url: str, name: str) -> Any:
    spec = REQUESTS[name]
    body = {**spec["body"], **(THINK if spec["server"] == "think" else {})}
    return post(url, spec["path"], body)


@pytest.mark.parametrize("name", STREAMS)
def test_a_stream_has_the_events_of_vllms(emulator: Callable[..., str], name: str) -> None:
    reply = _ask(emulator("--model", "tiny", "--reasoning-share", "0.5"), name)
    ours, vllm = reply.events(), capture(name, FIXTURES)
    assert [k for k, _ in itertools.groupby((e.name, _inner(e.data)) for e in ours)] == [
        k for k, _ in itertools.groupby((e.name, _inner(e.data)) for e in vllm)
    ]
    assert _kinds(ours) == _kinds(vllm)


@pytest.mark.parametrize("name", WHOLE)
def test_a_whole_answer_has_the_fields_of_vllms(emulator: Callable[..., str], name: str) -> None:
    reply = _ask(emulator("--model", "tiny"), name)
    assert shape(reply.json()) == shape(json.loads((FIXTURES / name).read_text()))


@pytest.mark.parametrize("name", ERRORS)
def test_an_error_is_vllms_own(emulator: Callable[..., str], name: str) -> None:
    reply = _ask(emulator("--model", "tiny"), name)
    assert (reply.status, reply.json()) == (REQUESTS[name]["status"], json.loads((FIXTURES / name).read_text()))
