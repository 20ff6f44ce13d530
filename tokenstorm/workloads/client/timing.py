"""Turns timed SSE payloads of an OpenAI-style stream into the metrics of DESIGN.md.

Definitions (the ones users check against vLLM's own benchmark):

* a *token event* is a chunk whose ``choices[0]`` carries generated output — ``delta.content``,
  ``delta.reasoning_content``/``delta.reasoning`` or ``delta.tool_calls`` for chat, ``text``
  for completions — **including an empty string** (vLLM holds back partial UTF-8 and still
  emits the chunk). The role-only chunk that opens a chat stream is not one, nor is a
  usage-only chunk. When the server sends ``continuous_usage_stats`` the cumulative
  ``completion_tokens`` says how many tokens each chunk carried; a chunk that added none is
  not a token event.
* TTFT: sent → first token event. ITL: the gaps between successive token events; a chunk
  carrying k > 1 tokens contributes its gap split into k equal parts (the first token event's
  extra tokens get gaps of 0), so there is one ITL per output token after the first.
* E2E: sent → last token event (the ``[DONE]`` time is kept separately).
* TPOT: (E2E − TTFT) / (output_tokens − 1), with output tokens from the server's usage.
* Reasoning: events carrying ``reasoning_content``/``reasoning``, or — for servers without a
  reasoning parser — ``content`` inside ``<think>…</think>`` (the markers are configurable),
  including streams that start inside a ``<think>`` the chat template pre-filled, where only
  ``</think>`` appears: everything before it was reasoning. TTFT-to-answer is sent → the first
  token event after the reasoning.
* Tool calls (``delta.tool_calls``, output like content for ITL and TPOT): time to the first tool-call
  delta (the call's id and name) and to the complete call — the last event carrying ``tool_calls`` (the
  last argument fragment), or the finish after it when that carried tokens — the calls streamed (distinct
  indices) and the tokens of the call's events.
* A finish chunk whose delta is empty but whose usage says it carried tokens (vLLM holds a tool call's
  closing tokens, or text its parsers kept back, until the finish) is a token event: those tokens are
  output like the rest, so there is still one ITL per output token after the first.
* Cached prompt tokens: ``usage.prompt_tokens_details.cached_tokens`` (the server's prefix-cache hit).
* The server's own timing: the top-level ``metrics`` of a chunk without choices (vLLM's final usage chunk,
  ``--enable-per-request-metrics``), kept whole for :mod:`.server_timing`.
"""

from __future__ import annotations

from typing import Any

from ..rundir.records import ErrorCategory
from .chunks import EXCERPT, StreamError, cached_tokens, classify, parse_object, raise_error_event
from .limits import ResponseCap

__all__ = ["EXCERPT", "THINK_TAGS", "StreamError", "StreamTimer", "cached_tokens", "parse_object"]


#: the markers models without a reasoning parser put around their reasoning in ``content``
THINK_TAGS = ("<think>", "</think>")
_UNDECIDED, _IN_THINK, _ANSWERING, _OFF = 0, 1, 2, 3


