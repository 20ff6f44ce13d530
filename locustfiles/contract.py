"""Contract analysis: long contracts (English/Chinese) for structured review — long context.

locust -f locustfiles/contract.py                  # web UI; no --host: built-in emulator (SIMULATED)
locust -f locustfiles/contract.py --headless -u 10 -r 2 -t 5m --host http://gpu:8000 --slo slo.yaml
"""

from tokenstorm.workloads.plugin import ContractUser, install

install()

__all__ = ["ContractUser"]
