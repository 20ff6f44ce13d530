"""The live counterpart of the run directory: the Prometheus series tokenstorm exports
(``--metrics-port``). One home for their names, shared by the exporter
(``workloads/plugin/export/prometheus.py``), the alert rules (``python -m reports alert-rules``) and the
Grafana dashboard (``deploy/grafana/``)."""

from __future__ import annotations

__all__ = [
           "CHECKS",
           "CLIENT_CPU",
           "COUNTERS",
           "E2E",
           "GPU_UTIL",
           "HISTOGRAMS",
           "ITL",
           "OUTPUT_TOKENS",
           "PROMPT_TOKENS",
           "REQUESTS",
           "SEND_LAG",
           "SLO_HISTOGRAMS",
           "TOOL_CALL",
           "TOOL_CALLS",
           "TOOL_CALL_TOKENS",
           "TPOT",
           "TTFT",
           "TTFT_TOOL",
           "USERS",
]  # fmt: skip

TTFT = "tokenstorm_time_to_first_token_seconds"
ITL = "tokenstorm_inter_token_latency_seconds"
TPOT = "tokenstorm_time_per_output_token_seconds"
E2E = "tokenstorm_e2e_request_latency_seconds"
SEND_LAG = "tokenstorm_send_lag_seconds"
TTFT_TOOL = "tokenstorm_time_to_first_tool_call_seconds"
TOOL_CALL = "tokenstorm_tool_call_seconds"
#: counters (exposed with ``_total``)
OUTPUT_TOKENS = "tokenstorm_output_tokens"
REQUESTS = "tokenstorm_requests"  # labels: workload, outcome (ok, error, cancelled), category
#: prompt tokens of successful requests; labels: workload, cache ("hit": the server had them cached, "miss",
#: "unreported": the response gave no cached_tokens) — hit rate: hit / (hit + miss)
PROMPT_TOKENS = "tokenstorm_prompt_tokens"
TOOL_CALLS = "tokenstorm_tool_calls"  # tool calls streamed by successful requests; label: workload
TOOL_CALL_TOKENS = "tokenstorm_tool_call_tokens"  # their argument tokens; label: workload
#: answer checks of successful, judged requests; labels: workload, check, result (pass, fail)
CHECKS = "tokenstorm_checks"
COUNTERS = (OUTPUT_TOKENS, REQUESTS, PROMPT_TOKENS, TOOL_CALLS, TOOL_CALL_TOKENS, CHECKS)
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
    TTFT_TOOL: ("ttft_tool_s", "Request sent to the first tool-call delta (the call's id and name)"),
    TOOL_CALL: ("tool_call_s", "Request sent to the complete tool call (its last argument fragment)"),
}
#: SLO file latency metric -> histogram
SLO_HISTOGRAMS = {"ttft_ms": TTFT, "itl_ms": ITL, "tpot_ms": TPOT, "e2e_ms": E2E, "tool_call_ms": TOOL_CALL}
