"""What a server can do, asked before any traffic: one small request each."""

from __future__ import annotations

import uuid
from typing import Any

from .api_bodies import in_api
from .client import CompletionRequest, LlmClient
from .request import API_PATHS

__all__ = ["API_NAMES", "PROBE_ID_PREFIX", "api_problem", "tool_calling_problem"]

#: each ``--api`` in words, for the line refusing a server without it
API_NAMES = {
    "chat": "OpenAI chat completions",
    "completions": "OpenAI completions",
    "messages": "Anthropic Messages",
    "responses": "OpenAI Responses",
}

#: the X-Request-Id of every request tokenstorm sends that is not a workload's (never a record): a server's
#: logs and an emulator's truth log tell them apart by it
PROBE_ID_PREFIX = "tokenstorm-probe-"


def api_problem(client: LlmClient, model: str, api: str) -> str | None:
    """One line when the server does not serve ``api`` (its route answers 404 or 405), found with one 1-token
    request before any traffic; ``None`` when it does (or fails otherwise: the run's own requests will say)."""
    ping = [{"role": "user", "content": "ping"}]
    probe = CompletionRequest(
        "preflight", messages=ping, max_tokens=1, stream=False, request_id=f"{PROBE_ID_PREFIX}{uuid.uuid4().hex}"
    )
    record = client.complete(in_api(probe, api), model)
    if record.status_code not in (404, 405):
        return None
    return (
        f"--api {api}: the server does not serve the {API_NAMES[api]} API (POST {API_PATHS[api]} answered "
        f"{(record.error_detail or '')[:120]}); vLLM serves it from 0.32 — or give --api chat"
    )


def tool_calling_problem(
    client: LlmClient, model: str, tools: list[dict[str, Any]], tool_choice: Any, api: str = "chat"
) -> str | None:
    """One line when the server refuses the tool calls agent sessions ask for (a vLLM started without
    ``--enable-auto-tool-choice --tool-call-parser``), found with one 1-token request before any traffic."""
    probe = CompletionRequest(
        "preflight",
        messages=[{"role": "user", "content": "ping"}],
        max_tokens=1,
        stream=False,
        tools=tools,
        tool_choice=tool_choice,
        request_id=f"{PROBE_ID_PREFIX}{uuid.uuid4().hex}",
    )
    record = client.complete(in_api(probe, api), model)
    detail = record.error_detail or ""
    if record.status_code != 400 or "tool" not in detail.lower():
        return None  # calls tools (or fails for another reason, which the run's own requests will say)
    return (
        f"the server refuses tool calls ({detail[:200]}); agent sessions need vLLM started with "
        "--enable-auto-tool-choice --tool-call-parser NAME"
    )
