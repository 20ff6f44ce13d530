"""Reading the Anthropic Messages and OpenAI Responses streams into the same :class:`~.timing.StreamTimer`.

Each reader is handed the ``data`` payload of every SSE event (both APIs name the event again in the payload's
``type``, so the ``event:`` line is not needed) with the time of the read that completed it, and passes the token
events on to the timer in the chat shape, so every metric keeps the one definition of :mod:`.timing`.

Token events (the times TTFT, ITL, TPOT and E2E are made of):

* Messages: ``content_block_delta`` with a ``text_delta`` (answer), ``thinking_delta`` (reasoning) or
  ``input_json_delta`` (a tool call's arguments). Not ``message_start``, ``content_block_start``/``stop``,
  ``signature_delta``, ``ping``, ``message_delta`` or ``message_stop``.
* Responses: ``response.output_text.delta`` (answer), ``response.reasoning_text.delta`` /
  ``response.reasoning_summary_text.delta`` (reasoning), ``response.function_call_arguments.delta`` (a call's
  arguments). Not ``response.created``/``in_progress``, the ``*.added``/``*.done`` events or the closing event.

TTFC is the first event of any kind (``message_start``, ``response.created``). A tool call starts — its id and
name known, the tool-call TTFT — at its ``content_block_start`` (``tool_use``) or ``response.output_item.added``
(``function_call``), which is not a token event; it is complete at its last argument delta. The answer ends
(``[DONE]``'s place) at ``message_stop`` or ``response.completed``/``incomplete``. Usage comes from the last
``message_delta.usage`` (prompt tokens = ``input_tokens`` + ``cache_read_input_tokens`` +
``cache_creation_input_tokens``; cached = ``cache_read_input_tokens``) or the closing response's ``usage``
(``input_tokens``; cached = ``input_tokens_details.cached_tokens``); the server's timing from its ``metrics``.
Neither API carries usage per event, so each token event counts one token for ITL (vLLM drops the empty text
deltas of a partial character on both, so a gap may span two tokens); TPOT uses the usage's total, as on chat.
Stop reasons read as chat's finish reasons: ``max_tokens``/``max_output_tokens`` → ``length``, ``tool_use`` (or a
response with a function call) → ``tool_calls``, ``end_turn``/``stop_sequence``/``completed`` → ``stop``.
An answer with output tokens but no delta (its first token was the end of sequence: vLLM then sends no block or
item) has its one token event at its closing usage, as chat's empty finish chunk is one.
Errors: an ``error`` event, or ``response.failed``, is ``error_event``.
"""

from __future__ import annotations

from typing import Any

from ..rundir.records import ErrorCategory
from .chunks import EXCERPT, StreamError, parse_object
from .timing import StreamTimer

__all__ = ["MessagesStream", "ResponsesStream", "close_response", "whole_messages", "whole_responses"]

_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}
_REASONING_DELTAS = ("response.reasoning_text.delta", "response.reasoning_summary_text.delta")


class _ApiStream:
    """What both readers share: the timer, the end of the stream and the checks of :meth:`finish`."""

    __slots__ = ("_timer",)
    #: what ends this API's stream (the ``[DONE]`` of chat), for the error when it never came
    END = ""

    def __init__(self, timer: StreamTimer) -> None:
        self._timer = timer

    def on_event(self, payload: bytes, t: float) -> None:
        """Account for one SSE ``data`` payload that arrived ``t`` seconds after send."""
        timer = self._timer
        if timer.first_chunk_t is None:
            timer.first_chunk_t = t
        if timer.done_t is not None:
            return  # nothing after the stream's end is timed
        self._on(parse_object(payload), t)

    def _on(self, event: dict[str, Any], t: float) -> None:
        raise NotImplementedError

    def _tool_start(self, index: Any, call_id: Any, name: Any, t: float) -> None:
        """A tool call's id and name are known (not a token event: its arguments are)."""
        timer = self._timer
        if type(index) is not int:
            raise StreamError(ErrorCategory.MALFORMED_CHUNK, f"a tool call without a numeric index: {index!r:.200}")
        timer.tools[index] = [str(call_id or ""), str(name or ""), []]
        if timer.first_tool_t is None:
            timer.first_tool_t = t
        timer.last_tool_t = t

    def _output_tokens(self, count: Any) -> None:
        if type(count) is int:
            self._timer.check_cap(count)
            self._timer.output_tokens = count

    def _held_tokens(self, t: float) -> None:
        """An answer whose tokens made no delta (its first token the end of sequence: vLLM sends no block or item
        for it) has them at its closing usage: a token event there, as chat's empty finish chunk is one."""
        timer = self._timer
        if timer.first_token_t is None and timer.output_tokens:
            timer.on_chunk({"choices": [{"delta": {"content": ""}}]}, t)

    def finish(self) -> None:
        """Check the stream ended like an answer; raise :class:`StreamError` if not."""
        timer = self._timer
        if timer.done_t is None:
            raise StreamError(ErrorCategory.MISSING_DONE, f"stream ended without {self.END}")
        if timer.first_token_t is None:
            raise StreamError(ErrorCategory.NO_TOKENS, "stream carried no token events")
        if timer.finish_reason is None:
            raise StreamError(ErrorCategory.NO_FINISH_REASON, "stream ended without a stop reason")


