"""The Anthropic Messages API's answers (``POST /v1/messages``) as vLLM 0.32 streams them.

vLLM converts its chat stream into Messages events (``anthropic/serving.py``, ``message_stream_converter``):
``message_start`` with the chat stream's first event; for each step a ``content_block_start`` where a block of
another kind begins (``thinking``, ``text``, a ``tool_use`` with its id, name and ``input: {}``) and its
``content_block_delta`` (``thinking_delta``, ``text_delta``, ``input_json_delta``; an empty one is dropped); a
thinking block ends with a ``signature_delta``; ``content_block_stop`` and ``message_delta`` (``stop_reason`` and
the usage: ``input_tokens`` leaves out the prompt tokens read from the prefix cache and those written to it,
counted apart) with the closing usage; ``message_stop`` at ``[DONE]``. Each event is an ``event: NAME`` line and
its ``data:``. :class:`MessagesFraming` does the same from the emulator's chat deltas; the request's conversion is
``_messages_request``'s.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from ._endless import EndlessFrames
from ._framing import Api, Framing, Whole, compact
from ._messages_request import convert
from ._payloads import Plan

__all__ = ["MESSAGES", "MessagesFraming", "anthropic_error"]


def _event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + compact(data) + b"\n\n"


def anthropic_error(body: dict[str, Any]) -> dict[str, Any]:
    """A chat-shaped error body (``{"error": {"message", "type", ...}}``) as vLLM's Messages route sends it."""
    error = body.get("error")
    error = error if isinstance(error, dict) else {}
    return {"type": "error", "error": {"type": error.get("type"), "message": error.get("message")}}


def _stop_reason(finish: str | None, tool_used: bool) -> str | None:
    """vLLM's ``_to_anthropic_stop_reason`` for an answer that matched no stop string."""
    if finish == "length":
        return "max_tokens"
    if finish not in ("stop", "tool_calls"):
        return None
    return "tool_use" if finish == "tool_calls" or tool_used else "end_turn"


class MessagesFraming(Framing):
    """One answer as Messages events: the blocks open, their deltas, their ends, the closing usage."""

    def __init__(self, plan: Plan, rid: str) -> None:
        self.plan = plan
        self.rid = rid
        #: the open block's type (None: none open), its index (the next block's while none is), its call's id
        self.block: str | None = None
        self.index = 0
        self.tool_id: str | None = None
        self.tool_used = False
        self.finish: str | None = None

    def _usage(self, tokens: int) -> dict[str, Any]:
        cached, created = self.plan.cached_tokens, self.plan.created_tokens
        return {
            "input_tokens": max(0, self.plan.prompt_tokens - cached - created),
            "output_tokens": tokens,
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": cached,
        }

    def opening(self) -> bytes:
        message: dict[str, Any] = {
            "id": self.rid,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self.plan.model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.plan.prompt_tokens, "output_tokens": 0},
        }
        return _event("message_start", {"type": "message_start", "message": message})

    def _start(self, block: dict[str, Any]) -> bytes:
        out = self._stop() + _event(
            "content_block_start", {"type": "content_block_start", "content_block": block, "index": self.index}
        )
        self.block, self.tool_id = block["type"], block.get("id")
        return out

    def _stop(self) -> bytes:
        if self.block is None:
            return b""
        out = b""
        if self.block == "thinking":
            out = self._delta({"type": "signature_delta", "signature": uuid.uuid4().hex})
        out += _event("content_block_stop", {"type": "content_block_stop", "index": self.index})
        self.block, self.tool_id = None, None
        self.index += 1
        return out

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return _event("content_block_delta", {"type": "content_block_delta", "delta": delta, "index": self.index})

    def step(self, delta: dict[str, Any], finish: str | None, tokens: int) -> tuple[bytes, bool]:
        if finish is not None:
            self.finish = finish
        out = b""
        token = False
        thinking = delta.get("reasoning_content")
        if thinking:
            if self.block != "thinking":
                out += self._start({"type": "thinking", "thinking": ""})
            out += self._delta({"type": "thinking_delta", "thinking": thinking})
            token = True
        text = delta.get("content")
        if text:
            if self.block != "text":
                out += self._start({"type": "text", "text": ""})
            out += self._delta({"type": "text_delta", "text": text})
            token = True
        for call in delta.get("tool_calls") or ():
            function = call.get("function") or {}
            if call.get("id") is not None and call["id"] != self.tool_id and function.get("name") is not None:
                out += self._start({"type": "tool_use", "id": call["id"], "name": function["name"], "input": {}})
                self.tool_used = True
            if function.get("arguments") and self.block == "tool_use":
                out += self._delta({"type": "input_json_delta", "partial_json": function["arguments"]})
                token = True
        return out, token

    def malformed(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{\n\n'

    def closing(self, tokens: int, metrics: dict[str, Any] | None, ended: bool) -> bytes:
        stop = {"stop_reason": _stop_reason(self.finish or "stop", self.tool_used), "stop_sequence": None}
        out = self._stop() + _event(
            "message_delta", {"type": "message_delta", "delta": stop, "usage": self._usage(tokens)}
        )
        return out + _event("message_stop", {"type": "message_stop"}) if ended else out

    def whole(self, answer: Whole, metrics: dict[str, Any] | None) -> bytes:
        content: list[dict[str, Any]] = []
        if answer.reasoning:
            content.append({"type": "thinking", "thinking": answer.reasoning, "signature": uuid.uuid4().hex})
        text, call = answer.text, answer.call
        arguments = _json_object(call["function"]["arguments"]) if call is not None else None
        if call is not None and arguments is None:  # not JSON: the parser gives the model's text back (hermes)
            text, call = text + call["function"]["arguments"], None
        if text:
            content.append({"type": "text", "text": text})
        if call is not None:
            content.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"], "input": arguments})
        body: dict[str, Any] = {
            "id": self.rid,
            "type": "message",
            "role": "assistant",
            "content": content or [{"type": "text", "text": ""}],
            "model": self.plan.model,
        }
        reason = _stop_reason(self.plan.finish, call is not None)
        if reason is not None:
            body["stop_reason"] = reason
        body["usage"] = self._usage(self.plan.output_tokens)
        return compact(body)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _endless(model: str) -> EndlessFrames:
    start: dict[str, Any] = {
        "id": "chatcmpl-endless",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": model,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    opening = _event("message_start", {"type": "message_start", "message": start})
    opening += _event(
        "content_block_start",
        {"type": "content_block_start", "content_block": {"type": "text", "text": ""}, "index": 0},
    )
    tok = _event(
        "content_block_delta",
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": " tok"}, "index": 0},
    )
    whole = b'{"id":"chatcmpl-endless","type":"message","role":"assistant","content":[{"type":"text","text":"'
    return EndlessFrames(opening, lambda _n: tok, whole)


#: the Messages API, for the server's routes
MESSAGES = Api(
    "messages",
    convert,
    anthropic_error,
    lambda plan, _asked, rid, _created, _config: MessagesFraming(plan, rid),
    "chatcmpl-",
    compact,
    _endless,
)
