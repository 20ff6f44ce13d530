"""What one chunk of an OpenAI-style stream says, read once per event: the payload as a JSON object, which kind of
event its first choice is (:func:`classify`, by the definitions of :mod:`.timing`), the error it carries, its
cached prompt tokens; and :class:`StreamError`, how a stream that cannot be read as a completion fails."""

from __future__ import annotations

from typing import Any, NoReturn

import orjson

from ..rundir.records import ErrorCategory

__all__ = ["EXCERPT", "StreamError", "cached_tokens", "classify", "parse_object", "raise_error_event"]


class StreamError(Exception):
    """A stream that cannot be read as a valid completion; ``category`` says why. ``detail`` may quote
    the server at length: the client masks secrets in it before cutting it short."""

    def __init__(self, category: str, detail: str) -> None:
        super().__init__(detail)
        self.category = category
        self.detail = detail


# How much of the server's text a detail quotes: well past what is stored, so that a secret in it is
# masked whole before the detail is cut (a cut through a key would leave part of it unrecognised).
EXCERPT = 4096
_REASONING_KEYS = ("reasoning_content", "reasoning")
_loads = orjson.loads


def parse_object(payload: bytes) -> dict[str, Any]:
    """One SSE payload as a JSON object; :class:`StreamError` (``malformed_chunk``) if it is not one."""
    try:
        chunk: Any = _loads(payload)
    except ValueError as exc:
        raise StreamError(ErrorCategory.MALFORMED_CHUNK, f"chunk is not JSON: {payload[:EXCERPT]!r}") from exc
    if type(chunk) is not dict:  # orjson makes plain dicts only
        raise StreamError(ErrorCategory.MALFORMED_CHUNK, f"chunk is not an object: {payload[:EXCERPT]!r}")
    return chunk


def raise_error_event(error: Any) -> NoReturn:
    """A chunk that carries an ``error`` and no choices ends the stream: ``error_event``, quoting its message."""
    message = error.get("message", error) if isinstance(error, dict) else error
    raise StreamError(ErrorCategory.ERROR_EVENT, f"server sent an error event: {str(message)[:EXCERPT]}")


def cached_tokens(usage: dict[str, Any]) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens`` (vLLM: ``--enable-prompt-tokens-details``), else ``None``."""
    details = usage.get("prompt_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    return value if type(value) is int else None


def classify(choice: dict[str, Any], delta: Any) -> tuple[bool, bool, bool, bool, list[Any] | None]:
    """Return (is_token_event, has_visible_text, is_answer, is_reasoning, tool_calls) for one choice whose
    ``delta`` (``choice.get("delta")``) the caller has read already."""
    if type(delta) is dict:
        content = delta.get("content")
        if len(delta) == 1 and type(content) is str:  # the common chunk: answer text only
            return True, bool(content), True, False, None
        reasoning_text = None
        for key in _REASONING_KEYS:
            value = delta.get(key)
            if isinstance(value, str):
                reasoning_text = value
                break
        tool_calls = delta.get("tool_calls")
        if tool_calls is not None and type(tool_calls) is not list:
            raise StreamError(ErrorCategory.MALFORMED_CHUNK, f"delta.tool_calls is not a list: {tool_calls!r:.200}")
        if content is None and reasoning_text is None and not tool_calls:
            return False, False, False, False, None
        if "role" in delta and not content and not reasoning_text and not tool_calls:
            return False, False, False, False, None  # the role announcement that opens a chat stream
        visible = bool(content) or bool(reasoning_text) or bool(tool_calls)
        is_answer = isinstance(content, str) or bool(tool_calls)
        return True, visible, is_answer, reasoning_text is not None and content is None, tool_calls or None
    text = choice.get("text")
    if isinstance(text, str):
        return True, bool(text), True, False, None
    return False, False, False, False, None