class MessagesStream(_ApiStream):
    """The Anthropic Messages stream (``/v1/messages``)."""

    __slots__ = ()
    END = "message_stop"

    def _on(self, event: dict[str, Any], t: float) -> None:
        kind = event.get("type")
        timer = self._timer
        if kind == "content_block_delta":
            delta = event.get("delta")
            if type(delta) is not dict:
                raise StreamError(ErrorCategory.MALFORMED_CHUNK, f"content_block_delta without a delta: {event!r:.200}")
            what = delta.get("type")
            if what == "text_delta":
                timer.on_chunk({"choices": [{"delta": {"content": delta.get("text", "")}}]}, t)
            elif what == "thinking_delta":
                timer.on_chunk({"choices": [{"delta": {"reasoning_content": delta.get("thinking", "")}}]}, t)
            elif what == "input_json_delta":
                call = {"index": event.get("index", 0), "function": {"arguments": delta.get("partial_json", "")}}
                timer.on_chunk({"choices": [{"delta": {"tool_calls": [call]}}]}, t)
        elif kind == "content_block_start":
            block = event.get("content_block")
            if type(block) is dict and block.get("type") in ("tool_use", "server_tool_use"):
                self._tool_start(event.get("index", 0), block.get("id"), block.get("name"), t)
        elif kind == "message_start":
            message = event.get("message")
            if type(message) is dict:
                if isinstance(message.get("id"), str):
                    timer.response_id = message["id"]
                self._usage(message.get("usage"))
        elif kind == "message_delta":
            delta = event.get("delta")
            reason = delta.get("stop_reason") if type(delta) is dict else None
            if isinstance(reason, str):
                timer.finish_reason = _STOP_REASONS.get(reason, reason)
            self._usage(event.get("usage"))
            self._held_tokens(t)
        elif kind == "message_stop":
            timer.done_t = t
        elif kind == "error":
            error = event.get("error")
            message = error.get("message", error) if type(error) is dict else error
            raise StreamError(ErrorCategory.ERROR_EVENT, f"server sent an error event: {str(message)[:EXCERPT]}")

    def _usage(self, usage: Any) -> None:
        if type(usage) is dict:
            self._output_tokens(usage.get("output_tokens"))
            _messages_usage(self._timer, usage)


