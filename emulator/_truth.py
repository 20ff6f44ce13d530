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
    }


def prompt_digest(body: dict[str, Any]) -> str:
    """A short hash of the request's messages or prompt (not the model, ids or sampling options)."""
    asked = body.get("messages") if body.get("messages") is not None else body.get("prompt")
    return hashlib.sha256(json.dumps(asked, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
