"""What each API's wire format is handed by the emulator, and the chat and completions APIs' own.

The server plans an answer once, in the chat API's terms: each engine step's ``delta`` as a chat stream
carries it (``{"content": …}``, ``{"reasoning_content": …}``, ``{"content": None, "tool_calls": […]}``, or a
completion's ``{"text": …}``), as vLLM's other front ends start from its chat stream too. A :class:`Framing`
turns those into one API's bytes: what opens a stream, each step's events (one write, at the step's
deadline; empty when the API sends nothing for the step), what closes it, a whole answer. An :class:`Api`
says how a request body of that API becomes the chat-style request the rest of the emulator reads
(:class:`Converted`) and how its errors look. :class:`ChatFraming` is the chat and completions APIs' own
(``_payloads``); ``_messages`` and ``_responses`` frame the Anthropic Messages and OpenAI Responses APIs.
"""

from __future__ import annotations

import json
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._answers import token_text, whole_text
from ._config import EmulatorConfig
from ._endless import EndlessFrames
from ._payloads import Plan, sse_event, usage_event, whole_response
from ._tools import ToolCall, ToolRequestError, tool_mode
from ._truth import Truth

__all__ = [
    "CHAT",
    "COMPLETIONS",
    "Api",
    "ChatFraming",
    "Converted",
    "Framing",
    "RequestRefused",
    "Whole",
    "compact",
    "content_delta",
    "convert_chat",
    "plain",
    "same_error",
    "validation_error",
    "whole_answer",
]


