"""The live counterpart of the run directory: the Prometheus series tokenstorm exports
(``--metrics-port``). One home for their names, shared by the exporter
(``tokenstorm/workloads/plugin/export/prometheus.py``), the alert rules (``python -m tokenstorm.reports alert-rules``)
and the
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
    "OVERHEAD",
    "PROMPT_TOKENS",
    "REQUESTS",
    "SEND_LAG",
    "SERVER_DECODE",
    "SERVER_HISTOGRAMS",
    "SERVER_ITL",
    "SERVER_QUEUE",
    "SERVER_TTFT",
    "SLO_HISTOGRAMS",
    "TOOL_CALL",
    "TOOL_CALLS",
    "TOOL_CALL_TOKENS",
    "TPOT",
    "TTFT",
    "TTFT_TOOL",
    "USERS",
]

TTFT = "tokenstorm_time_to_first_token_seconds"
ITL = "tokenstorm_inter_token_latency_seconds"
TPOT = "tokenstorm_time_per_output_token_seconds"
E2E = "tokenstorm_e2e_request_latency_seconds"
SEND_LAG = "tokenstorm_send_lag_seconds"
TTFT_TOOL = "tokenstorm_time_to_first_tool_call_seconds"
TOOL_CALL = "tokenstorm_tool_call_seconds"
#: the server's own timing of each request (vLLM's per-request metrics or its ``llm_request`` span)
SERVER_QUEUE = "tokenstorm_server_queue_seconds"
SERVER_TTFT = "tokenstorm_server_time_to_first_token_seconds"
SERVER_DECODE = "tokenstorm_server_decode_seconds"
SERVER_ITL = "tokenstorm_server_inter_token_latency_seconds"
OVERHEAD = "tokenstorm_overhead_seconds"
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
#: the GPU sidecar's gauges (tokenstorm/monitors/_sidecar.py), one series per GPU
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
#: "Where the time went": histogram -> (RequestRecord field, help); labels: workload, target (the A/B target's
#: label, empty in a one-target run). The parts add up: overhead + server queue + server TTFT = the client's
#: TTFT. Server ITL counts each request's mean gap once per gap, so its sum / count is the token-weighted mean,
#: vLLM's ``vllm:inter_token_latency_seconds`` mean.
SERVER_HISTOGRAMS = {
    SERVER_QUEUE: ("server_queue_s", "Time the request waited in the server's queue (queued -> scheduled)"),
    SERVER_TTFT: ("server_ttft_s", "The server's TTFT: scheduled -> first token (prefill)"),
    SERVER_DECODE: ("server_decode_s", "The server's decode time: first -> last token"),
    SERVER_ITL: ("server_itl_s", "The server's mean inter-token gap of each request, counted once per gap"),
    OVERHEAD: ("overhead_s", "TTFT - server queue - server TTFT: front end, tokenisation, network, client"),
}
#: SLO file latency metric -> histogram
SLO_HISTOGRAMS = {"ttft_ms": TTFT, "itl_ms": ITL, "tpot_ms": TPOT, "e2e_ms": E2E, "tool_call_ms": TOOL_CALL}
