"""Open-loop traffic: requests arrive at a fixed or Poisson rate, whatever the server does.

    locust -f locustfiles/open_loop.py --headless -t 5m --arrival-rate 20 --arrival poisson \
        --host http://gpu:8000 --slo slo.yaml

The mix follows the workload weights (--weights, --workload-file). Each record's send_lag_s
says how late the client sent it against its schedule (coordinated omission made visible).
Distributed runs: --arrival-rate is the run's total; the workers share one schedule, re-split when one is lost.
"""

from tokenstorm.workloads.plugin import OpenLoopUser, install

install()

__all__ = ["OpenLoopUser"]
