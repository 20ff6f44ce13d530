"""How a Responses request (``POST /v1/responses``) becomes the chat request the emulator answers, as vLLM 0.32
renders it (``openai/responses/protocol.py`` and ``utils.py``): ``instructions`` as the system message, ``input`` a
user message or items — messages, ``function_call`` items as an assistant's ``tool_calls``, ``function_call_output``
items as ``tool`` messages — ``tools`` as chat functions; a ``reasoning.effort`` turns thinking on. Refused as vLLM
refuses it: ``tool_choice`` "required" without tools, a named function not in ``tools`` (HTTP 400, chat's shape).
Without a tool-call parser (``--no-tool-calls``) vLLM does not refuse ``tools`` here, as it does on chat: it answers
with text.
"""

from __future__ import annotations

from typing import Any

from ._config import EmulatorConfig
from ._framing import Converted, RequestRefused, validation_error
from ._tools import ToolRequestError

__all__ = ["convert"]

_CHOICES = ("auto", "required", "none")
_NOT_FOUND = "Tool choice 'function' not found in 'tools' parameter."


def _refused(message: str, param: str) -> RequestRefused:
    return RequestRefused(400, ToolRequestError(message, param).body())


def _checked(body: dict[str, Any]) -> None:
    """Raise vLLM's validation error for the fields its request model checks that the emulator reads."""
    if "input" not in body:
        raise validation_error("input", "missing", "Field required", body)
    if not isinstance(body["input"], str | list):
        raise validation_error("input", "string_type", "Input should be a valid string", body["input"])
    for i, item in enumerate(body["input"] if isinstance(body["input"], list) else []):
        if not isinstance(item, dict):
            raise validation_error(f"input.{i}", "model_type", "Input should be a valid dictionary", item)
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise validation_error("tools", "list_type", "Input should be a valid list", tools)
    for i, tool in enumerate(tools or []):
        if not isinstance(tool, dict) or (tool.get("type") == "function" and not isinstance(tool.get("name"), str)):
            raise validation_error(f"tools.{i}.FunctionTool.name", "missing", "Field required", tool)
    limit = body.get("max_output_tokens")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
        raise validation_error("max_output_tokens", "int_type", "Input should be a valid integer", limit)
    if limit is not None and limit < 1:  # vLLM's sampling parameters refuse it, in their words
        message = f"max_tokens must be at least 1, got {limit}. (parameter=max_tokens, value={limit})"
        raise RequestRefused(
            400, {"error": {"message": message, "type": "BadRequestError", "param": "max_tokens", "code": 400}}
        )


def _input_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat messages vLLM renders ``instructions`` and ``input`` as (``responses/utils.py``)."""
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body["input"]
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    for item in items:
        kind = item.get("type")
        last = messages[-1] if messages and messages[-1].get("role") == "assistant" else None
        if kind == "function_call":
            function = {"name": item.get("name"), "arguments": item.get("arguments")}
            call = {"id": item.get("call_id"), "type": "function", "function": function}
            if last is not None and isinstance(last.get("tool_calls", []), list):
                last["tool_calls"] = [*last.get("tool_calls", []), call]
            else:
                messages.append({"role": "assistant", "tool_calls": [call]})
        elif kind == "reasoning":
            parts = item.get("content") or item.get("summary") or [{}]
            text = parts[0].get("text", "") if isinstance(parts[0], dict) else ""
            if last is not None and last.get("reasoning") is None:
                last["reasoning"] = text
            else:
                messages.append({"role": "assistant", "reasoning": text})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            messages.append({"role": "tool", "content": item.get("output"), "tool_call_id": item.get("call_id")})
        elif item.get("role") == "assistant":
            content = item.get("content")
            text = content if isinstance(content, str) else content[0].get("text") if content else None
            if last is not None and last.get("content") is None:
                last["content"] = text
            else:
                messages.append({"role": "assistant", "content": text})
        elif "role" in item:
            messages.append({"role": item["role"], "content": item.get("content")})
        else:
            raise _refused(f"Unsupported input item type: {kind}", "input")
    return messages


def convert(body: dict[str, Any], config: EmulatorConfig) -> Converted:
    """The chat request a Responses request is rendered as; :class:`RequestRefused` where vLLM refuses it."""
    _checked(body)
    chat: dict[str, Any] = {"model": body.get("model") or config.model, "messages": _input_messages(body)}
    for name, chat_name in (
        ("max_output_tokens", "max_tokens"),
        ("stream", "stream"),
        ("temperature", "temperature"),
        ("stop", "stop"),
        ("ignore_eos", "ignore_eos"),
    ):
        if body.get(name) is not None:
            chat[chat_name] = body[name]
    kwargs = dict(body["chat_template_kwargs"]) if isinstance(body.get("chat_template_kwargs"), dict) else {}
    reasoning = body.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    if effort is not None and "enable_thinking" not in kwargs:
        kwargs["enable_thinking"] = effort != "none"
    if kwargs:
        chat["chat_template_kwargs"] = kwargs
    functions = []
    for tool in body.get("tools") or []:
        if tool.get("type") == "function":
            function = {"name": tool["name"]}
            if tool.get("description") is not None:
                function["description"] = tool["description"]
            functions.append({**function, "parameters": tool.get("parameters") or {"type": "object"}})
    choice = body.get("tool_choice", "auto")
    named = choice.get("name") if isinstance(choice, dict) and choice.get("type") in ("function", "custom") else None
    if not body.get("tools") and choice == "required":
        raise _refused("Tool choice 'required' must be specified with 'tools' parameter.", "tool_choice")
    if isinstance(choice, dict) and not any(f["name"] == named for f in functions):
        raise _refused(_NOT_FOUND, "tool_choice")
    if functions:
        chat["tools"] = [{"type": "function", "function": f} for f in functions]
        chat["tool_choice"] = {"type": "function", "function": {"name": named}} if named else choice
    mode = f"named:{named}" if named else choice if choice in _CHOICES else "auto"
    if not functions or not config.tool_calls:  # without a tool-call parser vLLM answers text
        return Converted(True, chat, "none", [], body)
    return Converted(True, chat, mode, functions, body)
