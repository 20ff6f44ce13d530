"""Code completion: short prefixes of real Python code, 16-128 output tokens — latency-critical.

locust -f locustfiles/code_completion.py                  # web UI; no --host: built-in emulator (SIMULATED)
locust -f locustfiles/code_completion.py --headless -u 10 -r 2 -t 5m --host http://gpu:8000 --slo slo.yaml
"""

from tokenstorm.workloads.plugin import CodeUser, install

install()

__all__ = ["CodeUser"]
