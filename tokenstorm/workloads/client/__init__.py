"""The measuring client: one keep-alive HTTP/1.1 connection per user, SSE parsing, and the
stream timer where TTFT, ITL, TPOT and E2E are defined (:mod:`.timing`). No Locust here.

* :mod:`.http` — the HTTP/1.1 connection (gevent socket + llhttp), kernel receive stamps.
* :mod:`.sse` — Server-Sent Events framing.
* :mod:`.timing` — :class:`StreamTimer`: the metric definitions of DESIGN.md.
* :mod:`.request` — :class:`CompletionRequest`: what a user asks for, in which API.
* :mod:`.client` — :class:`LlmClient`: sends a request, fills a ``RequestRecord``.
* :mod:`.api_bodies` — the request body in each API (``--api``: chat, completions, messages, responses).
* :mod:`.api_streams` — the Anthropic Messages and OpenAI Responses streams into the timer.
* :mod:`.reading` — a response's events into the timer, its figures into the record.
* :mod:`.server_timing` — the server's own timing of a request (``metrics``) and its ``traceparent``.
* :mod:`.stall` — the stall timeout (no byte for N s), one timer per request.
* :mod:`.limits` — the cap on one response (a multiple of its ``max_tokens``): past it, ``oversized``.
* :mod:`.backoff` — a user's wait after connection errors (capped exponential, jittered).
* :mod:`.failures` — a failure's category and its detail, secrets masked.
"""

from .api_bodies import in_api
from .client import Answer, CompletionRequest, LlmClient, TargetError
from .sse import SseParser
from .timing import StreamError, StreamTimer

__all__ = [
    "Answer",
    "CompletionRequest",
    "LlmClient",
    "SseParser",
    "StreamError",
    "StreamTimer",
    "TargetError",
    "in_api",
]
