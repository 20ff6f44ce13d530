"""SLO capacity search; combine with a traffic locustfile and an SLO file:

    locust -f locustfiles/mixed.py,locustfiles/shape_capacity.py --headless --slo slo.yaml \
        --capacity-start 8 --capacity-step 8 --capacity-step-time 60 --host http://gpu:8000

Raises the users step by step, judges each step against the SLOs (latency percentiles and
error rate), stops at the first step that breaks and writes RUN_DIR/capacity.json with the
highest load that held.
"""

from tokenstorm.workloads.plugin import CapacitySearchShape

__all__ = ["CapacitySearchShape"]
