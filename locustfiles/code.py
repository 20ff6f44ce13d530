"""Code completion: short prefixes of real Python code, 16-128 output tokens — latency-critical.

locust -f locustfiles/code.py                  # web UI; no --host: built-in emulator (SIMULATED)
locust -f locustfiles/code.py --headless -u 10 -r 2 -t 5m --host http://gpu:8000 --slo slo.yaml
"""

import _path  # noqa: F401  (tokenstorm from this checkout)

from workloads.locust_plugin import CodeUser, install

install()

__all__ = ["CodeUser"]
