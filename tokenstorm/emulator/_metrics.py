"""Prometheus metrics under vLLM's own names, so monitors and reports work unchanged."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["EmulatorMetrics"]

_LATENCY_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)


class EmulatorMetrics:
    """The subset of vLLM's ``/metrics`` that tokenstorm reads."""

    def __init__(self, model: str, cache_config: dict[str, str] | None = None) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        self._labels = {"model_name": model, "engine": "0"}
        r = self.registry
        self.running = Gauge("vllm:num_requests_running", "Requests in the batch", labels, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Requests queued", labels, registry=r)
        self.kv_usage = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage (1 = full)", labels, registry=r)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prefill tokens", labels, registry=r)
        self.generation_tokens = Counter("vllm:generation_tokens", "Generated tokens", labels, registry=r)
        self.preemptions = Counter("vllm:num_preemptions", "Preemptions", labels, registry=r)
        self.prefix_queries = Counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            labels,
            registry=r,
        )
        self.prefix_hits = Counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", labels, registry=r
        )
        self.success = Counter("vllm:request_success", "Finished requests", [*labels, "finished_reason"], registry=r)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "TTFT", labels, buckets=_LATENCY_BUCKETS, registry=r)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "ITL", labels, buckets=_LATENCY_BUCKETS, registry=r)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "E2E", labels, buckets=_LATENCY_BUCKETS, registry=r)
        if cache_config:  # vLLM's engine configuration, as it exposes it: a gauge of 1 with the settings as labels
            info = Gauge(
                "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", sorted(cache_config), registry=r
            )
            info.labels(**cache_config).set(1)
        for metric in (
            self.running,
            self.waiting,
            self.kv_usage,
            self.prompt_tokens,
            self.generation_tokens,
            self.preemptions,
            self.prefix_queries,
            self.prefix_hits,
            self.ttft,
            self.itl,
            self.e2e,
        ):
            metric.labels(**self._labels)

    def lab(self) -> dict[str, str]:
        """The label set every metric carries."""
        return self._labels

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
