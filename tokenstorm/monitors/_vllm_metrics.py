"""vLLM's Prometheus ``/metrics``, parsed with ``prometheus_client``'s parser.

Metric names have moved between vLLM versions; each reading lists every name it has had
(newest first) and takes the first one present. Label sets (several engines or models) are
summed, except KV-cache usage where the fullest engine is what breaks first (max).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tokenstorm.workloads.rundir.samples import ServerSample
from tokenstorm.workloads.rundir.secrets import authorization_header, split_credentials

__all__ = ["MetricsUnavailable", "ServerMetricsScraper", "parse_vllm_metrics"]

_GAUGES = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
}
_KV = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm:cpu_cache_usage_perc")
_COUNTERS = {
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "requests_finished": ("vllm:request_success_total",),
}
_HISTOGRAMS = {
    "ttft_hist": ("vllm:time_to_first_token_seconds",),
    "itl_hist": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2e_hist": ("vllm:e2e_request_latency_seconds",),
}


class MetricsUnavailable(Exception):
    """The target has no usable ``/metrics`` (the message says why, in one line)."""


#: every family a reading uses; the rest of the exposition (~90% of vLLM's ~50 KB) is skipped
_WANTED = tuple(
    sorted({n for names in (*_GAUGES.values(), _KV, *_COUNTERS.values(), *_HISTOGRAMS.values()) for n in names})
)


def _wanted_lines(text: str) -> str:
    """Only the sample, TYPE and HELP lines of the families in ``_WANTED``.

    Parsing all of vLLM's /metrics with prometheus_client takes ~15 ms of CPU; a reading
    needs a tenth of it. A name is kept by prefix (``vllm:x`` keeps ``vllm:x_bucket``,
    ``vllm:x_sum``...); the parser then sees a well-formed, smaller exposition.
    """
    keep = []
    for line in text.split("\n"):  # not splitlines(): label values may hold U+2028 and the like
        name = line[7:] if line.startswith(("# TYPE ", "# HELP ")) else line
        if name.startswith(_WANTED):
            keep.append(line)
    return "\n".join(keep) + "\n"


def parse_vllm_metrics(text: str, epoch_s: float | None = None) -> ServerSample:
    """Turn one ``/metrics`` exposition into a :class:`ServerSample`."""
    sums: dict[str, float] = {}
    maxes: dict[str, float] = {}
    hist: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(_wanted_lines(text)):
        for s in family.samples:
            name = s.name
            if name.endswith("_bucket"):
                base = name[: -len("_bucket")]
                le = s.labels.get("le", "")
                h = hist.setdefault(base, {})
                h[le] = h.get(le, 0.0) + s.value
                continue
            if name.endswith("_sum") or name.endswith("_count"):
                base, _, suffix = name.rpartition("_")
                h = hist.setdefault(base, {})
                h[suffix] = h.get(suffix, 0.0) + s.value
            sums[name] = sums.get(name, 0.0) + s.value
            maxes[name] = max(maxes.get(name, float("-inf")), s.value)
    sample = ServerSample(epoch_s=time.time() if epoch_s is None else epoch_s)
    for attr, names in {**_GAUGES, **_COUNTERS}.items():
        setattr(sample, attr, _first(sums, names))
    sample.kv_cache_usage = _first(maxes, _KV)
    for attr, names in _HISTOGRAMS.items():
        for n in names:
            if n in hist and "count" in hist[n]:
                setattr(sample, attr, hist[n])
                break
    return sample


def _first(values: dict[str, float], names: tuple[str, ...]) -> float | None:
    for n in names:
        if n in values:
            return values[n]
    return None


def looks_like_vllm(sample: ServerSample) -> bool:
    """Whether any vLLM metric was found (a /metrics of something else gives none)."""
    return any(getattr(sample, a) is not None for a in ("running", "waiting", "kv_cache_usage", "generation_tokens"))


class ServerMetricsScraper:
    """Fetches and parses ``BASE_URL/metrics``."""

    def __init__(
        self, base_url: str, timeout_s: float = 5.0, api_key: str | None = None, *, authorization: str | None = None
    ) -> None:
        # user:password@ in the URL: Basic auth (urllib would take them for the host name)
        base, credentials = split_credentials(base_url.rstrip("/"))
        if base.endswith("/v1"):
            base = base[: -len("/v1")]
        self.url = base + "/metrics"
        self._timeout_s = timeout_s
        header = authorization or authorization_header(api_key, credentials)
        self._headers = {"Authorization": header} if header else {}

    def scrape(self) -> ServerSample:
        """One sample; raise :class:`MetricsUnavailable` when there is nothing to read."""
        req = urllib.request.Request(self.url, headers=self._headers)
        try:
            with urllib.request.urlopen(req, timeout=self._timeout_s) as resp:
                text = resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            raise MetricsUnavailable(f"{self.url} answered HTTP {exc.code}") from exc
        except (OSError, ValueError) as exc:
            raise MetricsUnavailable(f"{self.url} unreachable ({_reason(exc)})") from exc
        try:
            sample = parse_vllm_metrics(text)
        except ValueError as exc:
            raise MetricsUnavailable(f"{self.url} is not Prometheus text ({exc})") from exc
        if not looks_like_vllm(sample):
            raise MetricsUnavailable(f"{self.url} has no vllm: metrics")
        return sample


def _reason(exc: Any) -> str:
    reason = getattr(exc, "reason", None) or exc
    return str(reason)[:150]
