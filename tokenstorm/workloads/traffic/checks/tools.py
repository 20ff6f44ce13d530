"""Checks of tool calls: the called tool was offered, and its arguments parse as a JSON object that the
tool's parameter schema accepts (types, required keys, enums, no unknown keys where the schema forbids
them — the parts of JSON Schema that function tools use)."""

from __future__ import annotations

import json
from typing import Any

from . import Check, CheckCall, Reply

__all__ = ["schema_problem", "tool_args", "tool_exists"]

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _functions(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, dict) else {}
    return out


def schema_problem(value: Any, schema: dict[str, Any], where: str = "arguments") -> str | None:
    """Why ``value`` does not meet ``schema`` (``None``: it does)."""
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
    if kinds:
        ok = any(
            isinstance(value, _TYPES.get(k, ())) and not (k in ("integer", "number") and isinstance(value, bool))
            for k in kinds
        )
        if not ok:
            return f"{where} is {type(value).__name__}, not {'/'.join(kinds)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} {value!r} is not one of {schema['enum']}"
    if isinstance(value, dict):
        found = schema.get("properties")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
        for key in schema.get("required") or ():
            if key not in value:
                return f"{where} lacks required {key!r}"
        for key, item in value.items():
            if key in props:
                problem = schema_problem(item, props[key], f"{where}.{key}")
                if problem:
                    return problem
            elif schema.get("additionalProperties") is False:
                return f"{where} has unknown key {key!r}"
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problem = schema_problem(item, schema["items"], f"{where}[{i}]")
            if problem:
                return problem
    return None


def tool_exists(tools: list[dict[str, Any]]) -> Check:
    """Every tool the answer called is one the request offered."""
    return CheckCall("tool_exists", _tool_exists, (tuple(sorted(_functions(tools))),))


def _tool_exists(reply: Reply, names: tuple[str, ...]) -> bool | str | None:
    if not reply.tool_calls:
        return None
    for call in reply.tool_calls:
        name = (call.get("function") or {}).get("name")
        if name not in names:
            return f"called {name!r}, not an offered tool ({', '.join(names)})"
    return True


def tool_args(tools: list[dict[str, Any]]) -> Check:
    """Every call's arguments are a JSON object its tool's schema accepts (calls to unknown tools are
    ``tool_exists``' to judge). A call cut at ``max_tokens`` (finish ``length``) is not judged."""
    return CheckCall("tool_args", _tool_args, (_functions(tools),))


def _tool_args(reply: Reply, schemas: dict[str, dict[str, Any]]) -> bool | str | None:
    if reply.finish_reason == "length":
        return None  # cut at max_tokens: the budget's doing, not the model's (give the step more tokens)
    judged = False
    for call in reply.tool_calls:
        fn = call.get("function") or {}
        schema = schemas.get(str(fn.get("name")))
        if schema is None:
            continue
        judged = True
        raw = fn.get("arguments") or ""
        try:
            args = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            return f"{fn.get('name')}: arguments are not JSON ({exc.msg} at {exc.pos}): {raw[:60]!r}"
        if not isinstance(args, dict):
            return f"{fn.get('name')}: arguments are a JSON {type(args).__name__}, not an object"
        problem = schema_problem(args, schema)
        if problem:
            return f"{fn.get('name')}: {problem}"
    return True if judged else None
