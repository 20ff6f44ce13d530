"""The client's cap on one response, derived from the ``max_tokens`` it asked for.

A server that ignores ``max_tokens`` (or loops) would otherwise stream into the client until the request
timeout (600 s by default), its memory growing all the while: the ITL gaps and token events kept per token,
the answer's text when it is collected, a non-streamed body read whole (measured: 8.8 GB in 5 s). A response
past its cap ends as a failure of category ``oversized``, with what was read up to then kept in its record,
and its connection closed (the next request gets a fresh one).

* tokens: :data:`TOKEN_FACTOR` x ``max_tokens`` (x the choices asked for, ``n``), counted as token events or
  as the server's own ``usage.completion_tokens``, whichever passes it first; at least :data:`MIN_TOKENS`;
* bytes of the body: :data:`MIN_BYTES` + :data:`BYTES_PER_TOKEN` per token of the cap — streamed or not
  (a stream's events with logprobs run to ~2 KB a token; a plain one ~300 bytes) — + :data:`PER_SENT_BYTE`
  per byte of the request (an answer may repeat its prompt: ``echo``, ``prompt_logprobs``).

A request sent with no ``max_tokens`` is capped as if it asked for :data:`UNKNOWN_MAX_TOKENS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "BYTES_PER_TOKEN",
    "MIN_BYTES",
    "MIN_TOKENS",
    "PER_SENT_BYTE",
    "TOKEN_FACTOR",
    "UNKNOWN_MAX_TOKENS",
    "ResponseCap",
]

#: a response may carry this many times the ``max_tokens`` it asked for
TOKEN_FACTOR = 4
#: the fewest tokens a response is allowed, however small its ``max_tokens``
MIN_TOKENS = 16
#: body bytes allowed per token of the cap, and on top of them all
BYTES_PER_TOKEN = 4096
MIN_BYTES = 1 << 20
#: body bytes allowed per byte of the request sent (a prompt's logprobs run to ~25 bytes per byte of prompt)
PER_SENT_BYTE = 64
#: the ``max_tokens`` a request sent without one is capped as (the server's own limit is its context length)
UNKNOWN_MAX_TOKENS = 32768


@dataclass(frozen=True, slots=True)
class ResponseCap:
    """How much of one response the client reads before it gives up on it (``oversized``)."""

    #: token events, or ``usage.completion_tokens``, past which a stream is cut
    tokens: int
    #: body bytes past which a response (streamed or not) is cut
    body_bytes: int
    #: the ``max_tokens`` (x choices) the cap was derived from, for the failure's detail
    max_tokens: int

    @classmethod
    def of(cls, body: dict[str, Any], sent_bytes: int = 0) -> ResponseCap:
        """The cap of the request whose JSON body is ``body``, ``sent_bytes`` long (``max_completion_tokens`` wins,
        as on the server; Responses: ``max_output_tokens``)."""
        sent = body.get("max_completion_tokens", body.get("max_tokens", body.get("max_output_tokens")))
        max_tokens = sent if type(sent) is int and sent > 0 else UNKNOWN_MAX_TOKENS
        n = body.get("n")
        choices = n if type(n) is int and n > 1 else 1
        tokens = max(MIN_TOKENS, TOKEN_FACTOR * max_tokens * choices)
        return cls(tokens, MIN_BYTES + BYTES_PER_TOKEN * tokens + PER_SENT_BYTE * sent_bytes, max_tokens * choices)

    def tokens_detail(self) -> str:
        """Why a stream was cut for its tokens."""
        return (
            f"response cut at {self.tokens:,} tokens, {TOKEN_FACTOR}x the max_tokens asked for "
            f"({self.max_tokens:,}): the server did not stop"
        )

    def bytes_detail(self) -> str:
        """Why a response was cut for its size."""
        return (
            f"response cut at {self.body_bytes / (1 << 20):,.1f} MiB, the client's cap for its request and "
            f"max_tokens {self.max_tokens:,}: the server did not stop"
        )
