"""The OpenAI-compatible JSON the emulator reads and writes.

What a completion request asks for (its prompt's text and size in tokens), the filler text it
answers with, and the bodies it sends: a whole (non-streamed) response, or a stream's SSE events
and its closing usage event (with ``prompt_tokens_details.cached_tokens`` and ``created_cache_tokens``, as
vLLM started with ``--enable-prompt-tokens-details`` sends it). HTTP framing (status line, chunked encoding) is the
server's business; tool calls are ``_tools``'.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BYTES_PER_TOKEN",
    "EN_WORDS",
    "ERROR_FAULTS",
    "ZH_WORDS",
    "Plan",
    "chunk_sizes",
    "estimate_prompt_tokens",
    "fault_error",
    "filler_text",
    "prompt_text",
    "prompt_tokens_of",
    "sse_event",
    "usage_event",
    "whole_response",
]

#: bytes of prompt text per token: how the emulator, which has no tokenizer, sizes a prompt
BYTES_PER_TOKEN = 4
#: Faults answered with an HTTP error and a JSON body instead of a completion.
ERROR_FAULTS = ("429", "500", "503", "echo_auth")
#: Headers the ``echo_auth`` fault repeats, by their lower-cased name, as the error shows them.
_ECHOED_HEADERS = {"authorization": "Authorization", "api-key": "api-key", "x-api-key": "x-api-key"}

#: English filler words (a token each): lower-case letters only, so any of them is also a Python identifier
EN_WORDS = (
    "the",
    "model",
    "returns",
    "tokens",
    "at",
    "a",
    "steady",
    "pace",
    "while",
    "scheduler",
    "batches",
    "requests",
    "and",
    "cache",
    "holds",
    "keys",
    "values",
    "for",
    "every",
    "sequence",
    "in",
    "flight",
    "server",
    "answer",
    "review",
    "clause",
    "party",
    "payment",
    "notice",
    "term",
    "risk",
    "change",
    "data",
    "report",
    "result",
    "value",
    "length",
    "context",
    "prompt",
    "queue",
    "latency",
    "throughput",
    "memory",
    "block",
    "prefix",
    "stream",
    "event",
    "client",
    "record",
    "check",
    "test",
    "function",
    "module",
    "error",
    "output",
    "input",
    "budget",
    "limit",
    "window",
    "batch",
    "worker",
    "signal",
    "table",
    "summary",
)
#: Chinese filler words (a token each): CJK characters only
ZH_WORDS = (
    "模型",
    "请求",
    "服务",
    "延迟",
    "吞吐",
    "缓存",
    "调度",
    "批次",
    "序列",
    "令牌",
    "输出",
    "输入",
    "长度",
    "上下文",
    "合同",
    "条款",
    "责任",
    "义务",
    "付款",
    "期限",
    "争议",
    "解决",
    "通知",
    "保密",
    "数据",
    "安全",
    "系统",
    "性能",
    "测试",
    "结果",
    "分析",
    "报告",
    "风险",
    "建议",
    "修改",
    "审查",
    "双方",
    "甲方",
    "乙方",
    "约定",
    "执行",
    "费用",
    "标准",
    "质量",
    "交付",
    "验收",
    "变更",
    "终止",
    "赔偿",
    "损失",
    "范围",
    "时间",
    "方案",
    "流程",
    "记录",
    "用户",
    "问题",
    "答案",
    "内容",
    "说明",
    "目标",
    "资源",
    "容量",
    "负载",
)


@dataclass(slots=True)
class Plan:
    """What one completion will answer: its endpoint, sizes, finish reason and usage options."""

    chat: bool
    model: str
    prompt_tokens: int
    output_tokens: int
    finish: str
    reasoning_tokens: int
    include_usage: bool
    continuous: bool
    #: prompt tokens the prefix cache held (``usage.prompt_tokens_details.cached_tokens``)
    cached_tokens: int = 0
    #: prompt tokens computed and written to the prefix cache (``created_cache_tokens``: its full blocks not held)
    created_tokens: int = 0
    #: the text answer's tokens after the reasoning, one string each (``_answers.token_text`` reads them)
    pieces: list[str] = field(default_factory=list)
    #: the reasoning's tokens, one string each
    thinking: list[str] = field(default_factory=list)
    #: text held back by an empty event (partial UTF-8), sent with the next one
    held: str = ""
    #: where tokens past ``pieces`` come from (a long answer's filler, drawn as it streams): a function of j
    more: Callable[[int], str] | None = None


def filler_text(rng: random.Random, n_tokens: int) -> str:
    """``n_tokens`` English words drawn from ``rng``, each with a leading space (one word per token)."""
    words = EN_WORDS
    return "".join(" " + words[rng.randrange(len(words))] for _ in range(n_tokens))


def prompt_text(body: dict[str, Any], chat: bool) -> str:
    """The prompt as the emulator sizes and caches it: a chat's message contents joined by newlines (an
    assistant message's ``tool_calls`` as the JSON of their functions; the ``tools`` schemas after the
    leading system messages, where chat templates render them), or a completion's ``prompt``."""
    if not chat:
        prompt = body.get("prompt", "")
        return prompt if isinstance(prompt, str) else json.dumps(prompt)
    messages = body.get("messages")
    messages = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    tools = body.get("tools")
    tools_at = 0
    while tools_at < len(messages) and messages[tools_at].get("role") == "system":
        tools_at += 1
    parts: list[str] = []
    for i, msg in enumerate(messages):
        if tools and i == tools_at:
            parts.append(json.dumps(tools, ensure_ascii=False))
        content = msg.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
        calls = msg.get("tool_calls")
        if isinstance(calls, list) and calls:
            parts.append(json.dumps([c.get("function") for c in calls if isinstance(c, dict)], ensure_ascii=False))
    if tools and tools_at == len(messages):
        parts.append(json.dumps(tools, ensure_ascii=False))
    return "\n".join(parts)


