"""The OpenAI Responses API's answers (``POST /v1/responses``) as vLLM 0.32 streams them.

vLLM streams a Responses answer as typed events (``openai/responses/serving.py`` and ``streaming_events.py``,
the simple, non-Harmony path): ``response.created`` and ``response.in_progress`` first; an output item opened
where output of another kind begins — ``response.output_item.added`` (a ``message``, ``reasoning`` or
``function_call`` item with its ``call_id`` and ``name``) and, for text, ``response.content_part.added`` — then
its deltas (``response.output_text.delta``, ``response.reasoning_text.delta``,
``response.function_call_arguments.delta``; an empty text or argument delta is dropped, an empty reasoning delta
is not); the item closed by its ``*.done`` events; ``response.completed`` with the whole response, its ``usage``
and, with ``--enable-per-request-metrics``, its ``metrics`` (``status: incomplete``,
``incomplete_details.reason: max_output_tokens`` when cut there). Every event has a ``sequence_number`` and an
``event: TYPE`` line; errors are chat's shape. :class:`ResponsesFraming` does the same from the emulator's chat
deltas; the request's conversion is ``_responses_request``'s.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from ._config import EmulatorConfig
from ._endless import EndlessFrames
from ._framing import Api, Converted, Framing, Whole, compact, same_error
from ._payloads import Plan
from ._responses_request import convert

__all__ = ["RESPONSES", "ResponsesFraming"]


def _hex() -> str:
    return uuid.uuid4().hex[:16]


def _number(value: Any, default: float) -> float:
    """A sampling parameter as vLLM echoes it: a float, its default when not given."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as vLLM echoes it in the response (a function tool with every field of its model)."""
    if tool.get("type") != "function":
        return tool
    return {
        "name": tool["name"],
        "parameters": tool.get("parameters"),
        "strict": tool.get("strict"),
        "type": "function",
        "allowed_callers": None,
        "async": None,
        "defer_loading": tool.get("defer_loading"),
        "description": tool.get("description"),
        "output_schema": None,
    }


def _call_item(item_id: str, call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
        "type": "function_call",
        "id": item_id,
        "async": None,
        "caller": None,
        "namespace": None,
        "status": status,
    }


def _text_part(text: str, logprobs: list[Any] | None) -> dict[str, Any]:
    return {"annotations": [], "text": text, "type": "output_text", "logprobs": logprobs}


