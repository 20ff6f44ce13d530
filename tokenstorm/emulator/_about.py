"""What the emulator says of itself, in vLLM's words: its version (``GET /version``), its model list
(``GET /v1/models``, with ``max_model_len``) and its engine configuration (the labels of the
``vllm:cache_config_info`` gauge on ``/metrics``) — each from its own settings, so the deployment a
load test captures from it says what was emulated, and never passes for a real vLLM's."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from ._config import EmulatorConfig

__all__ = ["cache_config_labels", "config_body", "models_body", "server_version"]


def server_version() -> str:
    """``/version``'s ``version``: ``tokenstorm-emulator <tokenstorm's version>`` (not a vLLM version)."""
    try:
        version = metadata.version("tokenstorm")
    except metadata.PackageNotFoundError:  # a plain checkout, not installed
        version = "unknown"
    return f"tokenstorm-emulator {version}"


def models_body(config: EmulatorConfig) -> dict[str, Any]:
    """``/v1/models``: the one model served, owned by ``tokenstorm`` (how a load test knows it is SIMULATED)."""
    entry = {"id": config.model, "object": "model", "owned_by": "tokenstorm", "max_model_len": config.max_model_len}
    return {"object": "list", "data": [entry]}


def cache_config_labels(config: EmulatorConfig) -> dict[str, str]:
    """The labels of ``vllm:cache_config_info`` as vLLM names them, for what the emulator models: a
    KV cache of ``kv_cache_tokens`` in blocks of ``block_size``; prefix caching on unless
    ``prefix_cache_blocks`` is 0; no GPU (so no ``gpu_memory_utilization``)."""
    return {
        "block_size": str(config.block_size),
        "cache_dtype": "auto",
        "enable_prefix_caching": str(config.prefix_cache_blocks > 0),
        "engine": "0",
        "kv_cache_size_tokens": str(config.kv_cache_tokens),
        "num_gpu_blocks": str(config.kv_cache_tokens // config.block_size),
    }


def config_body(config: EmulatorConfig, seed: int) -> dict[str, Any]:
    """``/emulator/config``: the settings tests read back (``seed``: the one this server draws from)."""
    return {
        "ttft_s": config.ttft_s,
        "itl_s": config.itl_s,
        "max_num_seqs": config.max_num_seqs,
        "block_size": config.block_size,
        "prefix_cache_blocks": config.prefix_cache_blocks,
        "tool_call_share": config.tool_call_share,
        "tool_calls": config.tool_calls,
        "seed": seed,
        "wrong": config.wrong,
        "wrong_rise": config.wrong_rise,
        "frontend_s": config.frontend_s,
        "per_request_metrics": config.per_request_metrics,
        "endpoints": list(config.endpoints),
    }
