"""Tool calls as vLLM 0.32 streams them (``--enable-auto-tool-choice --tool-call-parser hermes``).

What a chat request's ``tools`` and ``tool_choice`` ask for — checked as vLLM checks them, with its
HTTP 400 messages — and the call the emulator answers with: one function from ``tools`` (the named
one, or a seeded pick), its arguments valid JSON built from the function's ``parameters`` schema.
A call is streamed as vLLM streams it: a first event whose ``delta.tool_calls`` holds the call's
``index``, ``id`` (``chatcmpl-tool-…``), ``type`` and ``function.name``, then one event per token of
the arguments (``function.arguments`` fragments, ``delta.content`` null). The name event is one
token of output, each fragment one more, so a call of ``n`` fragments is ``1 + n`` output tokens.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from ._payloads import filler_text

__all__ = ["ToolCall", "ToolRequestError", "no_parser_error", "plan_tool_call", "tool_delta", "tool_mode"]

#: a token of JSON text: a word or a run of punctuation, with the whitespace before it; or trailing whitespace
_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s]+)|\s+")
#: deepest nesting of object/array arguments built from a schema
_MAX_DEPTH = 3


class ToolRequestError(ValueError):
    """A request's ``tools``/``tool_choice`` vLLM refuses with HTTP 400; ``param`` is the field at fault
    (``None``: the server's set-up, not a field, as for tool calls without a tool-call parser)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param

    def body(self) -> dict[str, Any]:
        """vLLM's error body for it."""
        return {
            "error": {
                "message": f"{self} (parameter={self.param})" if self.param else str(self),
                "type": "BadRequestError",
                "param": self.param,
                "code": 400,
            }
        }


@dataclass(slots=True)
class ToolCall:
    """The one tool call an answer streams: its id, function name and argument tokens (their text joined
    is the arguments' JSON)."""

    call_id: str
    name: str
    argument_tokens: list[str]
    #: ``finish_reason`` when the call is complete: "tool_calls", or "stop" for a named ``tool_choice`` (vLLM)
    finish: str

    @property
    def tokens(self) -> int:
        """Output tokens of the whole call: its name event and one per argument fragment."""
        return 1 + len(self.argument_tokens)

    @property
    def arguments(self) -> str:
        """The arguments' JSON text, as a client joins the fragments."""
        return "".join(self.argument_tokens)

    def history_entry(self, tokens: int | None = None) -> dict[str, Any]:
        """The call as a message's ``tool_calls`` holds it (``{"id", "type", "function": {"name", "arguments"}}``),
        cut to its first ``tokens`` output tokens (``None``: all)."""
        fragments = self.argument_tokens if tokens is None else self.argument_tokens[: max(0, tokens - 1)]
        function = {"name": self.name, "arguments": "".join(fragments)}
        return {"id": self.call_id, "type": "function", "function": function}


def _functions(tools: Any) -> list[dict[str, Any]]:
    """The ``function`` objects of ``tools``; :class:`ToolRequestError` for a shape vLLM refuses."""
    if not isinstance(tools, list):
        raise ToolRequestError("`tools` must be an array of tools", "tools")
    if not tools:
        raise ToolRequestError(
            "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.",
            "tools",
        )
    functions = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            raise ToolRequestError(f"`tools[{i}].function` is required", f"body.tools.{i}.function")
        if not isinstance(function.get("name"), str) or not function["name"]:
            raise ToolRequestError(f"`tools[{i}].function.name` is required", f"body.tools.{i}.function.name")
        functions.append(function)
    return functions


def tool_mode(body: dict[str, Any], parser: bool = True) -> tuple[str, list[dict[str, Any]]]:
    """What the request asks of tools: ``("none" | "auto" | "required" | "named:NAME", functions)``.

    As vLLM: ``tools`` given without ``tool_choice`` means "auto"; ``tool_choice`` without ``tools``, an
    unknown value or a named function not in ``tools`` raise :class:`ToolRequestError` (HTTP 400). Without a
    tool-call ``parser`` (a stock ``vllm serve``) any choice but "none" is refused with vLLM 0.32's message.
    """
    mode, functions = _tool_mode(body)
    if parser or mode == "none":
        return mode, functions
    raise no_parser_error(mode)


def no_parser_error(mode: str) -> ToolRequestError:
    """vLLM 0.32's refusal of tool choice ``mode`` ("auto", "required", "named:NAME") by a server started without a
    tool-call parser."""
    if mode == "auto":
        return ToolRequestError(
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
        )
    what = f'function "{mode[len("named:") :]}"' if mode.startswith("named:") else f'"{mode}"'
    return ToolRequestError(f"tool_choice={what} requires --tool-call-parser to be set")


def _tool_mode(body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if tools is None:
        if choice is not None and choice != "none":
            raise ToolRequestError("When using `tool_choice`, `tools` must be set.", "tool_choice")
        return "none", []
    functions = _functions(tools)
    if choice is None:
        choice = "auto"
    if choice in ("none", "auto", "required"):
        return choice, functions
    if not isinstance(choice, dict):
        raise ToolRequestError(
            f'Invalid value for `tool_choice`: {choice}! Only named tools, "none", "auto" or "required" are supported.',
            "tool_choice",
        )
    usage = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'
    function = choice.get("function")
    if not isinstance(function, dict):
        raise ToolRequestError(
            f"Invalid value for `function`: `{function}` in `tool_choice`! {usage}", "tool_choice.function"
        )
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ToolRequestError(
            f"Invalid `name` in `function`: `{name}` in `tool_choice`! {usage}", "tool_choice.function.name"
        )
    if not any(f["name"] == name for f in functions):
        raise ToolRequestError(
            "The tool specified in `tool_choice` does not match any of the specified `tools`", "tool_choice"
        )
    return f"named:{name}", functions


def plan_tool_call(
    rng: random.Random, mode: str, functions: list[dict[str, Any]], call_share: float, fill_tokens: int | None = None
) -> ToolCall | None:
    """The call an answer makes for ``mode`` (from :func:`tool_mode`), or ``None`` for a text answer.

    "required" and a named function always call; "auto" calls with probability ``call_share``; "none"
    never. The function (unless named), the id and the arguments are drawn from ``rng``. ``fill_tokens``
    (``ignore_eos``: a fixed output length) grows the call to that many tokens with words added to its
    last string argument; a call with no string argument keeps its own length.
    """
    if mode == "none" or not functions:
        return None
    if mode == "auto" and rng.random() >= call_share:
        return None
    if mode.startswith("named:"):
        name = mode[len("named:") :]
        function = next(f for f in functions if f["name"] == name)
        finish = "stop"
    else:
        function = functions[rng.randrange(len(functions))]
        finish = "tool_calls"
    call_id = f"chatcmpl-tool-{rng.getrandbits(64):016x}"
    parameters = function.get("parameters")
    schema: dict[str, Any] = parameters if isinstance(parameters, dict) else {"type": "object"}
    value = _value(rng, schema, 0)
    args = value if isinstance(value, dict) else {}
    call = ToolCall(call_id, function["name"], _tokens(args), finish)
    if fill_tokens is not None and fill_tokens > call.tokens:
        padded = _padded(rng, args, schema, fill_tokens - call.tokens)
        if padded is not None and 1 + len(padded) == fill_tokens:
            call.argument_tokens = padded
    return call


def _tokens(args: Any) -> list[str]:
    return _TOKEN.findall(json.dumps(args, ensure_ascii=False))


def _padded(rng: random.Random, args: dict[str, Any], schema: dict[str, Any], extra: int) -> list[str] | None:
    """The tokens of ``args`` with ``extra`` words appended to its last free string value (not one of an
    ``enum``, which must stay as it is; ``None``: it has none)."""
    holder: Any = None
    key: Any = None
    stack: list[tuple[Any, dict[str, Any]]] = [(args, schema)]
    while stack:  # breadth-first; the last string found wins
        node, node_schema = stack.pop(0)
        if isinstance(node, dict):
            found = node_schema.get("properties")
            props: dict[str, Any] = found if isinstance(found, dict) else {}
            items = [(k, v, props.get(k)) for k, v in node.items()]
        else:
            item = node_schema.get("items")
            items = [(i, v, item) for i, v in enumerate(node)]
        for k, v, sub in items:
            sub_schema = sub if isinstance(sub, dict) else {}
            if isinstance(v, str) and "enum" not in sub_schema:
                holder, key = node, k
            elif isinstance(v, dict | list):
                stack.append((v, sub_schema))
    if holder is None:
        return None
    holder[key] = holder[key] + filler_text(rng, extra)
    return _tokens(args)


def _value(rng: random.Random, schema: dict[str, Any], depth: int) -> Any:
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][rng.randrange(len(schema["enum"]))]
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties") if depth < _MAX_DEPTH else None
        if not isinstance(props, dict):
            return {}
        listed = schema.get("required")
        required = listed if isinstance(listed, list) else []
        return {
            name: _value(rng, sub if isinstance(sub, dict) else {}, depth + 1)
            for name, sub in props.items()
            if name in required or rng.random() < 0.5
        }
    if kind == "array":
        item = schema.get("items")
        items: dict[str, Any] = item if isinstance(item, dict) else {}
        return [_value(rng, items, depth + 1) for _ in range(rng.randint(1, 3))] if depth < _MAX_DEPTH else []
    if kind == "integer":
        return rng.randint(0, 1000)
    if kind == "number":
        return round(rng.uniform(0, 100), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return filler_text(rng, rng.randint(1, 6)).strip()


def tool_delta(call: ToolCall, first: int, k: int) -> dict[str, Any]:
    """The ``delta`` of the event carrying the call's tokens ``first .. first+k-1`` (token 0: the name)."""
    if first == 0:
        entry: dict[str, Any] = {"id": call.call_id, "type": "function", "index": 0, "function": {"name": call.name}}
        if k > 1:
            entry["function"]["arguments"] = "".join(call.argument_tokens[: k - 1])
    else:
        entry = {"index": 0, "function": {"arguments": "".join(call.argument_tokens[first - 1 : first - 1 + k])}}
    return {"content": None, "tool_calls": [entry]}
