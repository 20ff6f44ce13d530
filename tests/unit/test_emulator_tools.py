"""The emulator's tool calls: refused as vLLM 0.32 refuses them, shaped as it streams them, and their
arguments valid JSON for the function's schema (checked by a small schema validator written here)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tokenstorm.emulator import EmulatorConfig, check_args
from tokenstorm.emulator._tools import ToolRequestError, plan_tool_call, tool_delta, tool_mode

READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "max_lines": {"type": "integer"}},
            "required": ["path"],
        },
    },
}
#: every kind of schema the argument builder knows: nesting, arrays, enums, a nullable type, no type at all
EDIT = {
    "type": "function",
    "function": {
        "name": "edit",
        "parameters": {
            "type": "object",
            "properties": {
                "file": {"type": "string"},
                "mode": {"enum": ["replace", "insert", "delete"]},
                "line": {"type": "integer"},
                "score": {"type": "number"},
                "dry_run": {"type": "boolean"},
                "note": {"type": ["string", "null"]},
                "anything": {},
                "ranges": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"start": {"type": "integer"}}, "required": ["start"]},
                },
                "meta": {
                    "type": "object",
                    "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
                    "required": ["tags"],
                },
            },
            "required": ["file", "mode", "ranges", "meta"],
        },
    },
}
NO_PARAMS = {"type": "function", "function": {"name": "now"}}

# Events vLLM 0.32 (CPU build, --enable-auto-tool-choice --tool-call-parser hermes) streamed for
# tool_choice "required" (2026-12-02): the call's id/name event, an argument fragment, the usage event.
VLLM_NAME_EVENT = json.loads(
    '{"id":"chatcmpl-939d99215809c6b3","object":"chat.completion.chunk","created":1796194055,"model":"tiny",'
    '"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"id":"chatcmpl-tool-8827f6133742955b",'
    '"type":"function","index":0,"function":{"name":"read_file"}}]},"logprobs":null,"finish_reason":null,'
    '"token_ids":null}],"usage":{"prompt_tokens":489,"total_tokens":519,"completion_tokens":30,'
    '"completion_tokens_details":null}}'
)
VLLM_FRAGMENT_EVENT = json.loads(
    '{"id":"chatcmpl-939d99215809c6b3","object":"chat.completion.chunk","created":1796194055,"model":"tiny",'
    '"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"function":{"arguments":"4"}}]},'
    '"logprobs":null,"finish_reason":null,"token_ids":null}],"usage":{"prompt_tokens":489,"total_tokens":534,'
    '"completion_tokens":45,"completion_tokens_details":null}}'
)


def _valid(value: Any, schema: dict[str, Any]) -> bool:
    """Whether ``value`` satisfies ``schema`` (the JSON-schema subset above)."""
    if "enum" in schema:
        return value in schema["enum"]
    kinds = schema.get("type")
    if kinds is None:
        return True
    checks = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
        "array": lambda v: isinstance(v, list) and all(_valid(x, schema.get("items", {})) for x in v),
        "object": lambda v: (
            isinstance(v, dict)
            and all(k in v for k in schema.get("required", []))
            and all(k in schema.get("properties", {}) and _valid(x, schema["properties"][k]) for k, x in v.items())
        ),
    }
    return any(checks[k](value) for k in ([kinds] if isinstance(kinds, str) else kinds))


@pytest.mark.parametrize("tool", [READ_FILE, EDIT, NO_PARAMS])
def test_arguments_are_json_that_the_functions_schema_accepts_and_stream_one_token_an_event(tool: dict) -> None:
    schema = tool["function"].get("parameters", {"type": "object", "properties": {}})
    optional_seen: set[str] = set()
    for seed in range(200):
        call = plan_tool_call(random.Random(seed), "required", [tool["function"]], 0.0)
        assert call is not None and call.name == tool["function"]["name"] and call.finish == "tool_calls"
        args = json.loads(call.arguments)
        assert _valid(args, schema), (seed, args)
        optional_seen.update(set(args) - set(schema.get("required", [])))
        # the fragments joined are the arguments; no fragment is empty; the name event is the call's first token
        pieces = [tool_delta(call, t, 1)["tool_calls"][0]["function"] for t in range(call.tokens)]
        assert pieces[0] == {"name": call.name}
        assert "".join(p["arguments"] for p in pieces[1:]) == call.arguments
        assert all(p["arguments"] for p in pieces[1:])
    assert optional_seen == set(schema.get("properties", {})) - set(schema.get("required", []))  # each one sometimes


def test_events_have_the_shape_vllm_streams() -> None:
    call = plan_tool_call(random.Random(1), "required", [READ_FILE["function"]], 0.0)
    assert call is not None
    name, fragment = tool_delta(call, 0, 1), tool_delta(call, 1, 1)
    for ours, theirs in ((name, VLLM_NAME_EVENT), (fragment, VLLM_FRAGMENT_EVENT)):
        delta = theirs["choices"][0]["delta"]
        assert list(ours) == list(delta) and ours["content"] is None
        assert [list(e) for e in ours["tool_calls"]] == [list(e) for e in delta["tool_calls"]]
        assert [list(e["function"]) for e in ours["tool_calls"]] == [list(e["function"]) for e in delta["tool_calls"]]
    assert name["tool_calls"][0]["id"].startswith("chatcmpl-tool-") and name["tool_calls"][0]["index"] == 0
    # several tokens an event (--tokens-per-chunk): the name event carries the first fragments too
    merged = tool_delta(call, 0, 3)["tool_calls"][0]["function"]
    assert merged == {"name": call.name, "arguments": "".join(call.argument_tokens[:2])}


def test_choice_picks_the_named_function_or_draws_one_and_auto_calls_at_the_share() -> None:
    functions = [READ_FILE["function"], EDIT["function"]]
    named = plan_tool_call(random.Random(3), "named:edit", functions, 0.0)
    assert named is not None and named.name == "edit" and named.finish == "stop"  # vLLM: a named call ends "stop"
    drawn = {plan_tool_call(random.Random(s), "required", functions, 0.0).name for s in range(40)}  # type: ignore[union-attr]
    assert drawn == {"read_file", "edit"}
    calls = sum(plan_tool_call(random.Random(s), "auto", functions, 0.8) is not None for s in range(2000))
    assert 1520 < calls < 1680  # 0.8 x 2000, beyond 4 standard deviations (17.9) either side
    assert all(plan_tool_call(random.Random(s), "auto", functions, 0.0) is None for s in range(50))
    assert all(plan_tool_call(random.Random(s), "none", functions, 1.0) is None for s in range(50))


def test_a_fixed_length_call_grows_its_last_string_to_the_tokens_asked() -> None:
    for seed in range(50):
        call = plan_tool_call(random.Random(seed), "required", [READ_FILE["function"]], 0.0, fill_tokens=120)
        assert call is not None and call.tokens == 120
        assert _valid(json.loads(call.arguments), READ_FILE["function"]["parameters"])
    # no string argument to grow: the call keeps its own length
    short = plan_tool_call(random.Random(0), "required", [NO_PARAMS["function"]], 0.0, fill_tokens=120)
    assert short is not None and short.arguments == "{}"


@pytest.mark.parametrize(
    ("body", "message", "param"),
    [
        # vLLM 0.32's own messages, recorded from the CPU build
        (
            {"tools": [READ_FILE], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "The tool specified in `tool_choice` does not match any of the specified `tools` (parameter=tool_choice)",
            "tool_choice",
        ),
        (
            {"tool_choice": "required"},
            "When using `tool_choice`, `tools` must be set. (parameter=tool_choice)",
            "tool_choice",
        ),
        (
            {"tools": [READ_FILE], "tool_choice": "sometimes"},
            'Invalid value for `tool_choice`: sometimes! Only named tools, "none", "auto" or "required" are '
            "supported. (parameter=tool_choice)",
            "tool_choice",
        ),
        (
            {"tools": [], "tool_choice": "required"},
            "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely. "
            "(parameter=tools)",
            "tools",
        ),
        ({"tools": [{"type": "function"}]}, "`tools[0].function` is required", "body.tools.0.function"),
        (
            {"tools": [READ_FILE, {"type": "function", "function": {"description": "x"}}]},
            "`tools[1].function.name` is required",
            "body.tools.1.function.name",
        ),
    ],
)
def test_requests_vllm_refuses_are_refused_with_its_message(body: dict, message: str, param: str) -> None:
    with pytest.raises(ToolRequestError) as caught:
        tool_mode(body)
    error = caught.value.body()["error"]
    assert error["message"].startswith(message) and error["param"] == param and error["code"] == 400


@pytest.mark.parametrize(
    ("body", "mode"),
    [
        ({}, "none"),
        ({"tool_choice": "none"}, "none"),
        ({"tools": [READ_FILE]}, "auto"),  # tools without tool_choice: "auto", as vLLM and OpenAI
        ({"tools": [READ_FILE], "tool_choice": "none"}, "none"),
        ({"tools": [READ_FILE], "tool_choice": "required"}, "required"),
        (
            {"tools": [READ_FILE], "tool_choice": {"type": "function", "function": {"name": "read_file"}}},
            "named:read_file",
        ),
    ],
)
def test_what_a_request_asks_of_tools(body: dict, mode: str) -> None:
    assert tool_mode(body)[0] == mode


def test_tool_call_share_and_prefix_cache_flags_are_checked_like_the_others() -> None:
    assert check_args(["--tool-call-share", "0.5", "--prefix-cache-blocks", "0", "--block-size", "32"]) is None
    assert check_args(["--tool-call-share", "1.5"]) == "--tool-call-share 1.5: must be in [0, 1]"
    assert check_args(["--prefix-cache-blocks", "-1"]) == "--prefix-cache-blocks -1: must be >= 0"
    assert check_args(["--prefix-cache-blocks", "lots"]) == "--prefix-cache-blocks 'lots': expected a whole number"
    config = EmulatorConfig()
    assert (config.tool_call_share, config.prefix_cache_blocks) == (0.8, 8192)
