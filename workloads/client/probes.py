"""What a server can do, asked before any traffic: one small request each."""

from __future__ import annotations

import uuid
from typing import Any

from .client import CompletionRequest, LlmClient

__all__ = ["PROBE_ID_PREFIX", "tool_calling_problem"]

#: the X-Request-Id of every request tokenstorm sends that is not a workload's (never a record): a server's
#: logs and an emulator's truth log tell them apart by it
PROBE_ID_PREFIX = "tokenstorm-probe-"


def tool_calling_problem(client: LlmClient, model: str, tools: list[dict[str, Any]], tool_choice: Any) -> str | None:
    """One line when the server refuses the tool calls agent sessions ask for (a vLLM started without
    ``--enable-auto-tool-choice --tool-call-parser``), found with one 1-token request before any traffic."""
    probe = CompletionRequest("preflight", messages=[{"role": "user", "content": "ping"}], max_tokens=1,
                              stream=False, tools=tools, tool_choice=tool_choice,
                              request_id=f"{PROBE_ID_PREFIX}{uuid.uuid4().hex}")  # fmt: skip
    record = client.complete(probe, model)
    detail = record.error_detail or ""
    if record.status_code != 400 or "tool" not in detail.lower():
        return None  # calls tools (or fails for another reason, which the run's own requests will say)
    return (
        f"the server refuses tool calls ({detail[:200]}); agent sessions need vLLM started with "
        "--enable-auto-tool-choice --tool-call-parser NAME"
    )
