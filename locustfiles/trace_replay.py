"""Trace replay: a recorded Mooncake JSONL trace's requests sent at their recorded times.

    locust -f locustfiles/trace_replay.py --headless --trace tests/fixtures/traces/mooncake_sample.jsonl \
        --trace-speed 2 --host http://gpu:8000 --slo slo.yaml

Each line of the trace: {"timestamp": ms, "input_length": N, "output_length": M, "hash_ids": [...]}.
Requests are sent open-loop at timestamp / --trace-speed (send_lag_s says how late each went), as
raw completions of input_length tokens whose blocks of --trace-block-size tokens (512) are equal
where their hash ids are (a shared prefix), asking for output_length tokens (ignore_eos). The run
ends when the last reply is in, or at -t. SLOs name the workload "trace".
"""

from tokenstorm.workloads.plugin import install
from tokenstorm.workloads.plugin.shapes.trace import TraceUser, install_trace

install_trace()
install()

__all__ = ["TraceUser"]
