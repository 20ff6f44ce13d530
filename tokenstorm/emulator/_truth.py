"""What the emulator really imposed on each request: the timing truth tests compare against."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Truth", "per_request_metrics", "prompt_digest", "trace_id_of", "truth_dict"]


@dataclass(slots=True)
class Truth:
    """One request as the emulator served it: the delays it imposed and the times it wrote."""

    request_id: str
    fault: str | None
    prompt_tokens: int
    output_tokens: int
    imposed_ttft_s: float
    imposed_itl_s: float
    #: queued → a ``--max-num-seqs`` slot (vLLM's ``queue_time_ms``)
    queue_s: float = 0.0
    #: arrival → the stream's first event, stamped as its write() returned (a chat stream's role announcement,
    #: ``message_start``, ``response.created``: written as the request takes its slot); None: nothing streamed
    ttfc_s: float | None = None
    #: arrival → the first token's event, stamped as its write() returned
    ttft_s: float | None = None
    #: arrival → just before that write(): with ``ttft_s`` it brackets when the first token left (a server
    #: preempted right after the write stamps ``ttft_s`` late by as much)
    ttft_before_write_s: float | None = None
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
    #: the trace id of the request's W3C ``traceparent`` header; "" when it sent none (or not a valid one)
    trace_id: str = ""
    # The parts vLLM's per-request metrics name (``--enable-per-request-metrics``), on the same clock as the rest:
    #: arrival → queued (``--frontend-ms``: the front end, outside the per-request metrics)
    frontend_s: float = 0.0
    #: the slot → the first token's event (vLLM's ``time_to_first_token_ms``: prefill); None: no token written
    server_ttft_s: float | None = None
    #: the first token's event → the last's (``generation_time_ms``: decode); None: no token written
    decode_s: float | None = None
    #: ``decode_s`` / (output tokens − 1) (``mean_itl_ms``); None below two tokens
    mean_itl_s: float | None = None
    #: the API it came by (``_config.ENDPOINTS``): its token events are that API's (``ttft_s`` and ``itl_s`` time
    #: the events that carry tokens on its wire: not a Messages ``content_block_start`` nor a Responses ``*.added``)
    api: str = "chat"

    def decoded(self, decode_s: float, tokens: int) -> None:
        """Set the decode (first → last token) and the mean gap between its ``tokens`` output tokens."""
        self.decode_s = decode_s
        self.mean_itl_s = decode_s / (tokens - 1) if tokens > 1 else None

    def note_event(
        self,
        now: float,
        arrived: float,
        token_t: float,
        sent: bool,
        token_event: bool,
        tool_event: bool,
        k: int,
    ) -> float:
        """The truth log's times of one step just written at ``now``: the first chunk, the first token and each gap
        between the events that carry tokens on this API's wire, the tool call's. Returns when the newest token event
        was written (``token_t`` unless this step was one): the next gap starts there."""
        if sent and self.ttfc_s is None:
            self.ttfc_s = now - arrived
        if token_event:
            if self.ttft_s is None:
                self.ttft_s = now - arrived
            else:
                self.itl_s.append(now - token_t)
            token_t = now
        if tool_event:
            if sent and self.ttft_tool_s is None:
                self.ttft_tool_s = now - arrived
            self.tool_call_s = now - arrived
            self.tool_call_tokens = (self.tool_call_tokens or 0) + k
        return token_t


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
        "ttfc_s": t.ttfc_s,
        "ttft_s": t.ttft_s,
        "ttft_before_write_s": t.ttft_before_write_s,
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
        "trace_id": t.trace_id,
        "frontend_s": t.frontend_s,
        "server_ttft_s": t.server_ttft_s,
        "decode_s": t.decode_s,
        "mean_itl_s": t.mean_itl_s,
        "api": t.api,
    }


def per_request_metrics(t: Truth) -> dict[str, float | None]:
    """The ``metrics`` object vLLM's ``--enable-per-request-metrics`` puts on the final usage chunk, from the truth:
    milliseconds, a part ``None`` where it is unknown, as vLLM sends them."""
    inference_s = t.server_ttft_s + t.decode_s if t.server_ttft_s is not None and t.decode_s is not None else None
    return {
        "time_to_first_token_ms": _ms(t.server_ttft_s),
        "generation_time_ms": _ms(t.decode_s),
        "queue_time_ms": _ms(t.queue_s),
        "mean_itl_ms": _ms(t.mean_itl_s),
        "tokens_per_second": t.output_tokens / inference_s if inference_s else None,
        "speculative_decoding": None,
    }


def trace_id_of(traceparent: str | None) -> str:
    """The trace id of a W3C ``traceparent`` header (``00-<32 hex>-<16 hex>-<2 hex>``), or "" when it is not one."""
    parts = (traceparent or "").strip().split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return ""
    trace = parts[1].lower()
    return trace if all(c in "0123456789abcdef" for c in trace) and trace.strip("0") else ""


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def prompt_digest(body: dict[str, Any]) -> str:
    """A short hash of the request's messages or prompt (not the model, ids or sampling options)."""
    asked = body.get("messages") if body.get("messages") is not None else body.get("prompt")
    return hashlib.sha256(json.dumps(asked, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
