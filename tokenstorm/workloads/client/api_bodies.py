"""The request body of each API, built from the one conversation every traffic model writes.

Traffic models speak OpenAI chat (``messages`` with ``system``/``user``/``assistant``/``tool`` roles, assistant
``tool_calls`` and OpenAI function tools), so a session and its prefix-cache accounting are the same whatever the
API; this module says the same conversation in the API the run was asked to speak (``--api``):

* ``messages`` — the Anthropic Messages API (``POST /v1/messages``): system messages become ``system``, an
  assistant's tool calls ``tool_use`` blocks (``input`` the parsed arguments), tool answers ``tool_result`` blocks of
  a user turn naming the call's ``tool_use_id``; tools are ``{name, description, input_schema}``; ``tool_choice``
  ``required`` is ``{"type": "any"}``. ``max_tokens`` is required by the API: :data:`MESSAGES_MAX_TOKENS` when the
  workload sets none.
* ``responses`` — the OpenAI Responses API (``POST /v1/responses``): system messages become ``instructions``, the
  rest ``input`` items (messages, ``function_call`` items with the call's ``call_id``, ``function_call_output``
  items naming it); tools are flat ``{type: function, name, description, parameters}``; ``max_output_tokens``.

``ignore_eos`` is sent to both as vLLM's extra field (vLLM 0.32 honours it on Responses; its Messages route drops
fields it does not know, ``ignore_eos`` among them). ``--extra-body`` is merged last, as on chat.
"""

from __future__ import annotations

from typing import Any

import orjson

from .request import CompletionRequest

__all__ = [
    "ANTHROPIC_VERSION",
    "MESSAGES_MAX_TOKENS",
    "in_api",
    "messages_body",
    "request_body",
    "responses_body",
]


#: the ``anthropic-version`` header sent with every Messages request (the API's stable version)
ANTHROPIC_VERSION = "2023-06-01"
#: ``max_tokens`` sent on Messages when the workload sets no limit (the API requires one)
MESSAGES_MAX_TOKENS = 4096
_SYSTEM_ROLES = ("system", "developer")


def in_api(req: CompletionRequest, api: str) -> CompletionRequest:
    """``req`` (as its traffic model made it) said in ``api`` (``--api`` / a workload's ``api:``), in place.

    ``messages`` and ``responses`` carry every request: a chat conversation as it is, a prompt (code completion's
    ``/v1/completions`` half, a trace's) as one user message. ``completions`` carries a chat request that offers no
    tools as a prompt: its messages' texts, a blank line between them. ``chat`` keeps what the model chose."""
    if api in ("messages", "responses") and req.endpoint in ("chat", "completions"):
        if req.endpoint == "completions":
            req.messages, req.prompt = [{"role": "user", "content": req.prompt or ""}], None
        req.endpoint = api  # type: ignore[assignment]
    elif api == "completions" and req.endpoint == "chat" and not req.tools:
        req.prompt = "\n\n".join(_text(m.get("content")) for m in req.messages or [])
        req.messages, req.endpoint = None, "completions"
    return req


def request_body(req: CompletionRequest, model: str, *, continuous_usage: bool = True) -> dict[str, Any]:
    """The JSON body of ``req`` in its API (``req.endpoint``)."""
    if req.endpoint == "messages":
        return messages_body(req, model)
    if req.endpoint == "responses":
        return responses_body(req, model)
    body: dict[str, Any] = {"model": model, "stream": req.stream}
    if req.endpoint == "chat":
        body["messages"] = req.messages or []
    else:
        body["prompt"] = req.prompt or ""
    if req.max_tokens is not None:
        body["max_tokens"] = req.max_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.ignore_eos:
        body["ignore_eos"] = True
    if req.stop:
        body["stop"] = req.stop
    if req.tools:
        body["tools"] = req.tools
    if req.tool_choice is not None:
        body["tool_choice"] = req.tool_choice
    if req.stream:
        opts: dict[str, Any] = {"include_usage": True}
        if continuous_usage:
            opts["continuous_usage_stats"] = True
        body["stream_options"] = opts
    body.update(req.extra_body)
    return body


