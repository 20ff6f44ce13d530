"""How a Messages request (``POST /v1/messages``) becomes the chat request the emulator answers, as vLLM 0.32
converts it (``anthropic/serving.py``, ``to_chat_completion_request``): ``system`` first; ``tool_use`` blocks into
an assistant message's ``tool_calls``; a user's ``tool_result`` blocks into ``tool`` messages before it; ``tools``
into chat functions; ``tool_choice`` ``any`` into "required". Refused as vLLM refuses it: a body its request model
rejects in chat's error shape (FastAPI's validation), its handler's errors (a named tool not in ``tools``, tool
calls on a server without a tool-call parser) in Anthropic's, ``{"type": "error", "error": {"type", "message"}}``.
vLLM drops ``ignore_eos`` on this route; the emulator honours it (a fixed answer length, as on chat), and takes
``thinking`` (enabled or adaptive) as ``chat_template_kwargs.enable_thinking``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ._config import EmulatorConfig
from ._framing import Converted, RequestRefused, validation_error
from ._tools import no_parser_error

__all__ = ["convert"]

_ROLES = ("user", "assistant", "system")
_CHOICES = ("auto", "any", "tool", "none")
_THINKING = ("enabled", "disabled", "adaptive")


def _refused(message: str) -> RequestRefused:
    return RequestRefused(400, {"type": "error", "error": {"type": "BadRequestError", "message": message}})


def _checked(body: dict[str, Any]) -> None:
    """Raise vLLM's validation error for the fields its request model checks that the emulator reads."""
    for name in ("model", "messages", "max_tokens"):
        if name not in body:
            raise validation_error(name, "missing", "Field required", body)
    if not isinstance(body["messages"], list):
        raise validation_error("messages", "list_type", "Input should be a valid list", body["messages"])
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise validation_error("max_tokens", "int_type", "Input should be a valid integer", max_tokens)
    if max_tokens <= 0:
        raise validation_error("max_tokens", "value_error", "Value error, max_tokens must be positive", max_tokens)
    for i, msg in enumerate(body["messages"]):
        if not isinstance(msg, dict):
            raise validation_error(f"messages.{i}", "model_type", "Input should be a valid dictionary", msg)
        if msg.get("role") not in _ROLES:
            raise validation_error(
                f"messages.{i}.role",
                "literal_error",
                "Input should be 'user', 'assistant' or 'system'",
                msg.get("role"),
            )
        if not isinstance(msg.get("content"), str | list):
            raise validation_error(f"messages.{i}.content", "string_type", "Input should be a valid string", msg)
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise validation_error("tools", "list_type", "Input should be a valid list", tools)
    for i, tool in enumerate(tools or []):
        for name in ("name", "input_schema"):
            if not isinstance(tool, dict) or name not in tool:
                raise validation_error(f"tools.{i}.{name}", "missing", "Field required", tool)
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind not in _CHOICES:
            said = "Input should be 'auto', 'any', 'tool' or 'none'"
            raise validation_error("tool_choice.type", "literal_error", said, kind)
        if kind == "tool" and not choice.get("name"):
            said = "Value error, tool_choice.name is required when type is 'tool'"
            raise validation_error("tool_choice", "value_error", said, choice)
    thinking = body.get("thinking")
    if thinking is not None and (not isinstance(thinking, dict) or thinking.get("type") not in _THINKING):
        raise validation_error(
            "thinking", "union_tag_invalid", "Input tag does not match any of the expected tags", thinking
        )


def _text_of(content: Any) -> str:
    """The text of a system prompt or message: a string, or its non-empty text blocks joined."""
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    return "".join(str(b["text"]) for b in blocks if isinstance(b, dict) and b.get("type") == "text" and b.get("text"))


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    items = content if isinstance(content, list) else []
    return "\n".join(str(i.get("text", "")) for i in items if isinstance(i, dict) and i.get("type") == "text")