class ResponsesFraming(Framing):
    """One answer as Responses events: the response announced, items opened, their deltas, their ends, the whole."""

    def __init__(self, plan: Plan, asked: Converted, rid: str, created: int, config: EmulatorConfig) -> None:
        self.plan = plan
        self.rid = rid
        self.created = created
        raw = asked.raw
        limit = config.max_model_len - plan.prompt_tokens
        given = raw.get("max_output_tokens")
        choice = raw.get("tool_choice", "auto")
        if not raw.get("tools") and choice in ("auto", "none"):
            choice = "none"
        elif isinstance(choice, dict):
            choice = {"name": choice.get("name"), "type": choice.get("type")}
        reasoning = raw.get("reasoning")
        keys = ("context", "effort", "generate_summary", "mode", "summary")
        self.request = {
            "parallel_tool_calls": raw.get("parallel_tool_calls", True) is not False,
            "temperature": _number(raw.get("temperature"), 1.0),
            "tool_choice": choice,
            "tools": [_tool(t) for t in raw.get("tools") or []],
            "top_p": _number(raw.get("top_p"), 1.0),
            "background": bool(raw.get("background")),
            "max_output_tokens": min(given, limit) if isinstance(given, int) else limit,
            "max_tool_calls": raw.get("max_tool_calls"),
            "previous_response_id": raw.get("previous_response_id"),
            "prompt": None,
            "reasoning": {k: reasoning.get(k) for k in keys} if isinstance(reasoning, dict) else None,
            "service_tier": raw.get("service_tier") or "auto",
        }
        self.said = (
            raw.get("instructions"),
            raw.get("metadata"),
            raw.get("text"),
            raw.get("truncation"),
            raw.get("user"),
        )
        self.seq = 0
        #: the open item: its kind ("message", "reasoning", "function_call"; None: none open), id, text so far
        self.kind: str | None = None
        self.item_id = ""
        self.text = ""
        self.call = ("", "")
        self.output_index = 0
        self.output: list[dict[str, Any]] = []
        self.tokens = 0
        self.reasoning_tokens = 0

    def _emit(self, kind: str, fields: dict[str, Any], name: str | None = None) -> bytes:
        data = dict(sorted({**fields, "sequence_number": self.seq, "type": kind}.items()))
        if name is not None:
            data["name"] = name  # after "type", as vLLM's model orders it
        self.seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + compact(data) + b"\n\n"

    def response(self, status: str, usage: dict[str, Any] | None, metrics: dict[str, Any] | None) -> dict[str, Any]:
        """The response object as the created, in-progress and completed events (and a whole answer) carry it."""
        instructions, metadata, text, truncation, user = self.said
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        body: dict[str, Any] = {
            "id": self.rid,
            "created_at": self.created,
            "incomplete_details": incomplete,
            "instructions": instructions,
            "metadata": metadata,
            "model": self.plan.model,
            "object": "response",
            "output": list(self.output),
            **self.request,
            "status": status,
            "text": text,
            "top_logprobs": None,
            "truncation": truncation or "disabled",
            "usage": usage,
            "user": user,
        }
        if metrics is not None:
            body["metrics"] = metrics
        return {
            **body,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "input_messages": None,
            "output_messages": None,
        }

    def _usage(self, tokens: int, reasoning_tokens: int) -> dict[str, Any]:
        plan = self.plan
        details = {
            "cached_tokens": plan.cached_tokens,
            "cache_write_tokens": plan.created_tokens,
            "input_tokens_per_turn": [],
            "cached_tokens_per_turn": [],
        }
        output = {
            "reasoning_tokens": reasoning_tokens,
            "tool_output_tokens": 0,
            "output_tokens_per_turn": [],
            "tool_output_tokens_per_turn": [],
        }
        return {
            "input_tokens": plan.prompt_tokens,
            "input_tokens_details": details,
            "output_tokens": tokens,
            "output_tokens_details": output,
            "total_tokens": plan.prompt_tokens + tokens,
        }

    def opening(self) -> bytes:
        created = self.response("in_progress", None, None)
        return self._emit("response.created", {"response": created}) + self._emit(
            "response.in_progress", {"response": created}
        )

    def _open(self, kind: str, call: tuple[str, str] = ("", "")) -> bytes:
        out = self._close()
        self.kind, self.text, self.call = kind, "", call
        at = {"output_index": self.output_index}
        if kind == "function_call":
            self.item_id = f"fc_{_hex()}"
            return out + self._emit(
                "response.output_item.added", {"item": _call_item(self.item_id, *call, "", "in_progress"), **at}
            )
        if kind == "reasoning":
            self.item_id = f"rs_{_hex()}"
            item: dict[str, Any] = {
                "id": self.item_id,
                "summary": [],
                "type": "reasoning",
                "content": None,
                "encrypted_content": None,
                "status": "in_progress",
            }
            part: dict[str, Any] = {"text": "", "type": "reasoning_text"}
        else:
            self.item_id = f"msg_{_hex()}"
            item = {
                "id": self.item_id,
                "content": [],
                "role": "assistant",
                "status": "in_progress",
                "type": "message",
                "phase": None,
            }
            part = _text_part("", [])
        out += self._emit("response.output_item.added", {"item": item, **at})
        return out + self._emit(
            "response.content_part.added", {"content_index": 0, "item_id": self.item_id, "part": part, **at}
        )

    def _close(self) -> bytes:
        if self.kind is None:
            return b""
        at = {"item_id": self.item_id, "output_index": self.output_index}
        text = self.text
        if self.kind == "function_call":
            out = self._emit("response.function_call_arguments.done", {"arguments": text, **at}, name=self.call[1])
            item = _call_item(self.item_id, *self.call, text, "completed")
        elif self.kind == "reasoning":
            part = {"text": text, "type": "reasoning_text"}
            out = self._emit("response.reasoning_text.done", {"content_index": 0, "text": text, **at})
            out += self._emit("response.content_part.done", {"content_index": 0, "part": part, **at})
            item = {
                "id": self.item_id,
                "summary": [],
                "type": "reasoning",
                "content": [part],
                "encrypted_content": None,
                "status": "completed",
            }
        else:
            part = _text_part(text, None)
            out = self._emit("response.output_text.done", {"content_index": 0, "logprobs": [], "text": text, **at})
            out += self._emit("response.content_part.done", {"content_index": 0, "part": part, **at})
            item = {
                "id": self.item_id,
                "content": [part] if text else [],
                "role": "assistant",
                "status": "completed",
                "type": "message",
                "phase": None,
            }
        out += self._emit("response.output_item.done", {"item": item, "output_index": self.output_index})
        self.output.append(item)
        self.output_index += 1
        self.kind = None
        return out

    def step(self, delta: dict[str, Any], finish: str | None, tokens: int) -> tuple[bytes, bool]:
        new, self.tokens = tokens - self.tokens, tokens
        out = b""
        token = False
        at = {"item_id": "", "output_index": 0}
        reasoning = delta.get("reasoning_content")
        if reasoning is not None:
            out += self._open("reasoning") if self.kind != "reasoning" else b""
            at = {"item_id": self.item_id, "output_index": self.output_index}
            out += self._emit("response.reasoning_text.delta", {"content_index": 0, "delta": reasoning, **at})
            self.text, self.reasoning_tokens, token = self.text + reasoning, self.reasoning_tokens + new, True
        text = delta.get("content")
        if text:
            out += self._open("message") if self.kind != "message" else b""
            at = {"item_id": self.item_id, "output_index": self.output_index}
            out += self._emit("response.output_text.delta", {"content_index": 0, "delta": text, "logprobs": [], **at})
            self.text, token = self.text + text, True
        for call in delta.get("tool_calls") or ():
            function = call.get("function")
            if function is None:
                continue
            if self.kind != "function_call":
                out += self._open("function_call", (str(call.get("id")), str(function.get("name"))))
            if function.get("arguments"):
                at = {"item_id": self.item_id, "output_index": self.output_index}
                out += self._emit("response.function_call_arguments.delta", {"delta": function["arguments"], **at})
                self.text, token = self.text + function["arguments"], True
        return out, token

    def malformed(self) -> bytes:
        return b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":\n\n'

    def closing(self, tokens: int, metrics: dict[str, Any] | None, ended: bool) -> bytes:
        out = self._close()
        if not ended:
            return out
        status = "incomplete" if self.plan.finish == "length" else "completed"
        done = self.response(status, self._usage(tokens, self.reasoning_tokens), metrics)
        return out + self._emit("response.completed", {"response": done})

    def whole(self, answer: Whole, metrics: dict[str, Any] | None) -> bytes:
        if answer.reasoning:
            part = {"text": answer.reasoning, "type": "reasoning_text"}
            self.output.append(
                {
                    "id": f"rs_{_hex()}",
                    "summary": [],
                    "type": "reasoning",
                    "content": [part],
                    "encrypted_content": None,
                    "status": None,
                }
            )
        text, call = answer.text, answer.call
        if call is not None and not _is_json(call["function"]["arguments"]):  # the parser gives the text back
            text, call = text + call["function"]["arguments"], None
        if text:
            self.output.append(
                {
                    "id": f"msg_{_hex()}",
                    "content": [_text_part(text, None)],
                    "role": "assistant",
                    "status": "completed",
                    "type": "message",
                    "phase": None,
                }
            )
        if call is not None:
            function = call["function"]
            self.output.append(
                _call_item(f"fc_{_hex()}", call["id"], function["name"], function["arguments"], "completed")
            )
        status = "incomplete" if self.plan.finish == "length" else "completed"
        reasoning_tokens = self.plan.reasoning_tokens if answer.reasoning else 0
        return compact(self.response(status, self._usage(self.plan.output_tokens, reasoning_tokens), metrics))


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _endless(model: str) -> EndlessFrames:
    plan = Plan(True, model, 0, 0, "length", 0, False, False)
    framing = ResponsesFraming(
        plan, Converted(True, {}, "none", [], {}), "resp_endless", int(time.time()), EmulatorConfig()
    )
    opening = framing.opening() + framing.step({"content": " tok"}, None, 1)[0]
    whole = b'{"id":"resp_endless","object":"response","output":[{"type":"message","content":'
    whole += b'[{"type":"output_text","text":"'
    return EndlessFrames(opening, lambda n: framing.step({"content": " tok"}, None, n + 1)[0], whole)


#: the Responses API, for the server's routes
RESPONSES = Api("responses", convert, same_error, ResponsesFraming, "resp_", compact, _endless)