def estimate_prompt_tokens(body: dict[str, Any], chat: bool) -> int:
    """The prompt's size in tokens, estimated as its UTF-8 bytes / 4 (at least 1)."""
    return prompt_tokens_of(prompt_text(body, chat).encode("utf-8"))


def prompt_tokens_of(data: bytes) -> int:
    """The size in tokens of a prompt of UTF-8 bytes ``data``: bytes / 4, rounded (at least 1)."""
    return max(1, round(len(data) / BYTES_PER_TOKEN))


def _object(plan: Plan) -> str:
    return "chat.completion.chunk" if plan.chat else "text_completion"


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _final_usage(plan: Plan, completion: int) -> dict[str, Any]:
    """A request's closing usage: vLLM adds ``prompt_tokens_details`` there, never to a stream's per-event usage."""
    details = {"cached_tokens": plan.cached_tokens, "created_cache_tokens": plan.created_tokens}
    return {**_usage(plan.prompt_tokens, completion), "prompt_tokens_details": details}


def sse_event(
    plan: Plan, rid: str, created: int, delta: dict[str, Any], finish: str | None, usage_tokens: int | None
) -> bytes:
    """One ``data:`` event of a stream carrying ``delta``; with usage so far when ``usage_tokens`` is given."""
    if plan.chat:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    else:
        choice = {"index": 0, "text": delta["text"], "logprobs": None, "finish_reason": finish, "stop_reason": None}
    obj: dict[str, Any] = {
        "id": rid,
        "object": _object(plan),
        "created": created,
        "model": plan.model,
        "choices": [choice],
    }
    if usage_tokens is not None:
        obj["usage"] = _usage(plan.prompt_tokens, usage_tokens)
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def usage_event(
    plan: Plan, rid: str, created: int, completion_tokens: int, metrics: dict[str, Any] | None = None
) -> bytes:
    """The choice-less ``data:`` event that ends a stream asked for ``include_usage``; ``metrics``: the request's
    own timing beside the usage (vLLM's ``--enable-per-request-metrics``)."""
    usage: dict[str, Any] = {
        "id": rid,
        "object": _object(plan),
        "created": created,
        "model": plan.model,
        "choices": [],
        "usage": _final_usage(plan, completion_tokens),
    }
    if metrics is not None:
        usage["metrics"] = metrics
    return b"data: " + json.dumps(usage).encode() + b"\n\n"


def whole_response(plan: Plan, text: str, tool_call: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of a non-streamed completion answering ``text``, or the call ``tool_call`` (``{"id",
    "type", "function": {"name", "arguments"}}``: content "" beside it, as vLLM answers)."""
    if plan.chat:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_call is not None:
            message = {"role": "assistant", "content": "", "tool_calls": [tool_call]}
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": plan.finish}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "finish_reason": plan.finish}
        obj = "text_completion"
    return {
        "id": "cmpl-" + uuid.uuid4().hex[:24],
        "object": obj,
        "created": int(time.time()),
        "model": plan.model,
        "choices": [choice],
        "usage": _final_usage(plan, plan.output_tokens),
    }


def fault_error(fault: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """The HTTP status and vLLM-shaped JSON error body of an error fault (one of :data:`ERROR_FAULTS`).

    ``echo_auth`` is a 500 whose message repeats the request's credential headers verbatim, as a
    gateway that echoes headers in its errors does: what a client must mask before it logs them.
    """
    if fault == "echo_auth":
        echoed = "; ".join(f"{shown}: {headers[name]}" for name, shown in _ECHOED_HEADERS.items() if name in headers)
        message = "emulated gateway error; request headers " + (echoed or "(no credentials sent)")
        return 500, {"error": {"message": message, "type": "InternalServerError", "param": None, "code": 500}}
    status = int(fault)
    return status, {"error": {"message": f"emulated HTTP {status}", "type": "EmulatedError", "code": status}}


def chunk_sizes(tokens: int, per_chunk: int, split: int) -> list[int]:
    """Tokens per event: ``per_chunk`` at a time, an event ending at token ``split`` (0: none) before the rest."""
    sizes: list[int] = []
    for begin, end in ((0, split), (split, tokens)) if 0 < split < tokens else ((0, tokens),):
        sizes.extend(min(per_chunk, end - t) for t in range(begin, end, per_chunk))
    return sizes