class StreamTimer:
    """Accumulates per-event timing for one streamed response. Times are seconds since send."""

    __slots__ = (
        "_cap",
        "_close0",
        "_keep_tools",
        "_last_completion_tokens",
        "_last_token_t",
        "_nonblank",
        "_reasoning_seen",
        "_think",
        "_think_probe",
        "_think_state",
        "_undecided_events",
        "_undecided_tokens",
        "cached_tokens",
        "done_t",
        "finish_reason",
        "first_answer_t",
        "first_chunk_t",
        "first_token_t",
        "first_tool_t",
        "first_visible_t",
        "itl_gaps",
        "last_token_t",
        "last_tool_t",
        "late_events",
        "output_tokens",
        "prompt_tokens",
        "reasoning_events",
        "reasoning_tokens",
        "response_id",
        "server_metrics",
        "texts",
        "token_events",
        "tool_tokens",
        "tools",
        "ttft_late",
    )

    def __init__(
        self,
        collect_text: bool = False,
        think_tags: tuple[str, str] | None = THINK_TAGS,
        cap: ResponseCap | None = None,
    ) -> None:
        #: past its tokens, the stream is cut (``oversized``): what was read up to then stays
        self._cap = cap
        self.texts: list[str] | None = [] if collect_text else None
        self.first_chunk_t: float | None = None
        self.first_token_t: float | None = None
        self.first_visible_t: float | None = None
        self.first_answer_t: float | None = None
        self.last_token_t: float | None = None
        self.done_t: float | None = None
        self.itl_gaps: list[float] = []
        self.token_events = 0
        #: token events that may carry a later packet's stamp (counted by the reader, see client.py)
        self.late_events = 0
        self.ttft_late = False
        self.reasoning_events = 0
        self.reasoning_tokens = 0
        self.finish_reason: str | None = None
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None
        self.response_id: str | None = None
        #: usage.prompt_tokens_details.cached_tokens (the server's prefix-cache hit), when reported
        self.cached_tokens: int | None = None
        #: the ``metrics`` object of the final usage chunk (the server's timing of the request), when sent
        self.server_metrics: Any = None
        #: tool calls by their stream index: [id, name, argument fragments] (fragments kept only with collect_text)
        self.tools: dict[int, list[Any]] = {}
        self.first_tool_t: float | None = None
        self.last_tool_t: float | None = None
        self.tool_tokens = 0
        self._keep_tools = collect_text
        self._last_token_t: float | None = None
        self._last_completion_tokens: int | None = None
        self._reasoning_seen = False
        self._think = think_tags
        self._close0 = think_tags[1][:1] if think_tags else ""
        self._think_state = _UNDECIDED if think_tags else _OFF
        self._think_probe = ""  # the end of the content so far, to find a marker split across chunks
        self._undecided_events = 0  # content events before any marker: reasoning if "</think>" follows
        self._undecided_tokens = 0
        self._nonblank = False

    def on_event(self, payload: bytes, t: float) -> None:
        """Account for one SSE ``data`` payload that arrived ``t`` seconds after send."""
        if self.first_chunk_t is None:
            self.first_chunk_t = t
        if payload == b"[DONE]":
            self.done_t = t
            return
        if self.done_t is not None:
            return  # data after [DONE] carries nothing we time
        self.on_chunk(parse_object(payload), t)

    def on_chunk(self, chunk: dict[str, Any], t: float) -> None:
        """Account for one parsed chunk of an OpenAI-style stream that arrived ``t`` seconds after send (the
        other APIs' readers, :mod:`.api_streams`, hand their token events over in this shape)."""
        choices = chunk.get("choices")
        if not choices and "error" in chunk:
            raise_error_event(chunk["error"])
        if self.response_id is None:
            rid = chunk.get("id")
            if isinstance(rid, str):
                self.response_id = rid
        usage = chunk.get("usage")
        new_tokens: int | None = None
        if usage is not None and isinstance(usage, dict):
            completion = usage.get("completion_tokens")
            if isinstance(completion, int):
                if self._cap is not None and completion > self._cap.tokens:
                    raise StreamError(ErrorCategory.OVERSIZED, self._cap.tokens_detail())
                new_tokens = completion - (self._last_completion_tokens or 0)
                self._last_completion_tokens = self.output_tokens = completion
            prompt = usage.get("prompt_tokens")
            if isinstance(prompt, int):
                self.prompt_tokens = prompt
            if "prompt_tokens_details" in usage:
                self.cached_tokens = cached_tokens(usage)
        if not choices:
            metrics = chunk.get("metrics")
            if metrics is not None:
                self.server_metrics = metrics
            return
        choice = choices[0]
        if not isinstance(choice, dict):
            raise StreamError(ErrorCategory.MALFORMED_CHUNK, "choices[0] is not an object")
        finish = choice.get("finish_reason")
        if finish is not None:
            self.finish_reason = str(finish)
        delta = choice.get("delta")
        if type(delta) is dict and len(delta) == 1 and type(piece := delta.get("content")) is str:
            # The common chunk, answer text only (what classify() says of it, without the call).
            if new_tokens == 0:
                return
            k = new_tokens or 1
            if self._think_state >= _ANSWERING and self.texts is None:
                self._on_token(t, k, bool(piece), True, False)
            elif (
                self._nonblank
                and self._think_state < _ANSWERING
                and not self._think_probe
                and self._close0 not in piece
            ):
                # the common chunk of a model without markers: counted only
                self._undecided_events += 1
                self._undecided_tokens += k
                if self.texts is not None:
                    self.texts.append(piece)
                self._on_token(t, k, bool(piece), True, False)
            else:
                self._on_answer(choice, delta, t, k, bool(piece), True, False)
            return
        is_token, visible, answer, reasoning, calls = classify(choice, delta)
        if not is_token:
            if finish is not None and new_tokens:
                # Tokens vLLM held back (a tool call's closing tokens, text its parsers kept) come with the finish
                # as an empty delta: output like the rest (one ITL per token), and a tool call is complete here.
                if self.tools:
                    self.last_tool_t = t
                    self.tool_tokens += new_tokens
                self._on_token(t, new_tokens, False, bool(self.tools), False)
            return
        if calls:
            self._on_tool_calls(calls, t, new_tokens)
        if new_tokens == 0:
            return
        k = new_tokens or 1
        if reasoning:
            self._think_state = _OFF  # the server's reasoning parser separates it: no markers to read
            self._on_token(t, k, visible, answer, reasoning)
        elif answer and (self._think_state < _ANSWERING or self.texts is not None):
            self._on_answer(choice, delta, t, k, visible, answer, reasoning)
        else:
            self._on_token(t, k, visible, answer, reasoning)

    def _on_answer(
        self, choice: dict[str, Any], delta: Any, t: float, k: int, visible: bool, answer: bool, reasoning: bool
    ) -> None:
        """A token event of answer text while the think markers are still read, or the text is kept."""
        piece = delta.get("content") if type(delta) is dict else None  # chat only: completions have no template
        if self._think_state < _ANSWERING and type(piece) is str:
            if self._nonblank and not self._think_probe and self._close0 not in piece:
                self._undecided_events += 1  # the common chunk of a model without markers: counted only
                self._undecided_tokens += k
            else:
                answer, reasoning, piece = self._tags(piece, k)
        if self.texts is not None and answer:
            if type(delta) is not dict:
                piece = choice.get("text")  # a completion's text: kept (for its checks), never read for tags
            if type(piece) is str:
                self.texts.append(piece)
        self._on_token(t, k, visible, answer, reasoning)

    def check_cap(self, output_tokens: int) -> None:
        """Cut the stream (``oversized``) when the server says it has sent more tokens than the cap allows."""
        if self._cap is not None and output_tokens > self._cap.tokens:
            raise StreamError(ErrorCategory.OVERSIZED, self._cap.tokens_detail())

    def _on_tool_calls(self, calls: list[Any], t: float, new_tokens: int | None) -> None:
        """Account for one event's ``delta.tool_calls``: a call's first delta (id, name) or an argument fragment."""
        if self.first_tool_t is None:
            self.first_tool_t = t
        self.last_tool_t = t
        if new_tokens != 0:
            self.tool_tokens += new_tokens or 1
        for call in calls:
            if type(call) is not dict:
                raise StreamError(ErrorCategory.MALFORMED_CHUNK, f"delta.tool_calls holds a non-object: {call!r:.200}")
            index = call.get("index", 0)
            if type(index) is not int:
                raise StreamError(
                    ErrorCategory.MALFORMED_CHUNK, f"delta.tool_calls[].index is not a number: {call!r:.200}"
                )
            entry = self.tools.get(index)
            if entry is None:
                entry = self.tools[index] = ["", "", []]
            if type(call.get("id")) is str and call["id"]:
                entry[0] = call["id"]
            function = call.get("function")
            if type(function) is dict:
                if type(function.get("name")) is str and function["name"]:
                    entry[1] = function["name"]
                if self._keep_tools and type(function.get("arguments")) is str:
                    entry[2].append(function["arguments"])

    def collected_tool_calls(self) -> list[dict[str, Any]]:
        """The streamed tool calls, in index order, as a chat history's assistant message carries them."""
        return [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "".join(args)}}
            for call_id, name, args in (self.tools[i] for i in sorted(self.tools))
        ]

    def _tags(self, text: str, k: int) -> tuple[bool, bool, str]:
        """Classify one content event by the think markers: ``(answer, reasoning, answer text)``."""
        assert self._think is not None
        opening, closing = self._think
        probe = self._think_probe + text
        if self._think_state == _UNDECIDED and not self._nonblank:
            lead = probe.lstrip()
            if lead.startswith(opening):
                self._think_state = _IN_THINK  # reasoning from here, closed or not (max_tokens may cut it)
            elif lead and not opening.startswith(lead):
                self._nonblank = True  # the text does not open with the marker
        elif self._think_state == _UNDECIDED and opening in probe:
            self._think_state = _OFF  # "<think>" in the middle of an answer: text about the tags, not reasoning
            return True, False, text
        end = probe.find(closing)
        if end < 0:
            self._think_probe = _marker_start(probe, closing)
            if self._think_state == _IN_THINK:
                return False, True, ""
            self._undecided_events += 1  # an answer unless "</think>" comes: then it was reasoning
            self._undecided_tokens += k
            return True, False, text
        # The reasoning ends here. Events before it that looked like answer were reasoning.
        self.reasoning_events += self._undecided_events
        self.reasoning_tokens += self._undecided_tokens
        self._undecided_events = self._undecided_tokens = 0
        self._think_state, self._think_probe = _ANSWERING, ""
        if self.texts is not None:
            self.texts.clear()
        rest = probe[end + len(closing) :].lstrip()
        return bool(rest), True, rest

    def _on_token(self, t: float, k: int, visible: bool, answer: bool, reasoning: bool) -> None:
        if self._cap is not None and self.token_events >= self._cap.tokens:
            raise StreamError(ErrorCategory.OVERSIZED, self._cap.tokens_detail())
        self.token_events += 1
        if reasoning:
            self.reasoning_events += 1
            self.reasoning_tokens += k
            self._reasoning_seen = True
        if self.first_token_t is None:
            self.first_token_t = t
            if k > 1:  # tokens that came with the first one arrived with it: zero gaps
                self.itl_gaps.extend([0.0] * (k - 1))
        elif self._last_token_t is not None:
            gap = t - self._last_token_t
            if k == 1:
                self.itl_gaps.append(gap)
            else:
                self.itl_gaps.extend([gap / k] * k)
        if visible and self.first_visible_t is None:
            self.first_visible_t = t
        if answer and self._reasoning_seen and self.first_answer_t is None:
            self.first_answer_t = t
        self._last_token_t = t
        self.last_token_t = t

    @property
    def tpot_s(self) -> float | None:
        """TPOT: (E2E − TTFT) / (output_tokens − 1); ``None`` below two output tokens."""
        if self.first_token_t is None or self.last_token_t is None or not self.output_tokens:
            return None
        if self.output_tokens < 2:
            return None
        return (self.last_token_t - self.first_token_t) / (self.output_tokens - 1)

    def finish(self) -> None:
        """Check the stream ended like a completion; raise :class:`StreamError` if not."""
        if self.done_t is None:
            raise StreamError(ErrorCategory.MISSING_DONE, "stream ended without data: [DONE]")
        if self.first_token_t is None:
            raise StreamError(ErrorCategory.NO_TOKENS, "stream carried no token events")
        if self.finish_reason is None:
            raise StreamError(ErrorCategory.NO_FINISH_REASON, "stream ended without a finish_reason")


def _marker_start(text: str, marker: str) -> str:
    """The end of ``text`` that could begin ``marker`` (kept to find one split across chunks)."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-n:]):
            return text[-n:]
    return ""
