"""The live counterpart of the run directory: the Prometheus series tokenstorm exports
(``--metrics-port``). One home for their names, shared by the exporter
(``workloads/plugin/export/prometheus.py``), the alert rules (``python -m reports alert-rules``) and the
Grafana dashboard (``deploy/grafana/``)."""

from __future__ import annotations

__all__ = ["CLIENT_CPU", "E2E", "GPU_UTIL", "HISTOGRAMS", "ITL", "OUTPUT_TOKENS", "REQUESTS", "SEND_LAG",
           "SLO_HISTOGRAMS", "TPOT", "TTFT", "USERS"]  # fmt: skip

TTFT = "tokenstorm_time_to_first_token_seconds"
ITL = "tokenstorm_inter_token_latency_seconds"
TPOT = "tokenstorm_time_per_output_token_seconds"
E2E = "tokenstorm_e2e_request_latency_seconds"
SEND_LAG = "tokenstorm_send_lag_seconds"
#: counters (exposed with ``_total``)
OUTPUT_TOKENS = "tokenstorm_output_tokens"
REQUESTS = "tokenstorm_requests"  # labels: workload, outcome (ok, error, cancelled), category
#: gauges
USERS = "tokenstorm_users"
CLIENT_CPU = "tokenstorm_client_cpu_percent"  # label: worker
#: the GPU sidecar's gauges (monitors/_sidecar.py), one series per GPU
GPU_UTIL = "tokenstorm_gpu_utilization_percent"

#: histogram -> (RequestRecord field, help); labels: workload
HISTOGRAMS = {
    TTFT: ("ttft_s", "Time to first token, as the client measured it"),
    ITL: ("itl_gaps_s", "Gaps between token events, one per output token"),
    TPOT: ("tpot_s", "(E2E - TTFT) / (output tokens - 1)"),
    E2E: ("e2e_s", "Request sent to last token"),
    SEND_LAG: ("send_lag_s", "Open loop: how late a request was sent against its schedule"),
}
#: SLO file latency metric -> histogram
SLO_HISTOGRAMS = {"ttft_ms": TTFT, "itl_ms": ITL, "tpot_ms": TPOT, "e2e_ms": E2E}