def messages_body(req: CompletionRequest, model: str) -> dict[str, Any]:
    """The Anthropic Messages body for ``req`` (a chat request)."""
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for message in req.messages or []:
        role = message.get("role")
        if role in _SYSTEM_ROLES:
            system.append(_text(message.get("content")))
        elif role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id", "")),
                "content": _text(message.get("content")),
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "user" and _all_tool_results(last["content"]):
                last["content"].append(block)  # the answers to one turn's calls go back in one user turn
            else:
                messages.append({"role": "user", "content": [block]})
        elif role == "assistant" and message.get("tool_calls"):
            blocks: list[dict[str, Any]] = []
            if message.get("content"):
                blocks.append({"type": "text", "text": _text(message["content"])})
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": str(call.get("id", "")),
                        "name": str(function.get("name", "")),
                        "input": _arguments(function.get("arguments")),
                    }
                )
            messages.append({"role": "assistant", "content": blocks})
        else:
            messages.append(
                {"role": "assistant" if role == "assistant" else "user", "content": _text(message.get("content"))}
            )
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": req.stream,
        "max_tokens": req.max_tokens if req.max_tokens is not None else MESSAGES_MAX_TOKENS,
    }
    if system:
        body["system"] = "\n\n".join(system)
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.stop:
        body["stop_sequences"] = req.stop
    if req.ignore_eos:
        body["ignore_eos"] = True
    if req.tools:
        body["tools"] = [_anthropic_tool(tool) for tool in req.tools]
    if req.tool_choice is not None:
        body["tool_choice"] = _anthropic_tool_choice(req.tool_choice)
    body.update(req.extra_body)
    return body


def responses_body(req: CompletionRequest, model: str) -> dict[str, Any]:
    """The OpenAI Responses body for ``req`` (a chat request)."""
    instructions: list[str] = []
    items: list[dict[str, Any]] = []
    for message in req.messages or []:
        role = message.get("role")
        if role in _SYSTEM_ROLES:
            instructions.append(_text(message.get("content")))
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(message.get("tool_call_id", "")),
                    "output": _text(message.get("content")),
                }
            )
        elif role == "assistant":
            if message.get("content"):
                items.append({"role": "assistant", "content": _text(message["content"])})
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                items.append(
                    {
                        "type": "function_call",
                        "call_id": str(call.get("id", "")),
                        "name": str(function.get("name", "")),
                        "arguments": str(function.get("arguments") or ""),
                    }
                )
        else:
            items.append({"role": "user", "content": _text(message.get("content"))})
    body: dict[str, Any] = {"model": model, "input": items, "stream": req.stream}
    if instructions:
        body["instructions"] = "\n\n".join(instructions)
    if req.max_tokens is not None:
        body["max_output_tokens"] = req.max_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.stop:
        body["stop"] = req.stop
    if req.ignore_eos:
        body["ignore_eos"] = True
    if req.tools:
        body["tools"] = [_responses_tool(tool) for tool in req.tools]
    if req.tool_choice is not None:
        body["tool_choice"] = _responses_tool_choice(req.tool_choice)
    body.update(req.extra_body)
    return body


def _text(content: Any) -> str:
    """A message's content as text (a list of parts: their text joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _all_tool_results(content: Any) -> bool:
    return isinstance(content, list) and all(block.get("type") == "tool_result" for block in content)


def _arguments(arguments: Any) -> dict[str, Any]:
    """A streamed call's arguments as the object ``tool_use.input`` must be (``{}`` when the model's JSON was not
    an object: the call is sent back as made, and its answer still names its id)."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = orjson.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function")
    return function if isinstance(function, dict) else tool


def _anthropic_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = _function(tool)
    out = {"name": function.get("name", ""), "input_schema": function.get("parameters") or {"type": "object"}}
    if function.get("description"):
        out["description"] = function["description"]
    return out


def _responses_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = _function(tool)
    out = {
        "type": "function",
        "name": function.get("name", ""),
        "parameters": function.get("parameters") or {"type": "object"},
    }
    if function.get("description"):
        out["description"] = function["description"]
    return out


def _named(choice: dict[str, Any]) -> str:
    return (
        str(_function(choice).get("name", ""))
        if isinstance(choice.get("function"), dict)
        else str(choice.get("name", ""))
    )


def _anthropic_tool_choice(choice: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(choice, dict):
        return {"type": "tool", "name": _named(choice)}
    return {"type": {"required": "any"}.get(choice, choice)}


def _responses_tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, dict):
        return {"type": "function", "name": _named(choice)}
    return choice
