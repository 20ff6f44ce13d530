"""Settings of the emulated vLLM server: latency model, capacity and faults."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ENDPOINTS", "FAULT_KINDS", "REASONING_FORMATS", "WRONG_KINDS", "EmulatorConfig"]

#: Faults the emulator can inject, by the name used in ``--fault`` and ``X-Emulator-Fault``.
#: ``echo_auth``: an HTTP 500 whose message repeats the request's credentials, as some gateways do.
#: ``endless``: an answer that never ends (past ``max_tokens``, no finish), see ``_endless``.
FAULT_KINDS = ("429", "500", "503", "refuse", "drop", "malformed", "stall", "no_done", "echo_auth", "endless")
#: The APIs that answer with tokens, by the name ``--endpoints`` gives them: ``/v1/chat/completions``,
#: ``/v1/completions``, ``/v1/messages`` (Anthropic Messages) and ``/v1/responses`` (OpenAI Responses).
ENDPOINTS = ("chat", "completions", "messages", "responses")
#: How reasoning is streamed (``--reasoning-format``): a field, tags in content, or a pre-filled tag.
REASONING_FORMATS = ("field", "tags", "prefilled")
#: Wrong answers the emulator can give on purpose, by the name of their knob (``--wrong-<name>``, ``_`` as ``-``)
#: and in the truth log's ``wrong``; what each spoils is said in ``_wrong``.
WRONG_KINDS = ("needle", "cjk", "syntax", "script", "repeat", "cut", "tool_json", "consistency")


@dataclass(slots=True)
class EmulatorConfig:
    """The emulator's latency model. Defaults resemble a loaded real deployment.

    TTFT = ``frontend_s`` (arrival → queued) + queue wait (``max_num_seqs`` slots) + ``ttft_s`` +
    ``prefill_s_per_token`` x the prompt tokens the prefix cache did not hold; then one chunk of
    ``tokens_per_chunk`` tokens every ``itl_s`` x tokens_per_chunk, each deadline jittered by up to
    ±``jitter_s``. Deadlines are absolute, so delays never accumulate.
    """

    model: str = "tokenstorm-emulated"
    ttft_s: float = 0.25
    prefill_s_per_token: float = 0.0001
    itl_s: float = 0.02
    jitter_s: float = 0.0
    tokens_per_chunk: int = 1
    max_num_seqs: int = 256
    #: arrival → queued: the front end's time (vLLM's HTTP server, chat template, tokenisation) before a request
    #: waits for a slot
    frontend_s: float = 0.0
    #: the final usage chunk (and a whole answer) carries the request's own timing in ``metrics``, as vLLM
    #: started with ``--enable-per-request-metrics``
    per_request_metrics: bool = False
    max_model_len: int = 131072
    kv_cache_tokens: int = 1_000_000
    #: tokens per KV-cache block, as vLLM's --block-size: the prefix cache's unit (and said in /metrics'
    #: vllm:cache_config_info)
    block_size: int = 16
    #: blocks the prefix cache holds (least recently used evicted first); 0: no prefix caching
    prefix_cache_blocks: int = 8192
    #: share of chat requests with ``tools`` and ``tool_choice`` "auto" (or none given) answered with a tool call
    tool_call_share: float = 0.8
    #: calls tools, as vLLM with ``--enable-auto-tool-choice --tool-call-parser``; False: a stock ``vllm serve``,
    #: which refuses every ``tool_choice`` but "none" with HTTP 400 (``--no-tool-calls``)
    tool_calls: bool = True
    natural_output_tokens: int = 200
    empty_chunk_share: float = 0.0
    reasoning_share: float = 0.3
    reasoning_format: str = "field"
    #: seed of every random draw; ``None``: a fresh one per server (``EmulatorServer.seed`` says which)
    seed: int | None = None
    faults: dict[str, float] = field(default_factory=dict)
    stall_s: float = 3600.0
    truth_log: str | None = None
    api_key: str | None = None  # like vLLM's --api-key: /v1/* answers 401 without "Bearer <key>"
    #: probability of each wrong answer (``WRONG_KINDS``) where it applies; none given: every answer right
    wrong: dict[str, float] = field(default_factory=dict)
    #: the wrong answers' rates scale with load: rate x min(1, running / wrong_rise); 0: flat
    wrong_rise: int = 0
    #: the APIs served (``ENDPOINTS``); the others' routes answer 404 as a server without them does
    endpoints: tuple[str, ...] = ENDPOINTS

    def validate(self) -> None:
        """Raise ``ValueError`` with a one-line reason if a setting makes no sense."""
        for name in ("ttft_s", "prefill_s_per_token", "itl_s", "jitter_s", "frontend_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.reasoning_format not in REASONING_FORMATS:
            raise ValueError(f"reasoning_format must be one of {', '.join(REASONING_FORMATS)}")
        if not 0.0 <= self.reasoning_share <= 1.0:
            raise ValueError("reasoning_share must be in [0, 1]")
        if not 0.0 <= self.tool_call_share <= 1.0:
            raise ValueError("tool_call_share must be in [0, 1]")
        if self.prefix_cache_blocks < 0:
            raise ValueError("prefix_cache_blocks must be >= 0")
        if self.tokens_per_chunk < 1 or self.max_num_seqs < 1:
            raise ValueError("tokens_per_chunk and max_num_seqs must be >= 1")
        if self.block_size < 1:
            raise ValueError("block_size must be >= 1")
        for kind, prob in self.faults.items():
            if kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULT_KINDS)}")
            if not 0.0 <= prob <= 1.0:
                raise ValueError(f"fault {kind} probability must be in [0, 1]")
        for kind, prob in self.wrong.items():
            if kind not in WRONG_KINDS:
                raise ValueError(f"unknown wrong answer {kind!r}; known: {', '.join(WRONG_KINDS)}")
            if not 0.0 <= prob <= 1.0:
                raise ValueError(f"wrong_{kind} must be in [0, 1]")
        if self.wrong_rise < 0:
            raise ValueError("wrong_rise must be >= 0")
        for name in self.endpoints:
            if name not in ENDPOINTS:
                raise ValueError(f"unknown endpoint {name!r}; known: {', '.join(ENDPOINTS)}")
