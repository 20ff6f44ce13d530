"""What one simulated user asks the server for (:class:`CompletionRequest`), and where each API takes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["API_PATHS", "CompletionRequest"]

#: each API's request path (after any base-URL prefix)
API_PATHS = {
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "messages": "/v1/messages",
    "responses": "/v1/responses",
}


@dataclass(slots=True)
class CompletionRequest:
    """What one simulated user asks the server for."""

    workload: str
    #: the API: chat and completions (OpenAI), messages (Anthropic Messages), responses (OpenAI Responses); a chat
    #: request's conversation is said in the other two by :mod:`.api_bodies`
    endpoint: Literal["chat", "completions", "messages", "responses"] = "chat"
    messages: list[dict[str, Any]] | None = None
    prompt: str | None = None
    max_tokens: int | None = 128
    temperature: float | None = None
    ignore_eos: bool = False
    stream: bool = True
    stop: list[str] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    requested_prompt_tokens: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: keep the answer text (``LlmClient.last_text``), e.g. to grow a chat history; never recorded
    collect_text: bool = False
    #: the record's id (A/B twins share one); empty: a fresh random one
    request_id: str = ""
    #: the session this request is a step of (``RequestRecord.session_id``) and its 0-based step
    session_id: str = ""
    step: int | None = None
    #: the traffic model's plan has no step after this one (``RequestRecord.session_end``)
    final_step: bool = False
    #: OpenAI function tools offered (``tools``) and ``tool_choice`` ("auto", "required", "none", or
    #: ``{"type": "function", "function": {"name": ...}}``); sent only when set
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    #: checks of the answer (``tokenstorm.workloads.traffic.checks``), run after the record is timed; the answer's text
    #: is kept for them (as ``collect_text``)
    checks: tuple[Any, ...] = ()
    #: contract: where in the document its needle fact sits, 0 (start) to 1 (end) (``RequestRecord.needle_depth``)
    needle_depth: float | None = None

    @property
    def path(self) -> str:
        """The API path (without any base-URL prefix)."""
        return API_PATHS[self.endpoint]