class ResponsesStream(_ApiStream):
    """The OpenAI Responses stream (``/v1/responses``)."""

    __slots__ = ()
    END = "response.completed"

    def _on(self, event: dict[str, Any], t: float) -> None:
        kind = event.get("type")
        timer = self._timer
        if kind == "response.output_text.delta":
            timer.on_chunk({"choices": [{"delta": {"content": _delta(event)}}]}, t)
        elif kind == "response.function_call_arguments.delta":
            call = {"index": event.get("output_index", 0), "function": {"arguments": _delta(event)}}
            timer.on_chunk({"choices": [{"delta": {"tool_calls": [call]}}]}, t)
        elif kind in _REASONING_DELTAS:
            timer.on_chunk({"choices": [{"delta": {"reasoning_content": _delta(event)}}]}, t)
        elif kind == "response.output_item.added":
            item = event.get("item")
            if type(item) is dict and item.get("type") == "function_call":
                self._tool_start(event.get("output_index", 0), item.get("call_id"), item.get("name"), t)
        elif kind == "response.created":
            response = event.get("response")
            if type(response) is dict and isinstance(response.get("id"), str):
                timer.response_id = response["id"]
        elif kind in ("response.completed", "response.incomplete"):
            response = event.get("response")
            if type(response) is not dict:
                raise StreamError(ErrorCategory.MALFORMED_CHUNK, f"{kind} without a response: {event!r:.200}")
            close_response(timer, response)
            self._held_tokens(t)
            timer.done_t = t
        elif kind == "response.failed":
            response = event.get("response")
            error = response.get("error") if type(response) is dict else None
            message = error.get("message", error) if type(error) is dict else error
            raise StreamError(ErrorCategory.ERROR_EVENT, f"server sent response.failed: {str(message)[:EXCERPT]}")
        elif kind == "error":
            message = event.get("message") or event.get("error") or event
            raise StreamError(ErrorCategory.ERROR_EVENT, f"server sent an error event: {str(message)[:EXCERPT]}")


def _delta(event: dict[str, Any]) -> str:
    delta = event.get("delta", "")
    return delta if isinstance(delta, str) else ""


def close_response(timer: StreamTimer, response: dict[str, Any]) -> None:
    """The closing response's stop reason, usage and server timing into ``timer``."""
    incomplete = response.get("incomplete_details")
    reason = incomplete.get("reason") if type(incomplete) is dict else None
    if reason in ("max_output_tokens", "max_tokens"):
        timer.finish_reason = "length"
    elif reason:
        timer.finish_reason = str(reason)
    else:
        calls = any(type(i) is dict and i.get("type") == "function_call" for i in response.get("output") or ())
        timer.finish_reason = "tool_calls" if calls or timer.tools else "stop"
    usage = response.get("usage")
    if type(usage) is dict:
        _responses_usage(timer, usage)
    if response.get("metrics") is not None:
        timer.server_metrics = response["metrics"]


def _messages_usage(timer: StreamTimer, usage: dict[str, Any]) -> None:
    """Anthropic's ``input_tokens`` leave out the cached ones: the prompt is all three counts together."""
    parts = [usage.get(k) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
    if type(parts[0]) is int:
        timer.prompt_tokens = sum(p for p in parts if type(p) is int)
    if type(parts[1]) is int:
        timer.cached_tokens = parts[1]


def _responses_usage(timer: StreamTimer, usage: dict[str, Any]) -> None:
    if type(usage.get("output_tokens")) is int:
        timer.output_tokens = usage["output_tokens"]
    if type(usage.get("input_tokens")) is int:
        timer.prompt_tokens = usage["input_tokens"]  # the whole prompt, cached tokens included (OpenAI's sense)
    details = usage.get("input_tokens_details")
    if type(details) is dict and type(details.get("cached_tokens")) is int:
        timer.cached_tokens = details["cached_tokens"]


def whole_messages(data: dict[str, Any], timer: StreamTimer) -> int:
    """A non-streamed Messages answer into ``timer``'s fields; the number of tool calls it made."""
    if data.get("type") == "error" or not isinstance(data.get("content"), list):
        raise KeyError("content")
    if isinstance(data.get("id"), str):
        timer.response_id = data["id"]
    reason = data.get("stop_reason")
    timer.finish_reason = _STOP_REASONS.get(reason, reason) if isinstance(reason, str) else None
    usage = data.get("usage")
    if type(usage) is dict:
        if type(usage.get("output_tokens")) is int:
            timer.output_tokens = usage["output_tokens"]
        _messages_usage(timer, usage)
    return sum(1 for block in data["content"] if type(block) is dict and block.get("type") == "tool_use")


def whole_responses(data: dict[str, Any], timer: StreamTimer) -> int:
    """A non-streamed Responses answer into ``timer``'s fields; the number of function calls it made."""
    if not isinstance(data.get("output"), list):
        raise KeyError("output")
    if isinstance(data.get("id"), str):
        timer.response_id = data["id"]
    close_response(timer, data)
    return sum(1 for item in data["output"] if type(item) is dict and item.get("type") == "function_call")