def compact(obj: Any) -> bytes:
    """``obj`` as vLLM's pydantic models and FastAPI write JSON: no spaces, non-ASCII as it is."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


class RequestRefused(Exception):
    """A request its API refuses before answering it: HTTP ``status`` with ``body`` (in that API's shape)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(str(body))
        self.status = status
        self.body = body


def validation_error(loc: str, kind: str, msg: str, value: Any) -> RequestRefused:
    """The HTTP 400 vLLM's FastAPI app answers a body its request model rejects (one error, as pydantic words
    it; ``loc``: the field's path after ``body.``), whatever the route: chat's shape, not Anthropic's."""
    sized = isinstance(value, dict | list)
    shown = f"'<{type(value).__name__} of {len(value)} items>'" if sized else repr(str(value))
    ctx = ""
    if kind == "value_error":  # pydantic names the exception, and a literal's allowed values
        ctx = f", 'ctx': {{'error': ValueError({msg.removeprefix('Value error, ')!r})}}"
    elif kind == "literal_error":
        ctx = f", 'ctx': {{'expected': {msg.removeprefix('Input should be ')!r}}}"
    line = f"{{'type': '{kind}', 'loc': 'body.{loc}', 'msg': {msg!r}, 'input': {shown}{ctx}}}"
    error = {"message": f"1 validation error:\n  {line}", "type": "Bad Request", "param": f"body.{loc}", "code": 400}
    return RequestRefused(400, {"error": error})


@dataclass(slots=True)
class Converted:
    """A request as the chat route would read it: ``body`` in the chat API's shape (its ``messages``, ``tools``,
    ``max_tokens``...), so the prompt's size, its prefix-cache blocks and the answer are the chat route's; and what
    it asks of tools (``_tools.tool_mode``'s words). ``raw``: the body as the API's client sent it."""

    chat: bool
    body: dict[str, Any]
    tool_choice: str
    functions: list[dict[str, Any]]
    raw: dict[str, Any]


@dataclass(slots=True)
class Whole:
    """A non-streamed answer: its text, its reasoning when the server separates it (``--reasoning-format field``;
    "" when not), and the call made (``{"id", "type", "function": {"name", "arguments"}}``) or ``None``."""

    text: str
    reasoning: str
    call: dict[str, Any] | None


def whole_answer(plan: Plan, call: ToolCall | None, truth: Truth, reasoning_format: str) -> Whole:
    """A non-streamed answer (its reasoning apart when ``--reasoning-format field`` puts it apart); a call made
    is noted in ``truth``."""
    reasoning = (
        "".join(token_text(plan, j, None) for j in range(plan.reasoning_tokens)) if reasoning_format == "field" else ""
    )
    if call is None:
        return Whole(whole_text(plan, reasoning_format), reasoning, None)
    n = plan.output_tokens - plan.reasoning_tokens
    truth.tool_calls, truth.tool_call_ids, truth.tool_call_tokens = 1, [call.call_id], n
    return Whole("", reasoning, call.history_entry(n))


class Framing(ABC):
    """One request's answer in one API's wire format."""

    def opening(self) -> bytes:
        """The events that open a stream, before its first token (none by default)."""
        return b""

    @abstractmethod
    def step(self, delta: dict[str, Any], finish: str | None, tokens: int) -> tuple[bytes, bool]:
        """One engine step's events (``delta``: its chat delta; ``finish``: the finish reason on the last step;
        ``tokens``: output tokens so far, this step's included) and whether they hold a token event."""

    @abstractmethod
    def malformed(self) -> bytes:
        """A broken event (the ``malformed`` fault)."""

    @abstractmethod
    def closing(self, tokens: int, metrics: dict[str, Any] | None, ended: bool) -> bytes:
        """The events after the last step (``metrics``: the request's own timing, when the server sends it;
        ``ended``: False for the ``no_done`` fault, which leaves out the event that ends the stream)."""

    @abstractmethod
    def whole(self, answer: Whole, metrics: dict[str, Any] | None) -> bytes:
        """The JSON body of a non-streamed answer."""


@dataclass(frozen=True, slots=True)
class Api:
    """One of the routes that answer with tokens: how its body becomes a chat-style request, how its handler's
    errors look, how its answers are framed, and what its ``endless`` fault sends."""

    name: str
    #: the body (a dict) → the request as the chat route reads it; :class:`RequestRefused` when it is refused
    convert: Callable[[dict[str, Any], EmulatorConfig], Converted]
    #: a chat-shaped error body (``{"error": {"message", "type", ...}}``) → this API's
    error: Callable[[dict[str, Any]], dict[str, Any]]
    #: (plan, request, response id, created, settings) → the request's framing
    framing: Callable[[Plan, Converted, str, int, EmulatorConfig], Framing]
    #: the id of a response: its prefix before the request's id
    id_prefix: str
    #: how its JSON bodies are written (vLLM's other routes write pydantic's compact JSON)
    encode: Callable[[Any], bytes]
    #: the model name → what the ``endless`` fault streams (None: chat's or a completion's own)
    endless: Callable[[str], EndlessFrames] | None = None


def content_delta(plan: Plan, sent_tokens: int, k: int, cfg: EmulatorConfig, rng: random.Random) -> dict[str, Any]:
    """The chat delta of an engine step of text tokens ``sent_tokens .. +k-1`` (the reasoning in its own field with
    ``--reasoning-format field``, else in the content); empty, its text held for the next step of the same field, with
    probability ``--empty-chunk-share`` (drawn from ``rng``), as vLLM sends a step that ends mid-character."""
    r = plan.reasoning_tokens
    tags = cfg.reasoning_format if plan.chat and r and cfg.reasoning_format != "field" else None
    text = "".join(token_text(plan, j, tags) for j in range(sent_tokens, sent_tokens + k))
    end = sent_tokens + k
    more = end < plan.output_tokens and not (tags is None and r and end == r)
    if more and cfg.empty_chunk_share and rng.random() < cfg.empty_chunk_share:
        plan.held, text = plan.held + text, ""
    else:
        plan.held, text = "", plan.held + text
    if plan.chat and tags is None and r:
        return {"reasoning_content" if sent_tokens < r else "content": text}
    return {"content": text} if plan.chat else {"text": text}


def convert_chat(body: dict[str, Any], config: EmulatorConfig, chat: bool = True) -> Converted:
    """A chat (or, ``chat`` False, a completions) request: its body is already the chat route's."""
    try:
        tool_choice, functions = tool_mode(body, config.tool_calls) if chat else ("none", [])
    except ToolRequestError as exc:
        raise RequestRefused(400, exc.body()) from None
    return Converted(chat, body, tool_choice, functions, body)


class ChatFraming(Framing):
    """The chat completions (``plan.chat``) and completions APIs, as the emulator has always sent them."""

    def __init__(self, plan: Plan, rid: str, created: int) -> None:
        self.plan = plan
        self.rid = rid
        self.created = created

    def opening(self) -> bytes:
        plan = self.plan
        if not plan.chat:
            return b""
        role = {"role": "assistant", "content": ""}
        return sse_event(plan, self.rid, self.created, role, None, 0 if plan.continuous else None)

    def step(self, delta: dict[str, Any], finish: str | None, tokens: int) -> tuple[bytes, bool]:
        usage_tokens = tokens if self.plan.continuous else None
        return sse_event(self.plan, self.rid, self.created, delta, finish, usage_tokens), True

    def malformed(self) -> bytes:
        return b'data: {"id": "broken", "choices": [\n\n'

    def closing(self, tokens: int, metrics: dict[str, Any] | None, ended: bool) -> bytes:
        out = usage_event(self.plan, self.rid, self.created, tokens, metrics) if self.plan.include_usage else b""
        return out + b"data: [DONE]\n\n" if ended else out

    def whole(self, answer: Whole, metrics: dict[str, Any] | None) -> bytes:
        body = whole_response(self.plan, answer.text, answer.call)
        if metrics is not None:
            body["metrics"] = metrics
        return plain(body)


def plain(obj: Any) -> bytes:
    """``obj`` as JSON the way the emulator has always written chat's bodies."""
    return json.dumps(obj).encode()


def same_error(body: dict[str, Any]) -> dict[str, Any]:
    """An API whose errors are chat's: the body as it is."""
    return body


def _chat_framing(plan: Plan, _asked: Converted, rid: str, created: int, _config: EmulatorConfig) -> Framing:
    return ChatFraming(plan, rid, created)


#: the chat completions API (``/v1/chat/completions``)
CHAT = Api("chat", convert_chat, same_error, _chat_framing, "chatcmpl-", plain)
#: the completions API (``/v1/completions``)
COMPLETIONS = Api(
    "completions", lambda body, config: convert_chat(body, config, False), same_error, _chat_framing, "cmpl-", plain
)