def _message(msg: dict[str, Any], out: list[dict[str, Any]]) -> None:
    """Append ``msg`` to the chat messages ``out`` as vLLM converts it (a user's tool results first)."""
    role, content = msg["role"], msg["content"]
    if role == "system":
        text = _text_of(content)
        if text:
            out.append({"role": "system", "content": text})
        return
    converted: dict[str, Any] = {"role": role}
    if isinstance(content, str):
        converted["content"] = content
    else:
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        reasoning: list[str] = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and block.get("text"):
                parts.append({"type": "text", "text": block["text"]})
            elif kind == "thinking" and block.get("thinking") is not None:
                reasoning.append(str(block["thinking"]))
            elif kind == "tool_use":
                function = {"name": block.get("name") or "", "arguments": json.dumps(block.get("input") or {})}
                calls.append(
                    {"id": block.get("id") or f"call_{int(time.time())}", "type": "function", "function": function}
                )
            elif kind == "tool_result" and role == "user":
                call_id = block.get("tool_use_id") or ""
                out.append({"role": "tool", "tool_call_id": call_id, "content": _result_text(block.get("content"))})
            elif kind == "tool_result":
                parts.append({"type": "text", "text": f"Tool result: {block.get('content') or ''}"})
        if reasoning:
            converted["reasoning"] = "".join(reasoning)
        if calls:
            converted["tool_calls"] = calls
        if parts:
            converted["content"] = parts[0]["text"] if len(parts) == 1 else parts
    if not (role == "user" and "content" not in converted):
        out.append(converted)


def convert(body: dict[str, Any], config: EmulatorConfig) -> Converted:
    """The chat request vLLM turns a Messages request into; :class:`RequestRefused` where vLLM refuses it."""
    _checked(body)
    messages: list[dict[str, Any]] = []
    system = _text_of(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for msg in body["messages"]:
        _message(msg, messages)
    chat: dict[str, Any] = {"model": body["model"], "messages": messages, "max_tokens": body["max_tokens"]}
    for name, chat_name in (
        ("stream", "stream"),
        ("temperature", "temperature"),
        ("stop_sequences", "stop"),
        ("ignore_eos", "ignore_eos"),
    ):
        if body.get(name) is not None:
            chat[chat_name] = body[name]
    if body.get("stream"):
        chat["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    kwargs = dict(body["chat_template_kwargs"]) if isinstance(body.get("chat_template_kwargs"), dict) else {}
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and "enable_thinking" not in kwargs:
        kwargs["enable_thinking"] = thinking.get("type") != "disabled"
    if kwargs:
        chat["chat_template_kwargs"] = kwargs
    mode, functions = _tools(body, chat, config)
    return Converted(True, chat, mode, functions, body)


def _tools(body: dict[str, Any], chat: dict[str, Any], config: EmulatorConfig) -> tuple[str, list[dict[str, Any]]]:
    """Put the chat ``tools`` and ``tool_choice`` into ``chat``; what is asked of tools (``_tools.tool_mode``'s
    words). vLLM answers text when no tools are given, whatever ``tool_choice`` says."""
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, dict) else None
    tools = body.get("tools")
    functions = []
    for tool in tools or []:
        function = {"name": tool["name"]}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        functions.append({**function, "parameters": tool["input_schema"]})
    if tools is not None:
        chat["tools"] = [{"type": "function", "function": f} for f in functions]
    if isinstance(choice, dict) and kind == "tool":
        mode = f"named:{choice['name']}"
        chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    elif kind is not None or tools is not None:
        mode = {"auto": "auto", "any": "required", "none": "none"}.get(kind or "auto", "auto")
        chat["tool_choice"] = mode
    else:
        mode = "none"
    if not config.tool_calls and mode != "none":
        raise _refused(str(no_parser_error(mode)))
    if not functions:
        return "none", []
    name = mode[len("named:") :]
    if mode.startswith("named:") and not any(f["name"] == name for f in functions):
        raise _refused(f"The tool with name '{name}' is not found in the tools list.")
    return mode, functions
