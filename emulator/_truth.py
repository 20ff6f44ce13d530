"""What the emulator really imposed on each request: the timing truth tests compare against."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Truth", "prompt_digest", "truth_dict"]


@dataclass(slots=True)
class Truth:
    """One request as the emulator served it: the delays it imposed and the times it wrote."""

    request_id: str
    fault: str | None
    prompt_tokens: int
    output_tokens: int
    imposed_ttft_s: float
    imposed_itl_s: float
    queue_s: float = 0.0
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    reasoning_tokens: int = 0
    #: arrival → the chunk carrying the first answer token, when the request reasoned first
    ttft_answer_s: float | None = None
    #: what was asked (messages or prompt), hashed: A/B tests check both targets got the same
    prompt_sha: str = ""
    #: prompt tokens the prefix cache held (not prefilled again; ``usage.prompt_tokens_details.cached_tokens``)
    cached_tokens: int = 0
    #: arrival → the event carrying the first tool-call delta (the call's id and name); None: no call streamed
    ttft_tool_s: float | None = None
    #: arrival → the last event carrying a tool-call delta (the call complete: its last argument fragment)
    tool_call_s: float | None = None
    #: tool calls the answer made (0 or 1)
    tool_calls: int = 0
    #: output tokens of the events carrying tool-call deltas (the name event and the argument fragments);
    #: None when no call was made
    tool_call_tokens: int | None = None
    #: the ``id`` of each call made, in order (what the next request's ``tool`` message answers)
    tool_call_ids: list[str] = field(default_factory=list)
    #: the wrong answers (``--wrong-*`` knobs, ``WRONG_KINDS``) this answer was given; [] when it is right
    wrong: list[str] = field(default_factory=list)


def truth_dict(t: Truth) -> dict[str, Any]:
    """``t`` as ``/emulator/truth`` and ``--truth-log`` give it."""
    return {
        "request_id": t.request_id,
        "fault": t.fault,
        "prompt_tokens": t.prompt_tokens,
        "output_tokens": t.output_tokens,
        "imposed_ttft_s": t.imposed_ttft_s,
        "imposed_itl_s": t.imposed_itl_s,
        "queue_s": t.queue_s,
        "ttft_s": t.ttft_s,
        "itl_s": t.itl_s,
        "reasoning_tokens": t.reasoning_tokens,
        "ttft_answer_s": t.ttft_answer_s,
        "prompt_sha": t.prompt_sha,
        "cached_tokens": t.cached_tokens,
        "ttft_tool_s": t.ttft_tool_s,
        "tool_call_s": t.tool_call_s,
        "tool_calls": t.tool_calls,
        "tool_call_tokens": t.tool_call_tokens,
        "tool_call_ids": t.tool_call_ids,
        "wrong": t.wrong,
    }


def prompt_digest(body: dict[str, Any]) -> str:
    """A short hash of the request's messages or prompt (not the model, ids or sampling options)."""
    asked = body.get("messages") if body.get("messages") is not None else body.get("prompt")
    return hashlib.sha256(json.dumps(asked, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
